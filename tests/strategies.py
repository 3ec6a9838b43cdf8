"""Hypothesis strategies for jagged batches."""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from impls.api import SparseFeatures, TableSpec


@st.composite
def jagged_batches(draw, max_tables=4, max_batch=6, max_rows=50, max_bag=5, dim=4):
    """(tables, SparseFeatures) with valid ids, empty bags and duplicates allowed."""
    T = draw(st.integers(1, max_tables))
    B = draw(st.integers(1, max_batch))
    rows = draw(st.lists(st.integers(1, max_rows), min_size=T, max_size=T))
    pool = draw(st.lists(st.sampled_from(["sum", "mean"]), min_size=T, max_size=T))
    tables = [TableSpec(f"t{i}", n, dim, p) for i, (n, p) in enumerate(zip(rows, pool))]
    values, offsets = [], [0]
    for t in range(T):
        for _ in range(B):
            bag = draw(st.lists(st.integers(0, rows[t] - 1), max_size=max_bag))
            values += bag
            offsets.append(offsets[-1] + len(bag))
    sf = SparseFeatures(torch.tensor(values, dtype=torch.int64), torch.tensor(offsets, dtype=torch.int64), B)
    return tables, sf
