"""route_keys (EMBark's key routing: a counting sort of every key by the shard holding it) against its pure-torch
reference: random tables, row and column splits, unrouted (DP) tables, empty bags; and its errors."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.core import ops
from impls.core import reference as ref


@st.composite
def cases(draw):
    T = draw(st.integers(1, 5))
    B = draw(st.integers(1, 6))
    r = [draw(st.integers(0, 4)) for _ in range(T)]  # 0: a table that is not routed
    c = [draw(st.integers(1, 3)) for _ in range(T)]
    base, n = [], 0
    for t in range(T):
        base.append(n)
        n += r[t] * c[t]
    perm = draw(st.permutations(range(n))) if n else []
    lengths = [draw(st.integers(0, 4)) for _ in range(T * B)]
    rows = draw(st.integers(1, 40))
    values = [draw(st.integers(0, rows - 1)) for _ in range(sum(lengths))]
    count = draw(st.integers(0, n))
    return T, B, r, c, base, list(perm), lengths, values, count


def op_args(case) -> tuple:
    """route_keys' arguments for a drawn case, as CPU tensors."""
    T, B, r, c, base, perm, lengths, values, count = case
    t = lambda x: torch.tensor(x, dtype=torch.int64)  # noqa: E731
    offsets = torch.cat([t([0]), torch.cumsum(t(lengths), 0)])
    return (t(values), offsets, B, t(r), t(c), t(base), t(perm), len(perm), count)


@settings(max_examples=80, deadline=None)
@given(cases())
def test_equals_reference(case):
    args = op_args(case)
    got, want = ops.route_keys(*args), ref.route_keys_ref(*args)
    for g, w, name in zip(got, want, ("keys", "samples", "shard_counts", "sample_counts")):
        assert torch.equal(g, w), name


@pytest.mark.gpu
@settings(max_examples=30, deadline=None)
@given(cases())
def test_cuda_composition_equals_reference(case):
    args = op_args(case)
    got = ops.route_keys(*(a.cuda() if isinstance(a, torch.Tensor) else a for a in args))
    for g, w in zip(got, ref.route_keys_ref(*args)):
        assert torch.equal(g.cpu(), w)


def test_bad_input_names_table_and_bag():
    t = lambda x: torch.tensor(x, dtype=torch.int64)  # noqa: E731
    with pytest.raises(ValueError, match="table 1, bag 0: negative id -3"):
        ops.route_keys(t([1, -3]), t([0, 1, 2]), 1, t([1, 1]), t([1, 1]), t([0, 1]), t([0, 1]), 2, 0)
    with pytest.raises(ValueError, match="shard number 5 outside"):
        ops.route_keys(t([1]), t([0, 1]), 1, t([1]), t([1]), t([0]), t([5]), 2, 0)
    with pytest.raises(ValueError, match="offsets has 3 entries"):
        ops.route_keys(t([1]), t([0, 1, 1]), 1, t([1]), t([1]), t([0]), t([0]), 1, 0)
