"""hash: the hashing trick (Weinberger et al., ICML 2009). Each table keeps M < N rows; id x reads row h(x) of them,
h a seeded universal hash, so colliding ids share a row. With ``hashes`` = k > 1 an id reads k rows (k independent
hashes) and its embedding is their sum (Bloom-style; hash embeddings without the per-id importance weights, which
would cost N weights again). The M-row tables are an ordinary dense collection (``storage``: fbgemm's TBE where
installed, else torch's EmbeddingBag), so the method runs the same kernels as the dense baselines on CPU and CUDA.

The hash is Carter-Wegman's: the id split into 30-bit limbs x0, x1, x2, h(x) = ((a0 x0 + a1 x1 + a2 x2 + b) mod p)
mod M with p = 2^31 - 1 and (a, b) drawn per (run seed, table, hash) - exact in int64 on any device. A table starts
as dlrm starts a table capped at M rows (`--max-ind-range`: uniform +-sqrt(1/M)).
Sizes: ``budget`` (a fraction of the dense tables' bytes; budget.py shares it), or ``rows`` (M per table)."""
from __future__ import annotations

from typing import Any, ClassVar, Sequence

import numpy as np
import torch
from torch import Tensor

from impls.api import (EmbeddingCollection, EmbeddingOptim, MemoryReport, SparseFeatures, TableSpec, WorkReport,
                       column_offsets, get_impl, register, table_seed)
from impls.compress.budget import BUDGET, MIN_ROWS, per_table, shares

P = 2**31 - 1
LIMB = 30
STORAGES = ("fbgemm", "torch")


def default_storage() -> str:
    try:
        get_impl("dense-fbgemm")
    except ImportError:
        return "torch"
    return "fbgemm"


class UniversalHash:
    """k seeded Carter-Wegman hashes of one table's ids into ``rows`` rows."""

    def __init__(self, seed: int, table: str, k: int, rows: int) -> None:
        rng = np.random.default_rng([table_seed(seed, table), k, rows])
        self.a = [[int(v) for v in rng.integers(1, P, size=3)] for _ in range(k)]
        self.b = [int(v) for v in rng.integers(0, P, size=k)]
        self.rows = rows

    def __call__(self, ids: Tensor) -> Tensor:
        """[n] int64 ids -> [n, k] rows."""
        mask = (1 << LIMB) - 1
        limbs = (ids & mask, (ids >> LIMB) & mask, ids >> (2 * LIMB))
        out = [((a[0] * limbs[0] + a[1] * limbs[1] + a[2] * limbs[2] + b) % P) % self.rows
               for a, b in zip(self.a, self.b)]
        return torch.stack(out, dim=1)


def kept_rows(tables: Sequence[TableSpec], budget: float, rows: Any, min_rows: int) -> list[int]:
    """M per table: ``rows`` where given (capped at N), else the table's share of ``budget`` in fp32 rows (N for a
    table that stays dense)."""
    out = []
    given = per_table(rows, tables, "hash rows")
    share = [None] * len(tables) if None not in given else shares(tables, budget, min_rows, "hash",
                                                                  lambda t: 4 * t.dim)  # at least one row
    for t, m, s in zip(tables, given, share):
        if m is None:
            m = t.num_embeddings if s.dense else s.target_bytes // (4 * t.dim)
        if isinstance(m, bool) or int(m) != m or m < 1:
            raise ValueError(f"hash: table {t.name!r}: rows must be a whole number >= 1, got {m!r}")
        out.append(min(int(m), t.num_embeddings))
    return out


