"""Data parallelism over any single-device implementation: every rank holds a full replica and looks up its
local batch; gradients are summed over the replicas before the update, so every replica applies the update of
the global batch (EL-Rec's multi-GPU configuration in the EcoRec paper; HugeCTR's DP cluster).

One coalesced all-reduce per step carries every gradient of the system's ``gradient_tensors`` (EL-Rec syncs its
replicated cores with one all_reduce_coalesced per step); the replica is built with the system's
``external_update_options`` so that those gradients wait in ``.grad`` (for a TT system: its core update runs after
the reduction instead of inside backward, which changes no number). Dense gradients (TT cores) are reduced as they
are; a table's row gradients as one dense wgrad buffer of V_t * d_t elements whether or not this rank looked a row
up (HugeCTR's dense all-reduce strategy), applied afterwards as row updates. Options a replica cannot share
(``per_replica_state``: TT-Rec's cache, EL-Rec's host pipeline) are refused. The losses are sums over the global
batch divided by its size, so the reduction is a sum."""
from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor

from impls.api import EmbeddingOptim, MemoryReport, SparseFeatures, TableSpec, WorkReport
from impls.sharding.context import DistContext
from impls.sharding.reports import merge_work
from impls.sharding.sharded import WrappedCollection


class DataParallelCollection(WrappedCollection):
    def __init__(self, tables: Sequence[TableSpec], optim: EmbeddingOptim, ctx: DistContext, **common: Any) -> None:
        super().__init__(tables, optim, ctx, **common)
        for key, what in self.local_cls.per_replica_state.items():
            if self.local_options.get(key):
                raise ValueError(f"{what} ({key}) is not supported with data-parallel sharding yet")
        # every gradient waits in .grad for the all-reduce
        self.local = self.build_local(self.tables, **self.local_cls.external_update_options(self.local_options))

    def forward(self, features: SparseFeatures) -> Tensor:
        self.mark_step()
        return self.local(self.checked(features))

    @torch.no_grad()
    def _reduce(self) -> None:
        """Sum every gradient over the replicas in one all-reduce."""
        tensors = self.local.gradient_tensors()
        grads = [torch.zeros_like(p) if p.grad is None else p.grad.to_dense() for p, _ in tensors]
        for (p, row_sparse), g in zip(tensors, self.comm.all_reduce_coalesced(grads, "emb.dp")):
            if not row_sparse:
                p.grad = g
            else:  # a table: a row update for each row with a nonzero summed gradient
                rows = g.abs().sum(1).nonzero().squeeze(1)
                p.grad = torch.sparse_coo_tensor(rows.unsqueeze(0), g.index_select(0, rows), g.shape,
                                                 check_invariants=False)  # rows in range by construction

    def optimizer_step(self) -> None:
        self._reduce()
        self.local.optimizer_step()

    def materialize(self, table: str) -> Tensor:
        return self.local.materialize(table)

    def table_parameters(self, table: str) -> list[Tensor]:
        return self.local.table_parameters(table)

    def materialize_from(self, table: str, params: Sequence[Tensor]) -> Tensor:
        return self.local.materialize_from(table, params)

    def memory_report(self) -> MemoryReport:
        r = self.local.memory_report()
        dense = sum(p.numel() * p.element_size() for p, _ in self.local.gradient_tensors())
        r.peak_intermediates += dense  # the all-reduce buffer
        return r

    def work_report(self) -> WorkReport:
        return merge_work([self.local.work_report()], self.comm, self._comm_mark)
