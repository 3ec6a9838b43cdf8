"""md: mixed-dimension embeddings (Ginart et al., ISIT 2021). Each table i gets its own dim d_i from its popularity
by the paper's power rule, d_i = lambda * p_i^alpha (alpha: ``temperature``, 0 = every table the same dim), and a
d_i x D projection maps its pooled vectors to the common dim D (none where d_i = D). Popularity per row is the
table's lookups per sample over its rows, p_i = hotness_i / N_i (dlrm's md_solver with its per-table query
counts): popular small tables keep wide rows, huge rarely-hit tables get narrow ones.

Sizes: ``budget`` (budget.py: tables under ``min_rows`` stay dense): lambda is the largest whose dims (floored to
whole numbers, clamped to [1, D], with ``round_dims`` floored to powers of two as dlrm's flag rounds them) keep
the tables and projections within the compressed tables' share; or ``dims`` per table. Initialization: a table as
the dense table (uniform +-sqrt(1/N)), a projection Xavier-uniform (+-sqrt(6 / (d_i + D))), as dlrm's
projection is."""
from __future__ import annotations

import math
from typing import Any, ClassVar, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, WorkReport, register, table_seed
from impls.compress.base import CompressedCollection
from impls.compress.budget import BUDGET, MIN_ROWS, per_table, shares
from impls.core import ops
from impls.core.tt import dense_init_bound


def md_bytes(table: TableSpec, d: int) -> int:
    """fp32 bytes of a table at dim d with its projection (none at the full dim)."""
    return table.num_embeddings * d * 4 + (0 if d >= table.dim else d * table.dim * 4)


def _dims_at(lam: float, tables: Sequence[TableSpec], temperature: float, round_dims: bool) -> list[int]:
    out = []
    for t in tables:
        d = min(t.dim, max(1, math.floor(lam * (t.hotness / t.num_embeddings) ** temperature)))
        out.append(2 ** int(math.log2(d)) if round_dims else d)
    return out


def power_rule_dims(tables: Sequence[TableSpec], target_bytes: int, temperature: float, round_dims: bool) -> list[int]:
    """The dims of the largest lambda whose tables and projections fit ``target_bytes``; ValueError when even
    dim 1 everywhere does not."""
    def cost(lam: float) -> int:
        return sum(md_bytes(t, d) for t, d in zip(tables, _dims_at(lam, tables, temperature, round_dims)))

    if cost(0.0) > target_bytes:
        raise ValueError(f"md: the compressed tables need {cost(0.0):,} B at dim 1, their share of the budget is "
                         f"{target_bytes:,} B")
    hi = 1.0
    while cost(hi) <= target_bytes and hi < 1e30:
        hi *= 2
    lo = 0.0
    for _ in range(100):  # bisection on lambda: cost is monotone in it
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cost(mid) <= target_bytes else (lo, mid)
    return _dims_at(lo, tables, temperature, round_dims)


def plan_dims(tables: Sequence[TableSpec], budget: float, dims: Any, min_rows: int, temperature: float,
              round_dims: bool) -> list[int]:
    if not temperature >= 0:
        raise ValueError(f"md: temperature (alpha of the power rule) must be >= 0, got {temperature}")
    explicit = per_table(dims, tables, "md dims")  # given dims override the budget's
    if None not in explicit:
        out = list(explicit)
        ruled, from_rule = [], []
    else:
        share = shares(tables, budget, min_rows, "md", lambda t: md_bytes(t, 1))
        ruled = [i for i, (s, d) in enumerate(zip(share, explicit)) if not s.dense and d is None]
        target = sum(share[i].target_bytes for i in ruled)
        from_rule = power_rule_dims([tables[i] for i in ruled], target, temperature, round_dims) if ruled else []
        out = [t.dim if s.dense and d is None else d for t, s, d in zip(tables, share, explicit)]
    for i, d in zip(ruled, from_rule):
        out[i] = d
    for t, d in zip(tables, out):
        if isinstance(d, bool) or int(d) != d or not 1 <= d <= t.dim:
            raise ValueError(f"md: table {t.name!r}: dim must be a whole number in [1, {t.dim}], got {d!r}")
    return [int(d) for d in out]