@register
class HashEmbedding(EmbeddingCollection):
    """The hashing trick: each table keeps fewer rows and ids share them by a seeded universal hash (``hashes`` rows
    summed per id, rows from ``budget`` or ``rows``). As a TorchRec module: dlrmbench.systems.HashEBC."""

    option_keys: ClassVar[frozenset[str]] = frozenset({"budget", "hashes", "min_rows", "rows", "storage"})
    name = "hash"
    # check-system: every table of its small cases hashed into 3 rows by 2 hashes
    check_options: ClassVar[dict[str, Any]] = {"rows": 3, "hashes": 2}
    supports_external_update = False  # single-device: its M-row tables update themselves (fused on fbgemm)

    def __init__(self, tables: Sequence[TableSpec], optim: EmbeddingOptim, ctx: Any | None = None, *,
                 budget: float = BUDGET, rows: Any = None, hashes: int = 1,
                 min_rows: int = MIN_ROWS, storage: str | None = None, device: str | torch.device = "cpu",
                 check_bounds: bool = True, seed: int = 0) -> None:
        super().__init__(tables, optim, ctx, check_bounds=check_bounds, seed=seed)
        if isinstance(hashes, bool) or int(hashes) != hashes or hashes < 1:
            raise ValueError(f"hash: hashes (rows summed per id) must be a whole number >= 1, got {hashes!r}")
        storage = storage or default_storage()
        if storage not in STORAGES:
            raise ValueError(f"hash: storage must be one of {STORAGES}, got {storage!r}")
        self.k, self.storage = int(hashes), storage
        self.kept = kept_rows(self.tables, budget, rows, min_rows)
        self.hashed = [m < t.num_embeddings for t, m in zip(self.tables, self.kept)]
        self.hashers = [UniversalHash(seed, t.name, self.k, m) if h else None
                        for t, m, h in zip(self.tables, self.kept, self.hashed)]
        virtual = [TableSpec(t.name, m, t.dim, t.pooling, t.hotness) for t, m in zip(self.tables, self.kept)]
        inner = get_impl("dense-fbgemm" if storage == "fbgemm" else "dense-torch")
        self.inner = inner(virtual, optim, device=device, check_bounds=False, seed=seed)
        # a mean over a k-times longer bag is the mean of the summed embeddings over k: those columns are scaled
        scale = torch.ones(self.output_dim)
        for t, h, at in zip(self.tables, self.hashed, column_offsets(self.tables)):
            if h and t.pooling == "mean":
                scale[at:at + t.dim] = self.k
        self.register_buffer("mean_scale", scale.to(device) if bool((scale != 1).any()) else None)
        self._hashed_bytes = 0

    @classmethod
    def table_param_bytes(cls, tables: Sequence[TableSpec], options: dict[str, Any]) -> list[int]:
        kept = kept_rows(tables, options.get("budget", BUDGET), options.get("rows"),
                         options.get("min_rows", MIN_ROWS))
        return [m * t.dim * 4 for t, m in zip(tables, kept)]

    def _rows_of(self, i: int, ids: Tensor) -> Tensor:
        """[n] ids of table i -> [n, k] rows of its M-row table (k = 1 for a table kept whole)."""
        if not self.hashed[i]:
            return ids.unsqueeze(1)
        return self.hashers[i](ids)

    def hashed_features(self, features: SparseFeatures) -> SparseFeatures:
        """The batch on the M-row tables: every id replaced by its k rows (a hashed table's bags k times longer)."""
        B, vals, offs, base = features.batch_size, [], [], 0
        for i, (v, o) in enumerate(features.tables()):
            r = self._rows_of(i, v)
            vals.append(r.reshape(-1))
            offs.append((o[:-1] - o[0]) * r.shape[1] + base)
            base += r.numel()
        offs.append(torch.tensor([base], dtype=torch.int64, device=features.offsets.device))
        return SparseFeatures(torch.cat(vals), torch.cat(offs), B)

    def forward(self, features: SparseFeatures) -> Tensor:
        features = self.checked(features)
        hashed = self.hashed_features(features)
        out = self.inner(hashed)
        if self.mean_scale is not None:
            out = out * self.mean_scale
        self._hashed_bytes = hashed.values.numel() * 8 + hashed.offsets.numel() * 8
        inner = self.inner.work_report()
        self._work = WorkReport(nnz=features.nnz, extra={**inner.extra, "rows_read": hashed.nnz})
        return out

    def optimizer_step(self) -> None:
        self.inner.optimizer_step()

    def optimizer_state(self) -> dict:
        return self.inner.optimizer_state()

    def kept_dense(self) -> dict[str, str]:
        return {t.name: f"{t.num_embeddings:,} rows fit its share of the budget: not hashed"
                for t, h in zip(self.tables, self.hashed) if not h}

    def materialize(self, table: str) -> Tensor:
        return self.materialize_from(table, [self.inner.materialize(table)])

    def table_parameters(self, table: str) -> list[Tensor]:
        return [self.inner.materialize(table)]

    def materialize_from(self, table: str, params: Sequence[Tensor]) -> Tensor:
        i = self.table_index(table)
        ids = torch.arange(self.tables[i].num_embeddings, device=params[0].device)
        return params[0][self._rows_of(i, ids)].sum(dim=1)

    def memory_report(self) -> MemoryReport:
        inner = self.inner.memory_report()
        return MemoryReport(params=inner.params, optimizer_state=inner.optimizer_state,
                            peak_intermediates=inner.peak_intermediates + self._hashed_bytes)

    def compression(self) -> dict[str, Any]:
        """Per table: rows kept and hashes (a record's description of the method's setting)."""
        return {t.name: {"rows": m, "hashes": self.k if h else 1} for t, m, h in zip(self.tables, self.kept,
                                                                                      self.hashed)}
