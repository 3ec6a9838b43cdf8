"""Locality statistics of a batch of lookups, as Meta's dlrm_datasets report them (locality_stats.txt
of facebookresearch/dlrm_datasets): the unique fraction, the share of rows and of lookups that are used once,
and the index-weighted reuse histogram (share of lookups that go to rows used [2^k, 2^(k+1)) times)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from impls.api import SparseFeatures

OCTAVES = 24


@dataclass
class Locality:
    nnz: int = 0
    unique: int = 0
    used_once: int = 0
    reuse: np.ndarray = field(default_factory=lambda: np.zeros(OCTAVES))  # lookups per reuse octave

    def add_table(self, values: torch.Tensor) -> None:
        if values.numel() == 0:
            return
        counts = torch.unique(values, return_counts=True)[1].numpy()
        self.nnz += int(values.numel())
        self.unique += len(counts)
        self.used_once += int((counts == 1).sum())
        octave = np.minimum(np.floor(np.log2(counts)).astype(np.int64), OCTAVES - 1)
        self.reuse += np.bincount(octave, weights=counts, minlength=OCTAVES)

    @property
    def unique_fraction(self) -> float:
        return self.unique / max(self.nnz, 1)

    @property
    def once_share_of_rows(self) -> float:
        return self.used_once / max(self.unique, 1)

    @property
    def reuse_share(self) -> np.ndarray:
        """Share of lookups per reuse octave k (rows used [2^k, 2^(k+1)) times in the batch)."""
        return self.reuse / max(self.nnz, 1)


def batch_locality(sparse: SparseFeatures) -> Locality:
    """Locality of one batch, tables pooled (a row is a (table, id) pair)."""
    loc = Locality()
    for t in range(sparse.num_tables):
        loc.add_table(sparse.table(t)[0])
    return loc
