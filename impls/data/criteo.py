"""Criteo TSV (Kaggle ``train.txt``, Terabyte ``day_N[.gz]``): streaming parse and two-pass preparation
into memory-mapped arrays, following facebookresearch/dlrm's conventions (datasets-and-benchmarks.md §1, §2, §5).

A line is ``label \\t I1..I13 \\t C1..C26``: the label 0/1, 13 integer counts (empty = missing = 0, negatives
clamped to 0, then log(x+1)), 26 categoricals of up to 8 hex digits (empty = 0), optionally taken
``% max_ind_range``; categorify maps each column's raw values to contiguous ids in sorted order (values
seen fewer than ``freq_threshold`` times share id 0 when a threshold is set). Parsing is vectorized per chunk
of whole lines; a malformed line is counted with its file and line number and dropped (or, strict, raises).
"""
from __future__ import annotations

import csv
import gzip
import io
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import pandas as pd

NUM_DENSE, NUM_CAT = 13, 26
NUM_COLS = 1 + NUM_DENSE + NUM_CAT
DENSE_NAMES = tuple(f"I{i}" for i in range(1, NUM_DENSE + 1))
CAT_NAMES = tuple(f"C{i}" for i in range(1, NUM_CAT + 1))
CHUNK_BYTES = 64 << 20
MAX_EXAMPLES = 10

_HEX = np.full(256, 255, dtype=np.uint8)
for _c in b"0123456789":
    _HEX[_c] = _c - ord("0")
for _c in b"abcdef":
    _HEX[_c] = _c - ord("a") + 10
    _HEX[_c - 32] = _c - ord("a") + 10


class MalformedInput(ValueError):
    """A bad line in strict mode (names file and line)."""


@dataclass
class Problems:
    """Bad lines and file errors seen while reading, with the first examples."""

    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, where: str, reason: str, strict: bool) -> None:
        msg = f"{where}: {reason}"
        if strict:
            raise MalformedInput(msg)
        self.count += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(msg)

    def add_many(self, found: Sequence[tuple[str, str]], total: int, strict: bool) -> None:
        """``total`` problems of which ``found`` (the first few, in order) are described."""
        for where, reason in found:
            self.add(where, reason, strict)
        self.count += total - len(found)


@dataclass
class Rows:
    """Parsed good rows of one chunk: labels int8 [n], dense int64 [n, 13] (raw counts), cats int64 [n, 26]."""

    labels: np.ndarray
    dense: np.ndarray
    cats: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)


def _no_rows() -> Rows:
    return Rows(np.zeros(0, np.int8), np.zeros((0, NUM_DENSE), np.int64), np.zeros((0, NUM_CAT), np.int64))


def dense_transform(dense: np.ndarray) -> np.ndarray:
    """dlrm's transform: negatives -> 0, then log(x + 1), float32."""
    return np.log1p(np.maximum(dense, 0)).astype(np.float32)


