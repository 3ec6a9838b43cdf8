"""Two-pass preparation of a Criteo-format dataset into memory-mapped arrays under one directory.

Pass 1 counts good rows per file and each categorical column's raw values (per-chunk unique counts merged,
so memory is bounded by the distinct values, not the file); pass 2 re-reads, categorifies with the
vocabularies and writes ``<split>/{dense,sparse,labels}.npy`` (float32 [n,13], int32 [n,26], int8 [n]).
Everything is written into ``<out>.partial`` and renamed to ``<out>`` with a ``COMPLETE`` marker last, so
an interrupted run never leaves a dataset that looks complete; a rerun finds COMPLETE and reuses it, or
removes the partial directory and starts again."""
from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from impls.data.criteo import CAT_NAMES, NUM_CAT, NUM_DENSE, Problems, dense_transform, iter_rows

MARKER = "COMPLETE"


@dataclass(frozen=True)
class Split:
    name: str
    start: int  # global good-row index, inclusive
    stop: int


def kaggle_splits(rows: int) -> list[Split]:
    """dlrm's convention: 7 pseudo-days by divmod (the first rows % 7 get one more row), train = days 1-6,
    day 7 halved by np.array_split: test first, val second."""
    base, extra = divmod(rows, 7)
    bounds = [0]
    for d in range(7):
        bounds.append(bounds[-1] + base + (1 if d < extra else 0))
    last = bounds[7] - bounds[6]
    half = bounds[6] + (last + 1) // 2  # np.array_split puts the odd row in the first part
    return [Split("train", 0, bounds[6]), Split("test", bounds[6], half), Split("val", half, bounds[7])]


def terabyte_splits(rows_per_file: Sequence[int]) -> list[Split]:
    """Days 0..n-2 train; the last day halved: test first, val second (dlrm; torchrec swaps the halves)."""
    train = sum(rows_per_file[:-1])
    last = rows_per_file[-1]
    half = train + (last + 1) // 2
    return [Split("train", 0, train), Split("test", train, half), Split("val", half, train + last)]


class Vocab:
    """Sorted distinct raw values of one column with their counts, merged chunk by chunk."""

    def __init__(self) -> None:
        self.values = np.zeros(0, dtype=np.int64)
        self.counts = np.zeros(0, dtype=np.int64)

    def update(self, column: np.ndarray) -> None:
        v, c = np.unique(column, return_counts=True)
        allv = np.concatenate([self.values, v])
        allc = np.concatenate([self.counts, c])
        self.values, inv = np.unique(allv, return_inverse=True)
        self.counts = np.bincount(inv, weights=allc, minlength=len(self.values)).astype(np.int64)

    def kept(self, freq_threshold: int) -> np.ndarray:
        return self.values if freq_threshold <= 1 else self.values[self.counts >= freq_threshold]


def categorify(column: np.ndarray, kept: np.ndarray, freq_threshold: int) -> np.ndarray:
    """Contiguous ids: the rank in ``kept``; with a threshold, rare values -> 0 and kept values -> 1 + rank."""
    if freq_threshold <= 1:
        return np.searchsorted(kept, column)
    if not len(kept):
        return np.zeros(len(column), dtype=np.int64)
    pos = np.searchsorted(kept, column)
    hit = kept[np.minimum(pos, len(kept) - 1)] == column
    return np.where(hit, pos + 1, 0)


@dataclass
class Prepared:
    name: str
    out: Path
    rows: dict[str, int]
    cardinalities: list[int]
    bad_lines: int
    bad_examples: list[str]
    max_ind_range: int | None
    freq_threshold: int

    def to_json(self) -> str:
        d = asdict(self)
        d["out"] = str(self.out)
        return json.dumps(d, indent=2)


def load_prepared(out: Path) -> Prepared | None:
    """The metadata of a complete prepared dataset, or None when ``out`` is not complete."""
    if not (out / MARKER).exists():
        return None
    d = json.loads((out / "meta.json").read_text())
    d["out"] = Path(d["out"])
    return Prepared(**d)


