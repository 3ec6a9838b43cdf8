"""The dense-table initializer shared by the dense baselines (DLRM's uniform(+-sqrt(1/rows)))."""
from __future__ import annotations

import math

import torch
from torch import Tensor

from impls.api import TableSpec


def dense_table_init(spec: TableSpec, seed: int, table_index: int) -> Tensor:
    """A [rows, dim] fp32 table drawn as dlrm does, from a generator seeded by (seed, table index), so
    every dense implementation starts from the same weights."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + table_index)
    bound = math.sqrt(1.0 / spec.num_embeddings)
    w = torch.empty(spec.num_embeddings, spec.dim)
    return w.uniform_(-bound, bound, generator=g)