def _hex_values(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(values, bad mask) of a column of hex strings (empty -> 0, more than 8 digits or a non-hex -> bad)."""
    too_long = col.str.len().to_numpy() > 8
    raw = col.to_numpy().astype("S8")
    u8 = raw.view(np.uint8).reshape(len(raw), 8)
    digits = _HEX[u8]
    present = u8 != 0
    bad = too_long | ((digits == 255) & present).any(axis=1)
    val = np.zeros(len(raw), dtype=np.int64)
    for i in range(8):
        val = np.where(present[:, i], val * 16 + digits[:, i].astype(np.int64), val)
    return val, bad


def parse_lines(buf: bytes, where: Callable[[int], str], problems: Problems, strict: bool,
                max_ind_range: int | None = None) -> Rows:
    """Parse a buffer of whole lines. ``where(i)`` names line i of the buffer (file:line) for messages."""
    if buf.endswith(b"\n"):
        buf = buf[:-1]
    if not buf:
        return _no_rows()
    lines = buf.split(b"\n")
    arr = np.frombuffer(buf, dtype=np.uint8)
    ends = np.append(np.flatnonzero(arr == 10), len(arr))  # one past each line
    tabs_before = np.searchsorted(np.flatnonzero(arr == 9), ends)
    tabs_per_line = np.diff(tabs_before, prepend=0)
    ok = tabs_per_line == NUM_COLS - 1
    wrong = np.flatnonzero(~ok)
    problems.add_many([(where(int(i)), f"expected {NUM_COLS} tab-separated columns, got {int(tabs_per_line[i]) + 1}")
                       for i in wrong[:MAX_EXAMPLES]], len(wrong), strict)
    good_idx = np.flatnonzero(ok)
    good = b"\n".join(lines[i] for i in good_idx)
    if not good_idx.size:
        return _no_rows()
    df = _read_frame(good)
    bad = np.zeros(len(df), dtype=bool)
    reasons: dict[int, str] = {}

    def flag(mask: np.ndarray, what: Callable[[int], str]) -> None:
        for i in np.flatnonzero(mask & ~bad)[: MAX_EXAMPLES]:
            reasons.setdefault(int(i), what(int(i)))
        bad[:] |= mask

    label = df[0]
    flag(~label.isin(["0", "1"]).to_numpy(), lambda i: f"label {label.iloc[i]!r} is not 0 or 1")
    dense = np.zeros((len(df), NUM_DENSE), dtype=np.int64)
    for j in range(NUM_DENSE):
        col = df[1 + j]
        if col.dtype == np.float64:  # the fast path parsed it already (empty -> NaN)
            num = np.nan_to_num(col.to_numpy(), nan=0.0)
        else:
            num = pd.to_numeric(col.where(col != "", "0"), errors="coerce").to_numpy(dtype=np.float64)
        isint = np.isfinite(num) & (num == np.round(num))
        flag(~isint, lambda i, j=j, col=col: f"dense {DENSE_NAMES[j]} {col.iloc[i]!r} is not an integer")
        dense[:, j] = np.where(isint, num, 0).astype(np.int64)
    cats = np.zeros((len(df), NUM_CAT), dtype=np.int64)
    for j in range(NUM_CAT):
        col = df[1 + NUM_DENSE + j]
        vals, badhex = _hex_values(col)
        flag(badhex, lambda i, j=j, col=col: f"categorical {CAT_NAMES[j]} {col.iloc[i]!r} is not hex")
        cats[:, j] = vals % max_ind_range if max_ind_range else vals
    shown = sorted(reasons)[:MAX_EXAMPLES]
    problems.add_many([(where(int(good_idx[i])), reasons[i]) for i in shown], int(bad.sum()), strict)
    keep = ~bad
    return Rows(label.to_numpy()[keep].astype(np.int8), dense[keep], cats[keep])


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


def read_chunks(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[int, bytes, int]]:
    """(first line number, whole lines, bytes read so far) of a plain or gzip file, chunk by chunk.
    A truncated gzip raises EOFError after the last complete chunk."""
    opener = gzip.open if path.suffix == ".gz" else open
    line, done, rest = 1, 0, b""
    with opener(path, "rb") as f:
        while True:
            data = f.read(chunk_bytes)
            if not data:
                break
            done += len(data)
            data = rest + data
            cut = data.rfind(b"\n")
            if cut < 0:
                rest = data
                continue
            body, rest = data[: cut + 1], data[cut + 1 :]
            yield line, body, done
            line += body.count(b"\n")
    if rest:
        yield line, rest + b"\n", done


def iter_rows(files: Sequence[Path], problems: Problems, strict: bool, max_ind_range: int | None = None,
              chunk_bytes: int = CHUNK_BYTES, progress: Callable[[int], None] | None = None) -> Iterator[tuple[int, Rows]]:
    """(file index, parsed rows) chunk by chunk over all files; file-level problems (empty, truncated gzip)
    are reported like bad lines."""
    for k, path in enumerate(files):
        seen, last, broken = 0, 0, False
        try:
            for first, body, done in read_chunks(path, chunk_bytes):
                rows = parse_lines(body, lambda i, f=first: f"{path.name}:{f + i}", problems, strict, max_ind_range)
                seen += len(rows)
                if progress:
                    progress(done - last)
                last = done
                yield k, rows
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            problems.add(str(path.name), f"truncated or corrupt gzip after {seen} good rows ({exc})", strict)
            broken = True
        if seen == 0 and not broken:
            problems.add(str(path.name), "no valid rows (empty file?)", strict)
