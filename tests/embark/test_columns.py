"""Columns (EMBark's sources adding answer blocks into output columns, and taking gradient columns back) against
index_add_ / index_select along dimension 1, over random unit-aligned column sets; misaligned sets are refused."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.embark.columns import Columns


@st.composite
def cases(draw):
    unit = draw(st.sampled_from([1, 2, 4, 8]))
    n_units = draw(st.integers(1, 12))
    chosen = draw(st.lists(st.integers(0, n_units - 1), unique=True, max_size=n_units))
    cols = [u * unit + j for u in chosen for j in range(unit)]
    b = draw(st.integers(1, 5))
    return unit, n_units * unit, torch.tensor(cols, dtype=torch.int64), b


@settings(max_examples=60, deadline=None)
@given(cases())
def test_add_and_take_equal_dim1_index_ops(case):
    unit, dim, cols, b = case
    g = torch.Generator().manual_seed(dim * 31 + b)
    out = torch.randn(b, dim, generator=g)
    block = torch.randn(b, cols.numel(), generator=g)
    c = Columns(cols, dim, unit)
    want = out.clone().index_add_(1, cols, block)
    c.add_into(out, block)
    assert torch.allclose(out, want, rtol=0, atol=1e-6)
    assert torch.equal(c.take(out), out.index_select(1, cols))


def test_misaligned_columns_are_refused():
    with pytest.raises(ValueError, match="aligned runs of 2"):
        Columns(torch.tensor([1, 2]), 4, 2)
    with pytest.raises(ValueError, match="blocks of 4"):
        Columns(torch.tensor([0, 1]), 8, 4)
