"""The dense-table initializer shared by the dense baselines (DLRM's uniform(+-sqrt(1/rows)))."""
from __future__ import annotations

import math

import torch
from torch import Tensor

from impls.api import TableSpec, table_seed


@torch.no_grad()
def dense_table_init(spec: TableSpec, seed: int, out: Tensor | None = None) -> Tensor:
    """A [rows, dim] fp32 table drawn as dlrm does, from a generator seeded by (seed, table name), so
    every implementation and every shard starts from the same weights. ``out`` (a CPU tensor of that shape, e.g. a
    view into a library's weight buffer) is filled in place, so no second copy of the table is made."""
    g = torch.Generator().manual_seed(table_seed(seed, spec.name))
    bound = math.sqrt(1.0 / spec.num_embeddings)
    w = torch.empty(spec.num_embeddings, spec.dim) if out is None else out
    if tuple(w.shape) != (spec.num_embeddings, spec.dim):
        raise ValueError(f"table {spec.name!r}: init target has shape {tuple(w.shape)}")
    return w.uniform_(-bound, bound, generator=g)
