"""lowrank: a table of N rows x D stored as two factors, A [N, k] and B [k, D]; id x reads the row A[x] @ B. A bag
pools A's rows first and projects once ((sum of A[x]) @ B: the same numbers, k/D of the work), so the lookup is an
ordinary embedding bag on a k-wide table. Parameters: N k + k D instead of N D.

A worked outside system for dlrmbench (docs/adding-a-system.md): it lives outside the suite's packages, implements the
interface of impls/api.py and passes `dlrmbench check-system examples/lowrank.py:LowRankEmbedding`. Sizing follows
the suite's compression methods (impls/compress/budget.py): ``budget`` (a fraction of the dense tables' bytes; each
table's share gives it the largest k that fits) or ``rank`` (k for every table, or a {table: k} mapping); tables under
``min_rows`` rows stay dense. A starts uniform +-sqrt(1/N) (the dense tables' start) and B uniform +-sqrt(3/k), so a
row has the dense start's variance. A is read by rows (sparse gradients, updated row by row), B whole."""
from __future__ import annotations

import math
from typing import Any, ClassVar, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, WorkReport, table_seed
from impls.compress.base import CompressedCollection
from impls.compress.budget import BUDGET, MIN_ROWS, per_table, shares


def plan_ranks(tables: Sequence[TableSpec], budget: float, rank: Any, min_rows: int) -> list[int | None]:
    """k per table (None: the table stays dense): ``rank`` where given, else the largest k its budget share fits."""
    given = per_table(rank, tables, "lowrank rank")
    share = [None] * len(tables) if None not in given else shares(tables, budget, min_rows, "lowrank",
                                                                  lambda t: 4 * (t.num_embeddings + t.dim))
    out: list[int | None] = []
    for t, k, s in zip(tables, given, share):
        if k is None:
            k = None if s.dense else max(1, s.target_bytes // (4 * (t.num_embeddings + t.dim)))
        elif isinstance(k, bool) or int(k) != k or k < 1:
            raise ValueError(f"lowrank: table {t.name!r}: rank must be a whole number >= 1, got {k!r}")
        out.append(None if k is None else min(int(k), t.dim))
    return out


def _uniform(seed: int, name: str, shape: tuple[int, int], bound: float) -> Tensor:
    g = torch.Generator().manual_seed(table_seed(seed, name))
    return (torch.rand(shape, generator=g) * 2 - 1) * bound


class LowRankEmbedding(CompressedCollection):
    name = "lowrank"
    option_keys: ClassVar[frozenset[str]] = frozenset({"budget", "rank", "min_rows"})
    check_options: ClassVar[dict[str, Any]] = {"rank": 3, "min_rows": 0}  # check-system: every table factorized

    def __init__(self, tables: Sequence[TableSpec], optim: EmbeddingOptim, ctx: Any | None = None, *,
                 budget: float = BUDGET, rank: Any = None, min_rows: int = MIN_ROWS,
                 device: str | torch.device = "cpu", check_bounds: bool = True, seed: int = 0) -> None:
        super().__init__(tables, optim, ctx, check_bounds=check_bounds, seed=seed)
        self.ranks = plan_ranks(self.tables, budget, rank, min_rows)
        self.slots: list[tuple[int, ...]] = []
        for t, k in zip(self.tables, self.ranks):
            bound = math.sqrt(1 / t.num_embeddings)
            if k is None:
                self.slots.append((self.add(_uniform(seed, t.name, (t.num_embeddings, t.dim), bound).to(device),
                                            True),))
                continue
            a = _uniform(seed, f"{t.name}/A", (t.num_embeddings, k), bound)
            b = _uniform(seed, f"{t.name}/B", (k, t.dim), math.sqrt(3 / k))
            self.slots.append((self.add(a.to(device), True), self.add(b.to(device), False)))

    @classmethod
    def table_param_bytes(cls, tables: Sequence[TableSpec], options: dict[str, Any]) -> list[int]:
        ks = plan_ranks(tables, options.get("budget", BUDGET), options.get("rank"), options.get("min_rows", MIN_ROWS))
        return [t.dense_bytes if k is None else 4 * k * (t.num_embeddings + t.dim) for t, k in zip(tables, ks)]

    def forward(self, features: SparseFeatures) -> Tensor:
        features = self.checked(features)
        outs = []
        for t, slot, (v, o) in zip(self.tables, self.slots, features.tables()):
            pooled = F.embedding_bag(v, self.params[slot[0]], o, mode=t.pooling, sparse=True,
                                     include_last_offset=True)
            outs.append(pooled if len(slot) == 1 else pooled @ self.params[slot[1]])
        out = torch.cat(outs, dim=1)
        self._last_intermediates = features.nnz * 4 * max(k or t.dim for t, k in zip(self.tables, self.ranks)) \
            + 2 * out.numel() * 4
        self._work = WorkReport(nnz=features.nnz, extra={"rows_read": features.nnz})
        return out

    def table_parameters(self, table: str) -> list[Tensor]:
        return [self.params[k].detach() for k in self.slots[self.table_index(table)]]

    def materialize_from(self, table: str, params: Sequence[Tensor]) -> Tensor:
        return params[0] if len(params) == 1 else params[0] @ params[1]

    def materialize(self, table: str) -> Tensor:
        return self.materialize_from(table, self.table_parameters(table)).detach()

    def compression(self) -> dict[str, Any]:
        return {t.name: {"rank": k} for t, k in zip(self.tables, self.ranks)}
