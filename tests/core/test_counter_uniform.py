"""counter_uniform (the counter-based table initializer) against its pure-torch reference, and the dense-table
initializer built on it: any block of a table equals that block of the whole table, generated directly."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.api import TableSpec, table_seed
from impls.core import ops
from impls.core import reference as ref
from impls.core.init import dense_table_init


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**62), row_start=st.integers(0, 2**40), row_step=st.integers(1, 2**20),
       n=st.integers(0, 9), col_start=st.integers(0, 2**16), cols=st.integers(0, 11),
       bound=st.floats(1e-6, 10.0))
def test_op_equals_reference_bitwise(seed, row_start, row_step, n, col_start, cols, bound):
    out = torch.full((n, cols), float("nan"))
    ops.counter_uniform(seed, out, -bound, bound, row_start=row_start, row_step=row_step, col_start=col_start)
    rows = torch.arange(n, dtype=torch.int64) * row_step + row_start
    want = ref.counter_uniform_ref(seed, rows, torch.arange(col_start, col_start + cols), -bound, bound)
    assert torch.equal(out, want)


def test_strided_rows_of_the_output():
    """A view whose rows are not adjacent (a column block of a wider buffer) is filled in place, rest untouched."""
    buf = torch.zeros(6, 10)
    ops.counter_uniform(7, buf[:, 2:5], -1.0, 1.0, col_start=2)
    whole = ops.counter_uniform(7, torch.empty(6, 10), -1.0, 1.0)
    assert torch.equal(buf[:, 2:5], whole[:, 2:5])
    assert not buf[:, :2].any() and not buf[:, 5:].any()


@pytest.mark.parametrize("rows,cols", [(slice(1, None, 3), slice(None)), (slice(4, 9), slice(2, 6)),
                                       (slice(0, None, 4), slice(4, 8)), (slice(10, 10), slice(None))])
def test_a_block_equals_that_block_of_the_whole_table(rows, cols):
    spec = TableSpec("t", 23, 8)
    whole = dense_table_init(spec, seed=5)
    assert torch.equal(dense_table_init(spec, 5, rows=rows, cols=cols), whole[rows, cols])


def test_draws_look_uniform_within_the_bound():
    spec = TableSpec("u", 10_000, 64)
    w = dense_table_init(spec, seed=0)
    b = math.sqrt(1.0 / spec.num_embeddings)
    assert float(w.min()) >= -b and float(w.max()) < b
    counts = torch.histc(w, bins=16, min=-b, max=b)
    expected = w.numel() / 16
    assert float((counts - expected).abs().max()) < 5 * math.sqrt(expected)  # 5 sigma of a binomial bin
    # different tables, seeds, rows and columns do not repeat each other
    assert not torch.equal(w[0], w[1]) and not torch.equal(w[:, 0], w[:, 1])
    assert not torch.equal(w, dense_table_init(spec, seed=1))
    assert not torch.equal(w, dense_table_init(TableSpec("v", 10_000, 64), seed=0))


def test_a_shard_of_a_table_larger_than_memory():
    """Rows j::r of a 10^12-row table: 10 rows, generated without the table; they equal the rows drawn one by one."""
    spec = TableSpec("huge", 10**12, 16)
    shard = dense_table_init(spec, 3, rows=slice(7, None, 10**11))
    assert shard.shape == (10, 16)
    last = 7 + 9 * 10**11
    assert torch.equal(shard[-1:], dense_table_init(spec, 3, rows=slice(last, last + 1)))
    want = ref.counter_uniform_ref(table_seed(3, "huge"), torch.tensor([7, last]), torch.arange(16),
                                   -math.sqrt(1e-12), math.sqrt(1e-12))
    assert torch.equal(shard[[0, -1]], want)


def test_bad_blocks_name_the_table():
    spec = TableSpec("bad", 10, 4)
    with pytest.raises(ValueError, match="'bad'.*step"):
        dense_table_init(spec, 0, cols=slice(0, 4, 2))
    with pytest.raises(ValueError, match="'bad'.*shape"):
        dense_table_init(spec, 0, torch.empty(3, 4), rows=slice(0, 5))
    with pytest.raises(ValueError, match="row_step"):
        ops.counter_uniform(0, torch.empty(2, 2), -1.0, 1.0, row_step=0)
