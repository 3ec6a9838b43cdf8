"""A template for a system of your own: copy this file, rename the class and its ``name``, and change how a table is
stored and read. As it stands it is the plainest correct system, one dense table per table, and it passes
`dlrmbench check-system examples/template.py:Template`. examples/lowrank.py is the same skeleton with a real method
in it; docs/adding-a-system.md walks through both.

CompressedCollection (impls/compress/base.py) keeps the trainable tensors (``add``), steps them (a table read by rows
gets sparse gradients and row-wise updates, a small dense tensor a whole update) and reports their memory."""
from __future__ import annotations

from typing import Any, ClassVar, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, table_seed
from impls.compress.base import CompressedCollection


class Template(CompressedCollection):
    name = "template"  # the registry key: points, records, tables and figures name the system by it
    option_keys: ClassVar[frozenset[str]] = frozenset({"scale"})  # every keyword option the constructor takes

    def __init__(self, tables: Sequence[TableSpec], optim: EmbeddingOptim, ctx: Any | None = None, *,
                 scale: float = 1.0, device: str | torch.device = "cpu", check_bounds: bool = True,
                 seed: int = 0) -> None:
        super().__init__(tables, optim, ctx, check_bounds=check_bounds, seed=seed)
        for t in self.tables:  # from the seed alone: two builds with one seed are bit-identical
            g = torch.Generator().manual_seed(table_seed(seed, t.name))
            bound = scale / t.num_embeddings ** 0.5
            self.add(((torch.rand(t.num_embeddings, t.dim, generator=g) * 2 - 1) * bound).to(device), True)

    def forward(self, features: SparseFeatures) -> Tensor:
        features = self.checked(features)  # bad ids and offsets refused, naming the table, bag and id
        return torch.cat([F.embedding_bag(v, self.params[i], o, mode=t.pooling, sparse=True, include_last_offset=True)
                          for i, (t, (v, o)) in enumerate(zip(self.tables, features.tables()))], dim=1)

    def table_parameters(self, table: str) -> list[Tensor]:
        """The trainable tensors behind one table (check-system steps and differentiates them in float64)."""
        return [self.params[self.table_index(table)].detach()]

    def materialize_from(self, table: str, params: Sequence[Tensor]) -> Tensor:
        """The dense [rows, dim] table as a differentiable function of ``table_parameters``."""
        return params[0]

    def materialize(self, table: str) -> Tensor:
        return self.materialize_from(table, self.table_parameters(table)).clone()
