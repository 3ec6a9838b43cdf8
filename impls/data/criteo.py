"""Criteo TSV (Kaggle ``train.txt``, Terabyte ``day_N[.gz]``), following facebookresearch/dlrm's conventions
(datasets-and-benchmarks.md §1, §2, §5).

A line is ``label \\t I1..I13 \\t C1..C26``: the label 0/1, 13 integer counts (empty = missing = 0, negatives
clamped to 0, then log(x+1)), 26 categoricals of up to 8 hex digits (empty = 0), optionally taken
``% max_ind_range``. Parsing is vectorized per chunk of whole lines; a malformed line is counted with its file
and line number and dropped (or, strict, raises).
"""
from __future__ import annotations

import csv
import io
from functools import partial
from typing import Callable

import numpy as np
import pandas as pd

from impls.data.textio import BadRows, Problems, Rows, hex_values, well_formed_lines

NUM_DENSE, NUM_CAT = 13, 26
NUM_COLS = 1 + NUM_DENSE + NUM_CAT
DENSE_NAMES = tuple(f"I{i}" for i in range(1, NUM_DENSE + 1))
CAT_NAMES = tuple(f"C{i}" for i in range(1, NUM_CAT + 1))


def dense_transform(dense: np.ndarray) -> np.ndarray:
    """dlrm's transform: negatives -> 0, then log(x + 1), float32."""
    return np.log1p(np.maximum(dense, 0)).astype(np.float32)


def parse_lines(buf: bytes, where: Callable[[int], str], problems: Problems, strict: bool,
                max_ind_range: int | None = None) -> Rows:
    """Parse a buffer of whole lines. ``where(i)`` names line i of the buffer (file:line) for messages."""
    if buf.endswith(b"\n"):
        buf = buf[:-1]
    if not buf:
        return Rows.empty(NUM_DENSE, NUM_CAT)
    good, good_idx = well_formed_lines(buf, b"\t", NUM_COLS, where, problems, strict)
    if not good_idx.size:
        return Rows.empty(NUM_DENSE, NUM_CAT)
    df = _read_frame(good)
    bad = BadRows(len(df))
    label = df[0]
    bad.flag(~label.isin(["0", "1"]).to_numpy(), lambda i: f"label {label.iloc[i]!r} is not 0 or 1")
    dense = np.zeros((len(df), NUM_DENSE), dtype=np.int64)
    for j in range(NUM_DENSE):
        col = df[1 + j]
        if col.dtype == np.float64:  # the fast path parsed it already (empty -> NaN)
            num = np.nan_to_num(col.to_numpy(), nan=0.0)
        else:
            num = pd.to_numeric(col.where(col != "", "0"), errors="coerce").to_numpy(dtype=np.float64)
        isint = np.isfinite(num) & (num == np.round(num))
        bad.flag(~isint, lambda i, j=j, col=col: f"dense {DENSE_NAMES[j]} {col.iloc[i]!r} is not an integer")
        dense[:, j] = np.where(isint, num, 0).astype(np.int64)
    cats = np.zeros((len(df), NUM_CAT), dtype=np.int64)
    for j in range(NUM_CAT):
        col = df[1 + NUM_DENSE + j]
        vals, badhex = hex_values(col)
        bad.flag(badhex, lambda i, j=j, col=col: f"categorical {CAT_NAMES[j]} {col.iloc[i]!r} is not hex")
        cats[:, j] = vals % max_ind_range if max_ind_range else vals
    bad.report(problems, where, good_idx, strict)
    return Rows(label.to_numpy().astype(np.int8), dense, cats).keep(~bad.mask)


def parser(problems: Problems, strict: bool, max_ind_range: int | None = None):
    """The line parser ``textio.iter_rows`` takes."""
    return partial(parse_lines, problems=problems, strict=strict, max_ind_range=max_ind_range)


def _read_frame(good: bytes) -> pd.DataFrame:
    """The 40 columns of well-formed lines: dense columns parsed as numbers by pandas' C parser when the
    chunk allows it (the common case), else every column as text, checked column by column."""
    common = dict(sep="\t", header=None, quoting=csv.QUOTE_NONE, engine="c", keep_default_na=False)
    try:
        dtypes = {0: str, **{1 + j: np.float64 for j in range(NUM_DENSE)},
                  **{1 + NUM_DENSE + j: str for j in range(NUM_CAT)}}
        return pd.read_csv(io.BytesIO(good), dtype=dtypes, na_values={1 + j: [""] for j in range(NUM_DENSE)},
                           **common)
    except ValueError:
        return pd.read_csv(io.BytesIO(good), dtype=str, na_filter=False, **common)