@register
class MDEmbedding(CompressedCollection):
    """Mixed-dimension embeddings: each table its own dim by the power rule, projected to the common dim. As a
    TorchRec module: dlrmbench.systems.MDEBC."""

    option_keys: ClassVar[frozenset[str]] = frozenset({"budget", "dims", "min_rows", "round_dims", "temperature"})
    name = "md"
    check_options: ClassVar[dict[str, Any]] = {"dims": 2}  # check-system: every small table at dimension 2

    def __init__(self, tables: Sequence[TableSpec], optim: EmbeddingOptim, ctx: Any | None = None, *,
                 budget: float = BUDGET, dims: Any = None, temperature: float = 0.3, round_dims: bool = False,
                 min_rows: int = MIN_ROWS, device: str | torch.device = "cpu", check_bounds: bool = True,
                 seed: int = 0) -> None:
        super().__init__(tables, optim, ctx, check_bounds=check_bounds, seed=seed)
        self.dims = plan_dims(self.tables, budget, dims, min_rows, temperature, round_dims)
        self.slots: list[tuple[int, ...]] = []
        for t, d in zip(self.tables, self.dims):
            b = dense_init_bound(t.num_embeddings)
            w = ops.counter_uniform(table_seed(seed, t.name), torch.empty(t.num_embeddings, d), -b, b)
            slot = (self.add(w.to(device), True),)
            if d < t.dim:
                x = math.sqrt(6.0 / (d + t.dim))
                proj = ops.counter_uniform(table_seed(seed, f"{t.name}/projection"), torch.empty(t.dim, d), -x, x)
                slot += (self.add(proj.to(device), False),)
            self.slots.append(slot)

    @classmethod
    def table_param_bytes(cls, tables: Sequence[TableSpec], options: dict[str, Any]) -> list[int]:
        dims = plan_dims(tables, options.get("budget", BUDGET), options.get("dims"),
                         options.get("min_rows", MIN_ROWS), options.get("temperature", 0.3),
                         options.get("round_dims", False))
        return [md_bytes(t, d) for t, d in zip(tables, dims)]

    def forward(self, features: SparseFeatures) -> Tensor:
        features = self.checked(features)
        outs, inter = [], 0
        for t, slot, (v, o) in zip(self.tables, self.slots, features.tables()):
            pooled = F.embedding_bag(v, self.params[slot[0]], o, mode=t.pooling, sparse=True,
                                     include_last_offset=True)
            inter += v.numel() * pooled.shape[1] * 4  # the sparse gradient's rows
            if len(slot) > 1:  # projection after pooling: both are linear
                inter += pooled.numel() * 4 * 2
                pooled = F.linear(pooled, self.params[slot[1]])
            outs.append(pooled)
        out = torch.cat(outs, dim=1)
        self._last_intermediates = inter + 2 * out.numel() * 4
        self._work = WorkReport(nnz=features.nnz)
        return out

    def kept_dense(self) -> dict[str, str]:
        return {t.name: "kept at its full dim: under min_rows, or its budget share holds the table"
                for t, slot in zip(self.tables, self.slots) if len(slot) == 1}

    def table_parameters(self, table: str) -> list[Tensor]:
        return [self.params[k].detach() for k in self.slots[self.table_index(table)]]

    def materialize_from(self, table: str, params: Sequence[Tensor]) -> Tensor:
        return params[0] if len(params) == 1 else params[0] @ params[1].T

    def materialize(self, table: str) -> Tensor:
        return self.materialize_from(table, self.table_parameters(table)).detach()

    def compression(self) -> dict[str, Any]:
        return {t.name: {"dim": d} for t, d in zip(self.tables, self.dims)}
