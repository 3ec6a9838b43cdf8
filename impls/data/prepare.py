"""Two-pass preparation of a text dataset (Criteo TSV, Avazu CSV) into memory-mapped arrays under one directory.

Pass 1 counts good rows per file and each categorical column's raw values (per-chunk unique counts merged,
so memory is bounded by the distinct values, not the file); pass 2 re-reads, categorifies with the
vocabularies and writes ``<split>/{dense,sparse,labels}.npy`` (float32 [n, num_dense], int32 [n, num_cat],
int8 [n]). Everything is written into ``<out>.partial`` and renamed to ``<out>`` with a ``COMPLETE`` marker
last, so an interrupted run never leaves a dataset that looks complete; a rerun finds COMPLETE and reuses it,
or removes the partial directory and starts again."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from impls.data import avazu, criteo
from impls.data.layout import SPLITS, Prepared, SplitWriter, load_prepared, write_meta, write_vocab
from impls.data.safe_write import preallocate
from impls.data.staging import content_key, staged
from impls.data.textio import Problems, iter_rows



@dataclass(frozen=True)
class TextFormat:
    """What the generic two passes need to know about one raw format."""

    num_dense: int
    cat_names: tuple[str, ...]
    parser: Callable  # (problems, strict, max_ind_range) -> textio.Parser
    header: bytes | None = None


FORMATS = {
    "criteo": TextFormat(criteo.NUM_DENSE, criteo.CAT_NAMES, criteo.parser),
    "avazu": TextFormat(avazu.NUM_DENSE, avazu.CAT_NAMES, avazu.parser, avazu.HEADER),
}
LAYOUTS = ("kaggle", "terabyte", "random-8-1-1")


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


def random_split_ids(rows: int, seed: int, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> np.ndarray:
    """The split (index into SPLITS) of every row: a seeded random partition with exactly
    round(0.8 n) train rows and the rest halved (val gets the odd row), as in the Avazu_x4 protocol's 8:1:1
    (its seed is 2018). One byte per row; rows keep their file order within a split."""
    train = int(round(fractions[0] * rows))
    val = (rows - train + 1) // 2
    ids = np.repeat(np.arange(3, dtype=np.int8), [train, val, rows - train - val])
    np.random.default_rng(seed).shuffle(ids)
    return ids


class SplitPlan:
    """Which split each good row goes to: contiguous ranges (file order) or a per-row assignment."""

    def __init__(self, sizes: dict[str, int], ranges: list[Split] | None = None, ids: np.ndarray | None = None):
        self.sizes, self.ranges, self.ids = sizes, ranges, ids

    @staticmethod
    def for_layout(layout: str, per_file: Sequence[int], seed: int) -> "SplitPlan":
        total = sum(per_file)
        if layout == "random-8-1-1":
            ids = random_split_ids(total, seed)
            return SplitPlan({n: int((ids == k).sum()) for k, n in enumerate(SPLITS)}, ids=ids)
        ranges = kaggle_splits(total) if layout == "kaggle" else terabyte_splits(per_file)
        return SplitPlan({sp.name: sp.stop - sp.start for sp in ranges}, ranges=ranges)

    def assign(self, pos: int, n: int) -> list[tuple[str, np.ndarray]]:
        """(split, row indices within the chunk) for the chunk of good rows [pos, pos + n)."""
        if self.ids is not None:
            chunk = self.ids[pos : pos + n]
            return [(name, np.flatnonzero(chunk == k)) for k, name in enumerate(SPLITS)]
        out = []
        for sp in self.ranges:
            lo, hi = max(pos, sp.start), min(pos + n, sp.stop)
            if lo < hi:
                out.append((sp.name, np.arange(lo - pos, hi - pos)))
        return out


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


def prepare_text(
    name: str,
    files: Sequence[Path],
    out: Path,
    reader: str,
    layout: str,
    max_ind_range: int | None = None,
    freq_threshold: int = 0,
    strict: bool = False,
    progress: Callable[[int], None] | None = None,
    chunk_bytes: int | None = None,
    seed: int = 2018,
) -> Prepared:
    """Prepare raw ``files`` of format ``reader`` ("criteo", "avazu"). ``layout``: "kaggle" (one train.txt, 7
    pseudo-days), "terabyte" (day files in order), "random-8-1-1" (seeded per-row 8:1:1, ``seed``)."""
    if reader not in FORMATS:
        raise ValueError(f"unknown raw format {reader!r}; known: {', '.join(FORMATS)}")
    if layout not in LAYOUTS:
        raise ValueError(f"unknown split layout {layout!r}; known: {', '.join(LAYOUTS)}")
    fmt = FORMATS[reader]
    files = [Path(f) for f in files]
    missing = [str(f) for f in files if not f.is_file()]
    if missing or not files:
        raise FileNotFoundError(f"{name}: raw file(s) not found: {missing or '(none given)'}")
    if layout == "kaggle" and len(files) != 1:
        raise ValueError(f"{name}: the Kaggle layout reads one train.txt, got {len(files)} files")
    raw = content_key(files)
    key = {"format": reader, "split layout": layout, "raw files": raw, "max_ind_range": max_ind_range,
           "freq_threshold": freq_threshold, "strict": strict, "seed": seed if layout == "random-8-1-1" else None}
    with staged(out, "prepared", key, files) as stage:
        if stage.reused:
            return load_prepared(out)
        partial = stage.path
        kw = {"chunk_bytes": chunk_bytes} if chunk_bytes else {}
        num_cat = len(fmt.cat_names)

        def passes(problems: Problems, strict_: bool):
            return iter_rows(files, fmt.parser(problems, strict_, max_ind_range), problems, strict_, fmt.header,
                             progress=progress, **kw)

        problems = Problems()
        vocabs = [Vocab() for _ in range(num_cat)]
        per_file = [0] * len(files)
        for k, rows in passes(problems, strict):
            per_file[k] += len(rows)
            for j in range(num_cat):
                vocabs[j].update(rows.cats[:, j])
        total = sum(per_file)
        if total == 0:
            raise ValueError(f"{name}: no valid rows in {[f.name for f in files]}; e.g. {problems.examples[:3]}")
        plan = SplitPlan.for_layout(layout, per_file, seed)
        kept = [v.kept(freq_threshold) for v in vocabs]
        cards = [len(k) + (1 if freq_threshold > 1 else 0) for k in kept]

        writers = {split: SplitWriter(partial / split, n, fmt.num_dense, num_cat, multi_hot=False)
                   for split, n in plan.sizes.items()}
        preallocate(partial)  # the arrays' room taken now: a full device is DiskFull, never SIGBUS
        pos = 0
        for _, rows in passes(Problems(), False):
            n = len(rows)
            dense = criteo.dense_transform(rows.dense)
            sparse = np.stack([categorify(rows.cats[:, j], kept[j], freq_threshold) for j in range(num_cat)], axis=1)
            for split, idx in plan.assign(pos, n):  # a chunk may straddle split boundaries
                writers[split].write(pos + idx, dense[idx], rows.labels[idx], sparse=sparse[idx])
            pos += n
        if pos != total or {s: w.at for s, w in writers.items()} != plan.sizes:
            raise ValueError(f"{name}: the second pass read {pos:,} rows, the first {total:,}; did a file change?")
        for w in writers.values():
            w.close()
        write_vocab(partial, fmt.cat_names, kept)
        meta = Prepared(name, out, dict(plan.sizes), cards, problems.count, problems.examples, max_ind_range,
                        freq_threshold, list(fmt.cat_names), fmt.num_dense, raw=raw, key=key)
        write_meta(partial, meta)
    return meta


def prepare_criteo(name: str, files: Sequence[Path], out: Path, layout: str, **kw) -> Prepared:
    """Criteo TSV: ``layout`` "kaggle" (one train.txt) or "terabyte" (day files in order)."""
    if layout not in ("kaggle", "terabyte"):
        raise ValueError(f"unknown Criteo layout {layout!r}; use 'kaggle' or 'terabyte'")
    return prepare_text(name, files, out, "criteo", layout, **kw)
