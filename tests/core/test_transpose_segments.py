"""transpose_segments (the owners' relayout of received payloads from (source, shard) to (shard, source)) against
its pure-torch reference: random segment tables with empty segments, int64 and float32, and its errors."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.core import ops
from impls.core import reference as ref


@st.composite
def cases(draw):
    G = draw(st.integers(0, 5))
    S = draw(st.integers(0, 6))
    lengths = torch.tensor([[draw(st.integers(0, 7)) for _ in range(S)] for _ in range(G)],
                           dtype=torch.int64).reshape(G, S)
    dtype = draw(st.sampled_from([torch.int64, torch.float32]))
    n = int(lengths.sum())
    values = torch.arange(n, dtype=dtype) * 3 - 5  # distinct, so a misplaced element shows
    return values, lengths


@settings(max_examples=100, deadline=None)
@given(cases())
def test_equals_reference(case):
    values, lengths = case
    got = ops.transpose_segments(values, lengths)
    assert got.dtype == values.dtype
    assert torch.equal(got, ref.transpose_segments_ref(values, lengths))


def test_a_large_payload_equals_reference():
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(0, 5000, (4, 45), generator=g)
    values = torch.randint(0, 1 << 40, (int(lengths.sum()),), generator=g)
    assert torch.equal(ops.transpose_segments(values, lengths), ref.transpose_segments_ref(values, lengths))


@pytest.mark.gpu
@settings(max_examples=30, deadline=None)
@given(cases())
def test_cuda_composition_equals_reference(case):
    values, lengths = case
    got = ops.transpose_segments(values.cuda(), lengths.cuda())
    assert torch.equal(got.cpu(), ref.transpose_segments_ref(values, lengths))


def test_bad_input_is_named():
    t = lambda x: torch.tensor(x, dtype=torch.int64)  # noqa: E731
    with pytest.raises(ValueError, match="lengths add up to 3 but values has 4"):
        ops.transpose_segments(t([1, 2, 3, 4]), t([[1, 2]]))
    with pytest.raises(ValueError, match=r"lengths\[0, 1\] = -1 is negative"):
        ops.transpose_segments(t([1]), t([[2, -1]]))
    with pytest.raises(ValueError, match="lengths must be \\[G, S\\]"):
        ops.transpose_segments(t([1]), t([1]))
    with pytest.raises(ValueError, match="values must be 1-D"):
        ops.transpose_segments(t([[1]]), t([[1]]))
