"""Batches from a prepared (memory-mapped) dataset, the same Batch type the synthetic source yields: the
one-hot layout of `data prepare` (``sparse.npy``, one id per table per sample) or the multi-hot layout of
`data synth` (``lengths.npy``, ``row_offsets.npy``, ``values.bin``; impls/data/export.py). Batch i of size B
holds rows [i*B, (i+1)*B) of the split, wrapping around at its end, so a run can cycle through a split
deterministically."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from impls.api import SparseFeatures, TableSpec
from impls.data.batch import Batch
from impls.data.layout import MARKER, load_prepared, split_arrays
from impls.data.id_runs import run_index


def check_prepared(path: str | Path) -> None:
    """Every split of a complete prepared dataset opens and matches its meta.json (ValueError naming the file)."""
    meta = load_prepared(Path(path))
    if meta is None:
        raise ValueError(f"{path} is not a complete prepared dataset (no {MARKER} marker): run `dlrmbench data "
                         "prepare` (or `data synth`) first")
    for split in meta.rows:
        split_arrays(path, meta, split)


class PreparedSource:
    def __init__(self, path: str | Path, split: str = "train", dim: int | None = None) -> None:
        path = Path(path)
        meta = load_prepared(path)
        if meta is None:
            raise ValueError(f"{path} is not a complete prepared dataset (no {MARKER} marker): run `dlrmbench data "
                             "prepare` (or `data synth`) first")
        if split not in meta.rows:
            raise ValueError(f"{path} has no split {split!r}; splits: {sorted(meta.rows)}")
        self.meta, self.split, self.num_dense = meta, split, meta.num_dense
        arrays = split_arrays(path, meta, split)
        self.dense, self.labels = arrays["dense"], arrays["labels"]
        if len(self.labels) == 0:
            raise ValueError(f"{path}: split {split!r} is empty")
        self.multi_hot = meta.layout == "multi-hot"
        if self.multi_hot:
            self.lengths, self.row_offsets, self.values = arrays["lengths"], arrays["row_offsets"], arrays["values"]
            hot = self.lengths.mean(axis=0) if len(self.lengths) <= 1 << 20 else self.lengths[: 1 << 20].mean(axis=0)
        else:
            self.sparse = arrays["sparse"]
            hot = np.ones(len(meta.tables))
        dims = [dim] * len(meta.tables) if dim is not None else (meta.dims or [16] * len(meta.tables))
        self.tables = tuple(TableSpec(name, max(int(n), 1), int(dd), hotness=float(h))
                            for name, n, dd, h in zip(meta.tables, meta.cardinalities, dims, hot))

    @classmethod
    def from_arrays(cls, tables, dense: np.ndarray, labels: np.ndarray, sparse: np.ndarray | None = None,
                    lengths: np.ndarray | None = None, row_offsets: np.ndarray | None = None,
                    values: np.ndarray | None = None) -> "PreparedSource":
        """Rows held in memory in the prepared layout (one-hot ``sparse`` [n, T], or multi-hot ``lengths`` /
        ``row_offsets`` / ``values``), read as a split is: raw rows prepared to be scored (impls/data/raw_rows.py)."""
        self = cls.__new__(cls)
        self.meta, self.split, self.num_dense = None, "rows", dense.shape[1]
        self.dense, self.labels, self.tables = dense, labels, tuple(tables)
        self.multi_hot = sparse is None
        if self.multi_hot:
            self.lengths, self.row_offsets, self.values = lengths, row_offsets, values
        else:
            self.sparse = sparse
        return self

    @property
    def num_rows(self) -> int:
        return len(self.labels)

    def _rows(self, index: int, batch_size: int) -> slice | np.ndarray:
        rows = (np.arange(batch_size) + index * batch_size) % self.num_rows
        lo = int(rows[0])
        return slice(lo, lo + batch_size) if lo + batch_size <= self.num_rows else rows

    def _multi_hot(self, rows: slice | np.ndarray, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Table-major (values, offsets) of the samples ``rows``."""
        L = np.asarray(self.lengths[rows], dtype=np.int64)  # [B, T]
        if isinstance(rows, slice):
            base = int(self.row_offsets[rows.start])
            vals = np.asarray(self.values[base : int(self.row_offsets[rows.stop])])
            starts = np.asarray(self.row_offsets[rows], dtype=np.int64) - base
        else:  # wrapped: gather the samples' runs into one buffer first
            s, e = self.row_offsets[rows], self.row_offsets[rows + 1]
            n = e - s
            vals = np.asarray(self.values[run_index(s, n)])
            starts = np.cumsum(n) - n
        bag_start = starts[:, None] + np.cumsum(L, axis=1) - L  # [B, T] start of bag (b, t) in vals
        lens, st = L.T.reshape(-1), bag_start.T.reshape(-1)  # table-major
        pos = run_index(st, lens)
        offsets = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=offsets[1:])
        return torch.from_numpy(vals[pos].astype(np.int64)), torch.from_numpy(offsets)

    def batch(self, index: int, batch_size: int) -> Batch:
        if batch_size <= 0:
            raise ValueError(f"batch size must be > 0, got {batch_size}")
        return self._take(self._rows(index, batch_size), batch_size)

    def take(self, rows: np.ndarray) -> Batch:
        """The batch of the split's samples ``rows`` (in that order; a training epoch's shuffled batch)."""
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            raise ValueError("a batch needs at least one row")
        if rows.min() < 0 or rows.max() >= self.num_rows:
            raise ValueError(f"rows out of range for split {self.split!r} of {self.num_rows} samples")
        return self._take(rows, len(rows))

    def _take(self, rows: slice | np.ndarray, batch_size: int) -> Batch:
        if self.multi_hot:
            values, offsets = self._multi_hot(rows, batch_size)
        else:
            sparse = self.sparse[rows]
            T = sparse.shape[1]
            values = torch.from_numpy(np.ascontiguousarray(sparse.T).reshape(-1).astype(np.int64))
            offsets = torch.arange(T * batch_size + 1, dtype=torch.int64)
        return Batch(torch.from_numpy(np.array(self.dense[rows], dtype=np.float32)),
                     SparseFeatures(values, offsets, batch_size),
                     torch.from_numpy(np.array(self.labels[rows], dtype=np.float32)))

    def batches(self, count: int, batch_size: int, start: int = 0) -> list[Batch]:
        return [self.batch(start + k, batch_size) for k in range(count)]
