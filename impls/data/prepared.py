"""Batches from a prepared (memory-mapped) dataset: one categorical id per table per sample, the same
Batch type the synthetic source yields. Batch i of size B holds rows [i*B, (i+1)*B) of the split, wrapping
around at its end, so a run can cycle through a split deterministically."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from impls.api import SparseFeatures, TableSpec
from impls.data.batch import Batch
from impls.data.criteo import CAT_NAMES
from impls.data.prepare import MARKER


class PreparedSource:
    def __init__(self, path: str | Path, split: str = "train", dim: int = 16) -> None:
        path = Path(path)
        if not (path / MARKER).exists():
            raise ValueError(f"{path} is not a complete prepared dataset (no {MARKER} marker): run `dlrmbench data "
                             "prepare` first")
        meta = json.loads((path / "meta.json").read_text())
        if split not in meta["rows"]:
            raise ValueError(f"{path} has no split {split!r}; splits: {sorted(meta['rows'])}")
        self.meta = meta
        self.split = split
        d = path / split
        self.dense = np.load(d / "dense.npy", mmap_mode="r")
        self.sparse = np.load(d / "sparse.npy", mmap_mode="r")
        self.labels = np.load(d / "labels.npy", mmap_mode="r")
        if len(self.labels) == 0:
            raise ValueError(f"{path}: split {split!r} is empty")
        self.tables = tuple(
            TableSpec(name, max(int(n), 1), dim) for name, n in zip(CAT_NAMES, meta["cardinalities"])
        )

    @property
    def num_rows(self) -> int:
        return len(self.labels)

    def batch(self, index: int, batch_size: int) -> Batch:
        if batch_size <= 0:
            raise ValueError(f"batch size must be > 0, got {batch_size}")
        rows = (np.arange(batch_size) + index * batch_size) % self.num_rows
        lo = int(rows[0])
        if lo + batch_size <= self.num_rows:  # contiguous: one slice of each memory map
            sl = slice(lo, lo + batch_size)
            dense, sparse, labels = self.dense[sl], self.sparse[sl], self.labels[sl]
        else:
            dense, sparse, labels = self.dense[rows], self.sparse[rows], self.labels[rows]
        T = sparse.shape[1]
        values = torch.from_numpy(np.ascontiguousarray(sparse.T).reshape(-1).astype(np.int64))
        offsets = torch.arange(T * batch_size + 1, dtype=torch.int64)
        return Batch(torch.from_numpy(np.array(dense, dtype=np.float32)), SparseFeatures(values, offsets, batch_size),
                     torch.from_numpy(np.array(labels, dtype=np.float32)))

    def batches(self, count: int, batch_size: int, start: int = 0) -> list[Batch]:
        return [self.batch(start + k, batch_size) for k in range(count)]
