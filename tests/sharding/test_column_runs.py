"""The pooled-output exchange places and gathers a rank's columns as runs of consecutive columns: the same as
indexing every column (any order, gaps, empty)."""
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.sharding.pipeline import column_runs, place_columns, take_columns


@settings(max_examples=60, deadline=None)
@given(width=st.integers(1, 40), rows=st.integers(0, 7), data=st.data())
def test_runs_equal_indexing_every_column(width, rows, data):
    cols = data.draw(st.lists(st.integers(0, width - 1), unique=True, max_size=width))
    idx = torch.tensor(cols, dtype=torch.int64)
    runs = column_runs(idx)
    assert sum(n for _, n in runs) == len(cols)
    assert [c for s, n in runs for c in range(s, s + n)] == cols
    src = torch.randn(rows, width)
    assert torch.equal(take_columns(src, runs), src[:, idx].reshape(-1))
    block = torch.randn(rows, len(cols))
    want, got = torch.zeros(rows, width), torch.zeros(rows, width)
    want[:, idx] = block
    place_columns(got, block, runs)
    assert torch.equal(got, want)


def test_a_table_is_one_run():
    assert column_runs(torch.tensor([32, 33, 34, 0, 1, 96, 97])) == [(32, 3), (0, 2), (96, 2)]
    assert column_runs(torch.tensor([], dtype=torch.int64)) == []
