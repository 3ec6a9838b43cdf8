"""The ATen compositions (csrc/*_composed.cpp: the CUDA kernels of route_keys, transpose_segments, jagged_unique,
tt_stages, tt_stages_backward; ecorec_forward / ecorec_backward in test_ecorec_step.py) run here on CPU tensors, under their test-only names dlrmbench_composed::<op>,
against the pure-torch references and the CPU kernels: CI has no GPU, and these are the code a GPU runs. A
composition found in the sources without a case here fails the first test."""
import math
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.core import ops, tt
from impls.core import reference as ref
from reproduce.harness import fingerprint
from tests.core import test_route_keys, test_transpose_segments
from tests.core.test_tt_ops import close, make, tt_cases
from tests.strategies import jagged_batches

CSRC = fingerprint.ROOT / fingerprint.CSRC
composed = torch.ops.dlrmbench_composed


def registered_compositions() -> set[str]:
    """The op names the sources register through DLRMBENCH_COMPOSED."""
    names = set()
    for path in CSRC.glob("*_composed.cpp"):
        names |= set(re.findall(r'^DLRMBENCH_COMPOSED\("(\w+)"', path.read_text(), re.MULTILINE))
    return names


# ecorec_forward / ecorec_backward: tests/core/test_ecorec_step.py (test_composition_equals_the_cpu_kernels);
# ecorec_tables_forward / ecorec_tables_backward: tests/core/test_ecorec_tables.py (the same test's name)
TESTED = {"route_keys", "transpose_segments", "jagged_unique", "tt_stages", "tt_stages_backward", "ecorec_forward",
          "ecorec_backward", "ecorec_tables_forward", "ecorec_tables_backward"}


def test_every_composition_has_a_cpu_twin_and_a_test_here():
    found = registered_compositions()
    assert found == TESTED, f"untested compositions: {sorted(found - TESTED)}; gone: {sorted(TESTED - found)}"
    for name in found:
        assert hasattr(composed, name), f"dlrmbench_composed::{name} is not registered"
    # no composition file registers a CUDA kernel any other way (it would escape the twin)
    for path in CSRC.glob("*_composed.cpp"):
        assert "TORCH_LIBRARY_IMPL" not in path.read_text(), path.name


@settings(max_examples=80, deadline=None)
@given(test_route_keys.cases())
def test_route_keys_composition_equals_reference(case):
    args = test_route_keys.op_args(case)
    got = composed.route_keys(*args)
    for g, w, name in zip(got, ref.route_keys_ref(*args), ("keys", "samples", "shard_counts", "sample_counts")):
        assert torch.equal(g, w), name


def test_route_keys_composition_refuses_what_the_kernel_refuses():
    t = lambda x: torch.tensor(x, dtype=torch.int64)  # noqa: E731
    with pytest.raises(ValueError, match="negative id"):
        composed.route_keys(t([1, -3]), t([0, 1, 2]), 1, t([1, 1]), t([1, 1]), t([0, 1]), t([0, 1]), 2, 0)
    with pytest.raises(ValueError, match="shard number is outside"):
        composed.route_keys(t([1]), t([0, 1]), 1, t([1]), t([1]), t([0]), t([5]), 2, 0)


@settings(max_examples=80, deadline=None)
@given(test_transpose_segments.cases())
def test_transpose_segments_composition_equals_reference(case):
    values, lengths = case
    got = composed.transpose_segments(values, lengths)
    assert got.dtype == values.dtype
    assert torch.equal(got, ref.transpose_segments_ref(values, lengths))


@settings(max_examples=80, deadline=None)
@given(batch=jagged_batches(max_rows=8, max_bag=6))
def test_jagged_unique_composition_equals_reference(batch):
    tables, sf = batch
    T, B = len(tables), sf.batch_size
    got = composed.jagged_unique(sf.values, sf.offsets, T, B)
    want = ref.jagged_unique_ref(sf.values, sf.offsets, T, B)
    for name, g, w in zip(("unique", "unique_offsets", "inverse", "counts", "sorted_positions"), got, want):
        assert g.tolist() == w.tolist(), name


def _args(s, cores):
    return list(cores), list(s.q), list(s.r)


@settings(max_examples=80, deadline=None)
@given(case=tt_cases(), shuffle=st.booleans())
def test_tt_stages_compositions_equal_the_cpu_kernels_and_the_reference(case, shuffle):
    s, cores, prefix_ids, item_group, item_last, gen = make(case, "cpu")
    n = item_group.numel()
    perm = torch.randperm(n, generator=gen) if shuffle else torch.arange(n)
    rows = math.prod(s.p)
    out = torch.empty(n, s.dim)
    composed.tt_stages(*_args(s, cores), prefix_ids, item_group[perm], item_last[perm], out, True, rows)
    want = ops.tt_stages(cores, s, prefix_ids, item_group[perm], item_last[perm])
    close(out, want, 1e-5)
    prefix = ref.tt_prefix_ref(cores, s, prefix_ids)
    close(out, ref.tt_last_ref(prefix, cores, s, item_group, item_last)[perm], 1e-4)

    grad_items = torch.randn(n, s.dim, generator=gen)
    grads = [torch.zeros_like(c) for c in cores]
    composed.tt_stages_backward(*_args(s, cores), prefix_ids, item_group, item_last, grad_items, grads, True, rows)
    kernel = [torch.zeros_like(c) for c in cores]
    ops.tt_stages_backward(cores, s, prefix_ids, item_group, item_last, grad_items, kernel)
    want_prefix, want_last = ref.tt_last_backward_ref(prefix, cores, s, item_group, item_last, grad_items)
    for got, k, w in zip(grads, kernel, [*ref.tt_prefix_backward_ref(cores, s, prefix_ids, want_prefix), want_last]):
        close(got, k, 1e-4)
        close(got, w if w is not None else torch.zeros_like(got), 1e-4)


def test_tt_stages_composition_refuses_a_row_past_the_tables_rows():
    s, cores, _, _, _, _ = make((tt.TTShape.create(24, 8, [4, 4], p=(2, 3, 4), q=(2, 2, 2)), 3, 5, 7), "cpu")
    prefix_ids, item_group, item_last = torch.tensor([5]), torch.tensor([0]), torch.tensor([3])  # row 23
    out = torch.empty(1, s.dim)
    with pytest.raises(ValueError, match="item 0 reads row 23 of a table of 20 rows"):
        composed.tt_stages(*_args(s, cores), prefix_ids, item_group, item_last, out, False, 20)
