"""robe: every table reads one shared flat array, in the manner of ROBE (Desai et al., "Random Offset Block Embedding
for compressed embedding tables", MLSys 2022): row r of table t is the ``dim`` consecutive entries of the array that
start at a hashed offset h(t, r) = ((a_t r + b_t) mod P) mod M, wrapping around its end (ROBE-Z with blocks as wide as
a row). The tables share the array's memory and its gradient: a lookup of any table trains the entries it reads, and
rows that collide share them. Sizing: one array for all tables, ``budget`` times the dense tables' bytes (every table
counts, small ones too: there is no dense table), or ``size`` entries.

A second worked outside system for dlrmbench (docs/adding-a-system.md), chosen because its tables are not separable:
``table_parameters`` of every table is the same array. check-system differentiates and steps all tables at once and
counts the array once, so it passes `dlrmbench check-system examples/robe.py:RobeEmbedding`. Over ranks it replicates
(``dist_defaults``: data-parallel sharding): table-wise sharding would give each rank an array of its own tables, a
different model, which the ranks check refuses (`--sharding table-wise`)."""
from __future__ import annotations

from typing import Any, ClassVar, Sequence

import torch
from torch import Tensor

from impls.api import EmbeddingCollection, EmbeddingOptim, SparseFeatures, TableSpec, WorkReport, table_seed
from impls.compress.base import CompressedCollection, pool
from impls.compress.budget import BUDGET

PRIME = (1 << 31) - 1  # the hash's modulus: a_t * id stays within int64 for ids below 2^31


def array_size(tables: Sequence[TableSpec], budget: float, size: Any) -> int:
    """Entries of the shared array: ``size``, else ``budget`` times the dense tables' entries (at least the widest
    row)."""
    widest = max(t.dim for t in tables)
    if size is not None:
        if isinstance(size, bool) or int(size) != size or size < widest:
            raise ValueError(f"robe: size must be a whole number of entries >= the widest row ({widest}), got "
                             f"{size!r}")
        return int(size)
    if not 0 < budget <= 1:
        raise ValueError(f"robe: budget is a fraction of the dense tables' bytes in (0, 1], got {budget}")
    return max(widest, int(budget * sum(t.num_embeddings * t.dim for t in tables)))


class RobeEmbedding(CompressedCollection):
    name = "robe"
    option_keys: ClassVar[frozenset[str]] = frozenset({"budget", "size"})
    check_options: ClassVar[dict[str, Any]] = {"size": 96}  # check-system: rows of every table collide in 96 entries
    # one array behind every table: over ranks each rank holds it whole and the gradients are summed
    dist_defaults: ClassVar[dict[str, Any]] = {**EmbeddingCollection.dist_defaults, "sharding": "data-parallel"}

    def __init__(self, tables: Sequence[TableSpec], optim: EmbeddingOptim, ctx: Any | None = None, *,
                 budget: float = BUDGET, size: Any = None, device: str | torch.device = "cpu",
                 check_bounds: bool = True, seed: int = 0) -> None:
        super().__init__(tables, optim, ctx, check_bounds=check_bounds, seed=seed)
        self.size = array_size(self.tables, budget, size)
        g = torch.Generator().manual_seed(table_seed(seed, "robe array"))
        bound = 1 / max(t.num_embeddings for t in self.tables) ** 0.5  # the largest dense table's start
        self.array = self.add(((torch.rand(self.size, generator=g) * 2 - 1) * bound).to(device), False)
        h = torch.Generator().manual_seed(table_seed(seed, "robe hash"))
        self.coef = torch.stack([torch.randint(1, PRIME, (len(self.tables),), generator=h),
                                 torch.randint(0, PRIME, (len(self.tables),), generator=h)], dim=1).to(device)

    @classmethod
    def table_param_bytes(cls, tables: Sequence[TableSpec], options: dict[str, Any]) -> list[int]:
        """The array's bytes, told out over the tables in proportion to their dense bytes (they sum to the array)."""
        total = 4 * array_size(tables, options.get("budget", BUDGET), options.get("size"))
        dense = sum(t.dense_bytes for t in tables)
        out = [total * t.dense_bytes // dense for t in tables]
        out[0] += total - sum(out)
        return out

    def _rows(self, i: int, ids: Tensor, array: Tensor) -> Tensor:
        """Rows ``ids`` of table i read from ``array`` [nnz, dim]."""
        a, b = self.coef[i]
        start = (a * ids + b) % PRIME % self.size
        return array[(start[:, None] + torch.arange(self.tables[i].dim, device=ids.device)) % self.size]

    def forward(self, features: SparseFeatures) -> Tensor:
        features = self.checked(features)
        array = self.params[self.array]
        out = torch.cat([pool(self._rows(i, v, array), o, t.pooling)
                         for i, (t, (v, o)) in enumerate(zip(self.tables, features.tables()))], dim=1)
        self._last_intermediates = 4 * sum(features.nnz * t.dim for t in self.tables) // len(self.tables) \
            + 2 * out.numel() * 4 + self.size * 4  # the rows read, the output and its gradient, the array's gradient
        self._work = WorkReport(nnz=features.nnz, extra={"rows_read": features.nnz})
        return out

    def table_parameters(self, table: str) -> list[Tensor]:
        return [self.params[self.array].detach()]  # every table: the one array

    def materialize_from(self, table: str, params: Sequence[Tensor]) -> Tensor:
        i = self.table_index(table)
        return self._rows(i, torch.arange(self.tables[i].num_embeddings, device=params[0].device), params[0])

    def materialize(self, table: str) -> Tensor:
        return self.materialize_from(table, self.table_parameters(table)).detach()

    def compression(self) -> dict[str, Any]:
        return {t.name: {"shared array entries": self.size} for t in self.tables}
