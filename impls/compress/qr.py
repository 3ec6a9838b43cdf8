"""qr: quotient-remainder compositional embeddings (Shi et al., KDD 2020). A table of N rows becomes two: Q with
ceil(N / c) rows and R with c rows (c: ``collisions``); id x reads Q[x div c] and R[x mod c] and combines them by
``operation``: "mult" (elementwise product, the paper's best), "add", or "concat" (Q and R each half of the dim).
Every id gets its own pair of rows, so no two ids share an embedding, in (N / c + c) rows: at least 2 sqrt(N)
(at c ~ sqrt(N)), so a budget below that for some table is refused, naming it. Pooling (sum / mean) is over the
combined vectors, as dlrm's QR trick does.

Sizes: ``budget`` (budget.py shares it; each table then takes the smallest c whose two tables fit its share, i.e.
the largest Q) or ``collisions`` per table. Initialization (our choice, stated because dlrm's differs): "mult": Q
as the dense table (uniform +-sqrt(1/N)) and R = 1 + uniform +-sqrt(1/N) (rows near 1, so the product starts at the
dense scale and ids with one quotient still differ); "add": both uniform +-sqrt(1/(2N)) (the sum has the dense
variance); "concat": both halves as the dense table."""
from __future__ import annotations

import math
from typing import Any, ClassVar, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, WorkReport, register, table_seed
from impls.compress.base import CompressedCollection, pool
from impls.compress.budget import BUDGET, MIN_ROWS, per_table, shares
from impls.core import ops
from impls.core.tt import dense_init_bound

OPERATIONS = ("mult", "add", "concat")


