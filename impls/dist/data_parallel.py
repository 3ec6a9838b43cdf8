"""Data parallelism over any single-device implementation: every rank holds a full replica and looks up its
local batch; gradients are summed over the replicas before each update, so every replica applies the update of
the global batch (EL-Rec's multi-GPU configuration in the EcoRec paper; HugeCTR's DP cluster).

TT cores: their dense gradient buffers are all-reduced table by table inside backward, before the fused update
(EL-Rec all-reduces its replicated cores every step). Uncompressed tables: one dense wgrad buffer over all of
them is all-reduced every step (HugeCTR's dense all-reduce strategy; its size is sum V_t * d_t whether or not a
rank looked a row up), then applied as row updates. The losses are sums over the global batch divided by its
size, so the reduction is a sum."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch
from torch import Tensor

from impls.api import EmbeddingCollection, EmbeddingOptim, MemoryReport, SparseFeatures, TableSpec, WorkReport
from impls.dist.comm import Comm
from impls.dist.context import DistContext
from impls.dist.reports import merge_work

# options whose state is per replica and would need its own synchronization
_UNSUPPORTED = {"cache_rows": "TT-Rec's hot-row cache", "host_pipeline": "EL-Rec's host-memory pipeline"}


class DataParallelCollection(EmbeddingCollection):
    supports_dist = True

    def __init__(
        self,
        tables: Sequence[TableSpec],
        optim: EmbeddingOptim,
        dist: DistContext,
        *,
        local_cls: type[EmbeddingCollection],
        local_options: Mapping[str, Any] | None = None,
        comm: Comm | None = None,
        device: str | torch.device = "cpu",
        check_bounds: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__(tables, optim, dist, check_bounds=check_bounds, seed=seed)
        local_options = dict(local_options or {})
        for key, what in _UNSUPPORTED.items():
            if local_options.get(key):
                raise ValueError(f"{what} ({key}) is not supported with data-parallel sharding yet")
        if local_cls.fused_table_update:
            raise ValueError(f"{local_cls.name} updates its tables inside backward; data-parallel sharding needs "
                             f"their gradients (use table-wise sharding)")
        self.name = local_cls.name
        self.comm = comm or Comm(dist)
        self.local = local_cls(self.tables, optim, None, device=device, check_bounds=False, seed=seed,
                               **local_options)
        if hasattr(self.local, "grad_reducer"):
            self.local.grad_reducer = self._reduce_cores
        self._comm_mark: dict = {}

    def _reduce_cores(self, grads: list[Tensor]) -> None:
        flat = torch.cat([g.reshape(-1) for g in grads])
        self.comm.all_reduce(flat, "emb.dp.cores")
        for g, part in zip(grads, torch.split(flat, [g.numel() for g in grads])):
            g.copy_(part.view_as(g))

    def forward(self, features: SparseFeatures) -> Tensor:
        self._comm_mark = dict(self.comm.sent)
        return self.local(self.checked(features))

    @torch.no_grad()
    def _reduce_dense(self) -> None:
        """Sum the gradients of every parameter that is not a TT core (those were reduced in backward)."""
        cores = {id(p) for t in getattr(self.local, "tt", {}).values() for p in t.cores}
        params = [p for p in self.local.parameters() if id(p) not in cores]
        if not params:
            return
        dense = []
        for p in params:
            g = p.grad
            dense.append(torch.zeros_like(p).reshape(-1) if g is None else g.to_dense().reshape(-1))
        flat = torch.cat(dense)
        self.comm.all_reduce(flat, "emb.dp.dense")
        for p, part in zip(params, torch.split(flat, [p.numel() for p in params])):
            g = part.view_as(p)
            rows = g.abs().sum(1).nonzero().squeeze(1)  # a row update for each row with a nonzero sum
            p.grad = torch.sparse_coo_tensor(rows.unsqueeze(0), g.index_select(0, rows), g.shape)

    def optimizer_step(self) -> None:
        self._reduce_dense()
        self.local.optimizer_step()

    def materialize(self, table: str) -> Tensor:
        return self.local.materialize(table)

    def table_parameters(self, table: str) -> list[Tensor]:
        return self.local.table_parameters(table)

    def materialize_from(self, table: str, params: Sequence[Tensor]) -> Tensor:
        return self.local.materialize_from(table, params)

    def memory_report(self) -> MemoryReport:
        r = self.local.memory_report()
        dense = sum(p.numel() * p.element_size() for p in self.local.parameters())
        r.peak_intermediates += dense  # the all-reduce buffer
        return r

    def work_report(self) -> WorkReport:
        return merge_work([self.local.work_report()], self.comm, self._comm_mark)
