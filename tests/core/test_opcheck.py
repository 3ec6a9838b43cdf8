"""torch.library.opcheck on every op of the dlrmbench library with CPU samples: the schema (every argument an op
writes is annotated ``Tensor(a!)`` and nothing else is written, no output aliases an input), the fake kernel
(shapes, dtypes and devices as the CPU kernel's, data-dependent sizes as unbacked symbols), the autograd registration
(none of the ops is differentiable by itself: the TT schedules wrap them in autograd.Function) and AOT dispatch.
An op registered in the library without samples here fails the first test. The test-only twins of the CUDA
compositions (dlrmbench_composed::*, schemas inferred from C++) are not library ops: tests/core/test_composed.py runs
them, and the ops they implement on a GPU are checked here under their library schemas."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.core import ops  # noqa: F401  (loads the library)
from impls.core import tt
from tests.core import test_route_keys as route_cases
from tests.core import test_ecorec_tables as ecorec_tables
from tests.core.test_ecorec_step import cores_of, step_cases
from tests.core import test_transpose_segments as segment_cases
from tests.core.test_tt_ops import make, tt_cases
from tests.strategies import jagged_batches

LIB = torch.ops.dlrmbench
# ops without a tensor argument or result: there is nothing for a fake kernel to say, nor for aliasing (the CPU
# vector ISA query and choice); opcheck needs a tensor to dispatch on
NO_TENSORS = {"cpu_isas", "cpu_isa", "set_cpu_isa"}


def library_ops() -> set[str]:
    """Every op the native library registers under torch.ops.dlrmbench."""
    return {n.split("::", 1)[1] for n in torch._C._dispatch_get_all_op_names() if n.startswith("dlrmbench::")}


def check(name: str, *args) -> None:
    torch.library.opcheck(getattr(LIB, name).default, args)


def tt_args(case):
    """(cores, q, r, prefix_ids, item_group, item_last, shape) of a drawn TT case."""
    s, cores, prefix_ids, item_group, item_last, _ = make(case, "cpu")
    return cores, list(s.q), list(s.r), prefix_ids, item_group, item_last, s


def jagged_args(draw_case):
    tables, sf = draw_case
    rows = torch.tensor([t.num_embeddings for t in tables], dtype=torch.int64)
    return sf.values, sf.offsets, rows, sf.batch_size, len(tables)


SAMPLED = {"bounds_check", "jagged_unique", "tt_prefix", "tt_last", "tt_last_backward", "tt_prefix_backward",
           "tt_stages", "tt_stages_backward", "raise_index_error", "gather_pool", "scatter_add_rows", "route_keys",
           "transpose_segments", "counter_uniform", "ecorec_forward", "ecorec_backward", "ecorec_tables_forward",
           "ecorec_tables_backward", "ttrec_tables_forward", "ttrec_tables_backward", "elrec_tables_forward",
           "elrec_tables_backward"}


def test_every_op_has_samples_here():
    found = library_ops()
    missing = found - SAMPLED - NO_TENSORS
    assert not missing, f"ops without an opcheck sample: {sorted(missing)}"
    assert not (SAMPLED | NO_TENSORS) - found, f"gone from the library: {sorted((SAMPLED | NO_TENSORS) - found)}"


@settings(max_examples=8, deadline=None)
@given(jagged_batches())
def test_jagged_ops(case):
    values, offsets, rows, B, T = jagged_args(case)
    check("bounds_check", values, offsets, rows, B)
    check("jagged_unique", values, offsets, T, B)


@settings(max_examples=8, deadline=None)
@given(tt_cases())
def test_tt_prefix_and_last_stage_ops(case):
    cores, q, r, prefix_ids, item_group, item_last, s = tt_args(case)
    G, n = prefix_ids.numel(), item_group.numel()
    prefix = torch.randn(G, s.prefix_width)
    check("tt_prefix", cores, q, r, prefix_ids, torch.empty(G, s.prefix_width), True)
    check("tt_last", prefix, cores, q, r, item_group, item_last, torch.empty(n, s.dim), True)
    check("tt_last_backward", prefix, cores, q, r, item_group, item_last, torch.randn(n, s.dim),
          torch.zeros_like(cores[-1]), torch.empty(G, s.prefix_width), True)
    check("tt_prefix_backward", cores, q, r, prefix_ids, torch.randn(G, s.prefix_width),
          [torch.zeros_like(c) for c in cores[:-1]], True)


@settings(max_examples=8, deadline=None)
@given(tt_cases())
def test_tt_stages_ops(case):
    cores, q, r, prefix_ids, item_group, item_last, s = tt_args(case)
    n = item_group.numel()
    check("tt_stages", cores, q, r, prefix_ids, item_group, item_last, torch.empty(n, s.dim), True, s.num_embeddings)
    check("tt_stages_backward", cores, q, r, prefix_ids, item_group, item_last, torch.randn(n, s.dim),
          [torch.zeros_like(c) for c in cores], True, s.num_embeddings)


@settings(max_examples=8, deadline=None)
@given(step_cases())
def test_ecorec_step_ops(case):
    s, values, offsets, B, m, min_chunk, seed = case
    cores, q, r = cores_of(s, seed), list(s.q), list(s.r)
    check("ecorec_forward", cores, q, r, values, offsets, B, m, min_chunk, s.num_embeddings)
    _, unique, co, occ_bags, bounds, _ = LIB.ecorec_forward(cores, q, r, values, offsets, B, m, min_chunk,
                                                            s.num_embeddings)
    check("ecorec_backward", cores, q, r, unique, co, occ_bags, bounds, torch.randn(B, s.dim),
          [torch.zeros_like(c) for c in cores], s.num_embeddings)


@settings(max_examples=4, deadline=None)
@given(ecorec_tables.batches())
def test_ecorec_tables_ops(case):
    shapes, values, offsets, tables, B, m, min_chunk, seed = case
    cs, per, q, r, rows = ecorec_tables.flat(shapes, [cores_of(s, seed + k) for k, s in enumerate(shapes)])
    check("ecorec_tables_forward", cs, per, q, r, values, offsets, tables, B, m, min_chunk, rows)
    _, *saved = LIB.ecorec_tables_forward(cs, per, q, r, values, offsets, tables, B, m, min_chunk, rows)
    check("ecorec_tables_backward", cs, per, q, r, *saved[:4], [torch.randn(B, s.dim) for s in shapes],
          [torch.zeros_like(c) for c in cs], rows)


@settings(max_examples=4, deadline=None)
@given(ecorec_tables.batches())
def test_ttrec_and_elrec_tables_ops(case):
    shapes, values, offsets, tables, B, m, _, seed = case
    cs, per, q, r, rows = ecorec_tables.flat(shapes, [cores_of(s, seed + k) for k, s in enumerate(shapes)])
    grads, core_grads = [torch.randn(B, s.dim) for s in shapes], [torch.zeros_like(c) for c in cs]
    check("ttrec_tables_forward", cs, per, q, r, values, offsets, tables, B, m, rows)
    check("ttrec_tables_backward", cs, per, q, r, values, offsets, tables, B, m, grads, core_grads, rows)
    check("elrec_tables_forward", cs, per, q, r, values, offsets, tables, B, rows)
    _, *saved = LIB.elrec_tables_forward(cs, per, q, r, values, offsets, tables, B, rows)
    check("elrec_tables_backward", cs, per, q, r, *saved[:3], grads, core_grads, rows)


def test_tt_ops_on_an_sc24_shape():
    """A shape of a real table (ranks 32, the AVX-512 lanes), beside the small drawn ones."""
    s = tt.TTShape.create(27, 32, [32, 32], p=(3, 3, 3), q=(2, 4, 4))
    for test in (test_tt_prefix_and_last_stage_ops, test_tt_stages_ops):
        test.hypothesis.inner_test(case=(s, 6, 13, 7))


@settings(max_examples=8, deadline=None)
@given(rows=st.integers(1, 20), segments=st.integers(0, 8), n=st.integers(0, 30), dim=st.integers(1, 9),
       seed=st.integers(0, 2**16))
def test_row_ops(rows, segments, n, dim, seed):
    n = n if segments else 0  # no segment holds no index
    gen = torch.Generator().manual_seed(seed)
    src = torch.randn(rows, dim, generator=gen)
    index = torch.randint(0, rows, (n,), generator=gen)
    cuts = torch.sort(torch.randint(0, n + 1, (max(segments - 1, 0),), generator=gen))[0]
    seg = torch.cat([torch.zeros(1, dtype=torch.int64), cuts, torch.tensor([n])]) if segments else torch.zeros(
        1, dtype=torch.int64)
    check("gather_pool", src, index, seg, torch.zeros(max(segments, 0), dim), True)
    dst = torch.randint(0, max(segments, 1), (n,), generator=gen)
    check("scatter_add_rows", src, index, dst, torch.zeros(max(segments, 1), dim), True)
    check("counter_uniform", seed, 0, 1, 0, -0.5, 0.5, torch.empty(rows, dim))
    check("counter_uniform", seed, 3, 2, 5, 0.0, 1.0, torch.empty(segments, dim))


@settings(max_examples=8, deadline=None)
@given(route_cases.cases())
def test_route_keys(case):
    check("route_keys", *route_cases.op_args(case))


@settings(max_examples=8, deadline=None)
@given(segment_cases.cases())
def test_transpose_segments(case):
    check("transpose_segments", *case)


def test_raise_index_error_on_a_clean_record():
    check("raise_index_error", torch.empty(0))


@pytest.mark.parametrize("name", sorted(NO_TENSORS))
def test_ops_without_tensors_are_plain_queries(name):
    """What they are, checked here as opcheck cannot: no tensor in the schema."""
    schema = getattr(LIB, name).default._schema
    assert not any("Tensor" in str(a.type) for a in [*schema.arguments, *schema.returns]), str(schema)