def split_dims(dim: int, operation: str) -> tuple[int, int]:
    """The dims of Q and R."""
    return ((dim + 1) // 2, dim // 2) if operation == "concat" else (dim, dim)


def qr_bytes(n: int, dim: int, c: int, operation: str) -> int:
    dq, dr = split_dims(dim, operation)
    return (-(-n // c) * dq + c * dr) * 4


def _least(table: TableSpec, operation: str) -> tuple[int, int]:
    """(c where (N / c) dq + c dr is least, those bytes)."""
    n, dq, dr = table.num_embeddings, *split_dims(table.dim, operation)
    best = max(2, round(math.sqrt(n * dq / max(dr, 1))))
    return min(((qr_bytes(n, table.dim, c, operation), c) for c in range(max(2, best - 2), best + 3)))[::-1]


def least_bytes(table: TableSpec, operation: str) -> int:
    return _least(table, operation)[1]


def collisions_for(table: TableSpec, target_bytes: int, operation: str) -> int:
    """The smallest c >= 2 whose Q and R fit ``target_bytes`` (the largest Q that does); ValueError when even the
    smallest pair (c near sqrt(N)) does not."""
    n = table.num_embeddings
    best, smallest = _least(table, operation)
    if smallest > target_bytes:
        raise ValueError(f"qr: table {table.name!r} ({n:,} rows x {table.dim}) needs at least {smallest:,} B for its "
                         f"two tables (c near sqrt(N)), its share of the budget is {target_bytes:,} B")
    lo, hi = 2, best  # bytes fall as c grows up to `best`
    while lo < hi:
        mid = (lo + hi) // 2
        if qr_bytes(n, table.dim, mid, operation) <= target_bytes:
            hi = mid
        else:
            lo = mid + 1
    while qr_bytes(n, table.dim, lo, operation) > target_bytes:  # the integer least sits next to `best`
        lo += 1
    return lo


def plan_collisions(tables: Sequence[TableSpec], budget: float, collisions: Any, min_rows: int,
                    operation: str) -> list[int | None]:
    """c per table (None: the table stays whole)."""
    if operation not in OPERATIONS:
        raise ValueError(f"qr: operation must be one of {OPERATIONS}, got {operation!r}")
    out: list[int | None] = []
    given = per_table(collisions, tables, "qr collisions")
    share = [None] * len(tables) if None not in given else shares(tables, budget, min_rows, "qr",
                                                                  lambda t: least_bytes(t, operation))
    for t, c, s in zip(tables, given, share):
        if c is None:
            c = None if s.dense else collisions_for(t, s.target_bytes, operation)
        elif isinstance(c, bool) or int(c) != c or c < 2:
            raise ValueError(f"qr: table {t.name!r}: collisions must be a whole number >= 2, got {c!r}")
        out.append(None if c is None else min(int(c), t.num_embeddings))
    return out


def _uniform(seed: int, name: str, rows: int, cols: int, low: float, high: float) -> Tensor:
    return ops.counter_uniform(table_seed(seed, name), torch.empty(rows, cols), low, high)


@register
class QREmbedding(CompressedCollection):
    """Quotient-remainder embeddings: a table as a quotient and a remainder table combined by ``operation``. As a
    TorchRec module: dlrmbench.systems.QREBC."""

    option_keys: ClassVar[frozenset[str]] = frozenset({"budget", "collisions", "min_rows", "operation"})
    name = "qr"
    check_options: ClassVar[dict[str, Any]] = {"collisions": 2}  # check-system: every small table QR-split

    def __init__(self, tables: Sequence[TableSpec], optim: EmbeddingOptim, ctx: Any | None = None, *,
                 budget: float = BUDGET, collisions: Any = None, operation: str = "mult",
                 min_rows: int = MIN_ROWS, device: str | torch.device = "cpu", check_bounds: bool = True,
                 seed: int = 0) -> None:
        super().__init__(tables, optim, ctx, check_bounds=check_bounds, seed=seed)
        self.operation = operation
        self.collisions = plan_collisions(self.tables, budget, collisions, min_rows, operation)
        self.slots: list[tuple[int, ...]] = []
        for t, c in zip(self.tables, self.collisions):
            b = dense_init_bound(t.num_embeddings)
            if c is None:
                w = _uniform(seed, t.name, t.num_embeddings, t.dim, -b, b)
                self.slots.append((self.add(w.to(device), True),))
                continue
            dq, dr = split_dims(t.dim, operation)
            bq = b / math.sqrt(2) if operation == "add" else b
            q = _uniform(seed, f"{t.name}/quotient", -(-t.num_embeddings // c), dq, -bq, bq)
            lo, hi = (1 - b, 1 + b) if operation == "mult" else (-bq, bq)
            r = _uniform(seed, f"{t.name}/remainder", c, dr, lo, hi)
            self.slots.append((self.add(q.to(device), True), self.add(r.to(device), True)))

    @classmethod
    def table_param_bytes(cls, tables: Sequence[TableSpec], options: dict[str, Any]) -> list[int]:
        op = options.get("operation", "mult")
        cs = plan_collisions(tables, options.get("budget", BUDGET), options.get("collisions"),
                             options.get("min_rows", MIN_ROWS), op)
        return [t.dense_bytes if c is None else qr_bytes(t.num_embeddings, t.dim, c, op) for t, c in zip(tables, cs)]

    def _combine(self, c: int, q: Tensor, r: Tensor, ids: Tensor, offsets: Tensor | None, mode: str) -> Tensor:
        """Pooled bags (``offsets``) of the combined rows (sparse gradients), or with ``offsets`` None the [n, D] rows
        themselves (dense gradients: the oracle's path)."""
        qi, ri = torch.div(ids, c, rounding_mode="floor"), ids % c
        if self.operation == "mult" or offsets is None:
            sparse = offsets is not None
            a, b = F.embedding(qi, q, sparse=sparse), F.embedding(ri, r, sparse=sparse)
            rows = a * b if self.operation == "mult" else a + b if self.operation == "add" else torch.cat([a, b], 1)
            return rows if offsets is None else pool(rows, offsets, mode)
        a = F.embedding_bag(qi, q, offsets, mode=mode, sparse=True, include_last_offset=True)
        b = F.embedding_bag(ri, r, offsets, mode=mode, sparse=True, include_last_offset=True)
        return a + b if self.operation == "add" else torch.cat([a, b], 1)  # both linear in the rows: pool first

    def forward(self, features: SparseFeatures) -> Tensor:
        features = self.checked(features)
        outs, inter = [], 0
        for t, c, slot, (v, o) in zip(self.tables, self.collisions, self.slots, features.tables()):
            if c is None:
                outs.append(F.embedding_bag(v, self.params[slot[0]], o, mode=t.pooling, sparse=True,
                                            include_last_offset=True))
                inter += v.numel() * t.dim * 4  # the sparse gradient's rows
                continue
            outs.append(self._combine(c, self.params[slot[0]], self.params[slot[1]], v, o, t.pooling))
            inter += v.numel() * t.dim * 4 * (3 if self.operation == "mult" else 2)  # gathered rows (+ product)
        out = torch.cat(outs, dim=1)
        self._last_intermediates = inter + 2 * out.numel() * 4  # + the output and its gradient
        self._work = WorkReport(nnz=features.nnz, extra={"rows_read": features.nnz * 2})
        return out

    def table_parameters(self, table: str) -> list[Tensor]:
        return [self.params[k].detach() for k in self.slots[self.table_index(table)]]

    def materialize_from(self, table: str, params: Sequence[Tensor]) -> Tensor:
        i = self.table_index(table)
        c = self.collisions[i]
        if c is None:
            return params[0]
        ids = torch.arange(self.tables[i].num_embeddings, device=params[0].device)
        return self._combine(c, params[0], params[1], ids, None, "sum")

    def kept_dense(self) -> dict[str, str]:
        return {t.name: "kept whole: under min_rows, or its budget share holds the table"
                for t, c in zip(self.tables, self.collisions) if c is None}

    def materialize(self, table: str) -> Tensor:
        return self.materialize_from(table, self.table_parameters(table)).detach()

    def compression(self) -> dict[str, Any]:
        return {t.name: {"collisions": c, "operation": self.operation} for t, c in zip(self.tables, self.collisions)}
