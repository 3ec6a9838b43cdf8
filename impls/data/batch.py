"""The one batch type every data source yields."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from impls.api import SparseFeatures


@dataclass
class Batch:
    dense: Tensor  # float32 [B, num_dense]
    sparse: SparseFeatures
    labels: Tensor  # float32 [B] in {0, 1}

    @property
    def batch_size(self) -> int:
        return self.sparse.batch_size

    def to(self, device: torch.device | str) -> "Batch":
        return Batch(self.dense.to(device), self.sparse.to(device), self.labels.to(device))
