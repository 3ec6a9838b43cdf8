"""Criteo TSV (Kaggle ``train.txt``, Terabyte ``day_N[.gz]``), following facebookresearch/dlrm's conventions
(its data_utils.py: hex categoricals, dense counts clamped at 0 then log(x + 1)).

A line is ``label \\t I1..I13 \\t C1..C26``: the label 0/1, 13 integer counts (empty = missing = 0, negatives
clamped to 0, then log(x+1)), 26 categoricals of up to 8 hex digits (empty = 0), optionally taken
``% max_ind_range``. Parsing is vectorized per chunk of whole lines (numpy over the bytes, no per-field Python objects); a malformed line is counted with its file
and line number and dropped (or, strict, raises).
"""
from __future__ import annotations

from functools import partial
from typing import Callable

import numpy as np

from impls.data.columns import CRITEO_CAT as CAT_NAMES
from impls.data.columns import CRITEO_DENSE as DENSE_NAMES
from impls.data.columns import CRITEO_NUM_CAT as NUM_CAT
from impls.data.columns import CRITEO_NUM_DENSE as NUM_DENSE
from impls.data.textio import BadRows, Problems, Rows, well_formed_fields

NUM_COLS = 1 + NUM_DENSE + NUM_CAT


def dense_transform(dense: np.ndarray) -> np.ndarray:
    """dlrm's transform: negatives -> 0, then log(x + 1), float32."""
    return np.log1p(np.maximum(dense, 0)).astype(np.float32)


def parse_lines(buf: bytes, where: Callable[[int], str], problems: Problems, strict: bool,
                max_ind_range: int | None = None) -> Rows:
    """Parse a buffer of whole lines. ``where(i)`` names line i of the buffer (file:line) for messages."""
    parsed = well_formed_fields(buf, b"\t", NUM_COLS, where, problems, strict)
    if parsed is None:
        return Rows.empty(NUM_DENSE, NUM_CAT)
    f, good_idx = parsed
    bad = BadRows(len(f))
    labels, badl = f.label(0)
    bad.flag(badl, lambda i: f"label {f.text(i, 0)!r} is not 0 or 1")
    dense = np.zeros((len(f), NUM_DENSE), dtype=np.int64)
    for j in range(NUM_DENSE):
        dense[:, j], badj = f.integer(1 + j)
        bad.flag(badj, lambda i, j=j: f"dense {DENSE_NAMES[j]} {f.text(i, 1 + j)!r} is not an integer")
    cats = np.zeros((len(f), NUM_CAT), dtype=np.int64)
    for j in range(NUM_CAT):
        vals, badhex = f.hex(1 + NUM_DENSE + j)
        bad.flag(badhex, lambda i, j=j: f"categorical {CAT_NAMES[j]} {f.text(i, 1 + NUM_DENSE + j)!r} is not hex")
        cats[:, j] = vals % max_ind_range if max_ind_range else vals
    bad.report(problems, where, good_idx, strict)
    return Rows(labels, dense, cats).keep(~bad.mask)


def parser(problems: Problems, strict: bool, max_ind_range: int | None = None):
    """The line parser ``textio.iter_rows`` takes."""
    return partial(parse_lines, problems=problems, strict=strict, max_ind_range=max_ind_range)