def prepare_criteo(
    name: str,
    files: Sequence[Path],
    out: Path,
    layout: str,
    max_ind_range: int | None = None,
    freq_threshold: int = 0,
    strict: bool = False,
    progress: Callable[[int], None] | None = None,
    chunk_bytes: int | None = None,
) -> Prepared:
    """Prepare Criteo TSV ``files`` (``layout`` "kaggle": one train.txt; "terabyte": day files in order)."""
    if layout not in ("kaggle", "terabyte"):
        raise ValueError(f"unknown Criteo layout {layout!r}; use 'kaggle' or 'terabyte'")
    files = [Path(f) for f in files]
    missing = [str(f) for f in files if not f.is_file()]
    if missing or not files:
        raise FileNotFoundError(f"{name}: raw file(s) not found: {missing or '(none given)'}")
    if layout == "kaggle" and len(files) != 1:
        raise ValueError(f"{name}: the Kaggle layout reads one train.txt, got {len(files)} files")
    done = load_prepared(out)
    if done is not None:
        return done
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    kw = {"chunk_bytes": chunk_bytes} if chunk_bytes else {}

    problems = Problems()
    vocabs = [Vocab() for _ in range(NUM_CAT)]
    per_file = [0] * len(files)
    for k, rows in iter_rows(files, problems, strict, max_ind_range, progress=progress, **kw):
        per_file[k] += len(rows)
        for j in range(NUM_CAT):
            vocabs[j].update(rows.cats[:, j])
    total = sum(per_file)
    splits = kaggle_splits(total) if layout == "kaggle" else terabyte_splits(per_file)
    kept = [v.kept(freq_threshold) for v in vocabs]
    cards = [len(k) + (1 if freq_threshold > 1 else 0) for k in kept]

    arrays = {}
    for sp in splits:
        d = partial / sp.name
        d.mkdir()
        n = sp.stop - sp.start
        arrays[sp.name] = (
            np.lib.format.open_memmap(d / "dense.npy", "w+", np.float32, (n, NUM_DENSE)),
            np.lib.format.open_memmap(d / "sparse.npy", "w+", np.int32, (n, NUM_CAT)),
            np.lib.format.open_memmap(d / "labels.npy", "w+", np.int8, (n,)),
        )
    pos = 0
    for _, rows in iter_rows(files, Problems(), False, max_ind_range, progress=progress, **kw):
        n = len(rows)
        dense = dense_transform(rows.dense)
        sparse = np.stack([categorify(rows.cats[:, j], kept[j], freq_threshold) for j in range(NUM_CAT)], axis=1)
        for sp in splits:  # a chunk may straddle a split boundary
            lo, hi = max(pos, sp.start), min(pos + n, sp.stop)
            if lo >= hi:
                continue
            a, b = lo - pos, hi - pos
            dst_d, dst_s, dst_l = arrays[sp.name]
            dst_d[lo - sp.start : hi - sp.start] = dense[a:b]
            dst_s[lo - sp.start : hi - sp.start] = sparse[a:b]
            dst_l[lo - sp.start : hi - sp.start] = rows.labels[a:b]
        pos += n
    if pos != total:
        raise RuntimeError(f"{name}: the second pass read {pos} rows, the first {total}; did a file change?")
    for triple in arrays.values():
        for m in triple:
            m.flush()
    vocab_dir = partial / "vocab"
    vocab_dir.mkdir()
    for j, k in enumerate(kept):
        np.save(vocab_dir / f"{CAT_NAMES[j]}.npy", k)
    meta = Prepared(name, out, {sp.name: sp.stop - sp.start for sp in splits}, cards, problems.count,
                    problems.examples, max_ind_range, freq_threshold)
    (partial / "meta.json").write_text(meta.to_json())
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    (out / MARKER).write_text("ok\n")
    return meta
