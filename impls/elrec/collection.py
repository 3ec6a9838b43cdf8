"""elrec: EL-Rec's schedule. Forward: one stage-1 product per distinct prefix group (E1, "intermediate
result reuse") and stage 2 per occurrence, E1*a + nnz*b, over the whole batch. Backward: gradients first
aggregated per unique id, then the full chain per unique id with no prefix reuse, U*(3a+2b), and the
update fused (EL-Rec's SGD kernel applies -lr*grad into the cores; Adagrad applies once per step).

``host_pipeline=True``: the uncompressed tables (those under the TT threshold, ``tt_min_rows``) are served by
EL-Rec's host-memory pipeline (impls/elrec/host_pipeline.py): ``prefetch(next batch)`` gathers their rows on
a worker thread while the current batch trains; updates stay exact. On a GPU those tables and their optimizer
state live in pinned host memory, outside the module's parameters (moving the module moves only the cores), and
the update is applied there; ``materialize`` returns them from the host and ``memory_report`` counts device
memory only."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from impls.api import MemoryReport, SparseFeatures, WorkReport, register
from impls.core import ops
from impls.core.counters import TTWork
from impls.core.stage_plan import IndexStats, StageCall, TablePlan
from impls.core.tt_batch import bag_ids, dedup, prefix_groups
from impls.core.tt_collection import TTCollection, TTTable
from impls.elrec.host_pipeline import HostPipeline


@register
class ELRec(TTCollection):
    """EL-Rec (SC22): TT tables with prefix-product reuse forward and per-unique-id gradients backward; optionally
    the host-memory pipeline for the plain tables (``host_pipeline``). As a TorchRec module:
    dlrmbench.systems.ELRecEBC."""

    option_keys = TTCollection.option_keys | {"host_pipeline"}
    name = "elrec"
    dist_defaults = {"sharding": "data-parallel"}  # replicated cores, gradients summed every step (SC24's baseline)
    allowed_cores = (3,)
    per_replica_state = {"host_pipeline": "EL-Rec's host-memory pipeline"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        device = torch.device(kwargs.get("device", "cpu"))
        self.host: dict[str, Tensor] = {}  # GPU runs with the pipeline: the uncompressed tables, pinned host memory
        if self.host_pipeline and device.type == "cuda":
            for key in list(self.dense.keys()):
                self.host[key] = self.dense.pop(key).data.cpu().pin_memory()
                state = self._dense_state[key]
                self._dense_state[key] = None if state is None else state.cpu().pin_memory()
        hosts = {int(k): self._table(k) for k in (self.host or self.dense)}
        self.pipeline = HostPipeline(hosts, device) if self.host_pipeline and hosts else None
        self._staged: dict = {}

    def _table(self, key: str) -> Tensor:
        """An uncompressed table where it lives: pinned host memory (GPU, pipeline) or the module's parameter."""
        return self.host[key] if key in self.host else self.dense[key].data

    def configure(self, host_pipeline: bool = False, **options: Any) -> None:
        """host_pipeline: serve the uncompressed tables through EL-Rec's prefetching host pipeline."""
        super().configure(**options)  # anything else is an unknown option
        self.host_pipeline = bool(host_pipeline)

    # --- the host-memory pipeline ------------------------------------------------------------------
    def prefetch(self, features: SparseFeatures) -> None:
        if self.pipeline is not None:
            self.pipeline.prefetch(features)

    def forward(self, features: SparseFeatures) -> Tensor:
        if self.pipeline is not None:
            features = self.checked(features)
            self._staged = self.pipeline.take(features)
        return super().forward(features)

    def dense_lookup(self, index: int, values: Tensor, offsets: Tensor, pooling: str) -> Tensor:
        if self.pipeline is None:
            return super().dense_lookup(index, values, offsets, pooling)
        st = self._staged[index]
        return F.embedding_bag(st.inverse, st.rows, offsets, mode=pooling, include_last_offset=True)

    @torch.no_grad()
    def optimizer_step(self) -> None:
        if self.pipeline is not None:
            wrote = {}
            for i, st in self._staged.items():
                if st.rows.grad is None:
                    continue
                key = str(i)
                self.optim.apply_rows(self._table(key), self._dense_state[key], st.ids, st.rows.grad.to(st.ids.device))
                st.rows.grad = None
                wrote[i] = st.ids
            self.pipeline.wrote(wrote)
        super().optimizer_step()

    def materialize(self, table: str) -> Tensor:
        key = str(self.table_index(table))
        return self.host[key] if key in self.host else super().materialize(table)

    def table_parameters(self, table: str) -> list[Tensor]:
        key = str(self.table_index(table))
        return [self.host[key]] if key in self.host else super().table_parameters(table)

    def work_report(self) -> WorkReport:
        rep = super().work_report()
        if self.pipeline is not None:
            rep.extra["host_pipeline"] = dict(vars(self.pipeline.stats))
        return rep

    def memory_report(self) -> MemoryReport:
        rep = super().memory_report()
        staged = sum(st.rows.numel() * st.rows.element_size() for st in self._staged.values())
        return MemoryReport(params=rep.params, optimizer_state=rep.optimizer_state,
                            peak_intermediates=rep.peak_intermediates + 2 * staged)  # this batch's and the next

    @classmethod
    def stage_plan(cls, shape, index: IndexStats, **_: Any) -> TablePlan:
        """One table's step (impls/core/stage_plan.py): forward one call over the batch's E1 prefix groups and its nnz
        occurrences (the rows of every occurrence alive); backward the full chain per unique id, U groups and U
        items (the per-unique gradient rows alive beside every occurrence's bag)."""
        e1 = index.groups(0, int(round(index.unique)))
        return TablePlan([StageCall("fwd", e1, index.nnz, index.nnz * shape.dim * 4),
                          StageCall("bwd", index.unique, index.unique, index.unique * shape.dim * 4 + index.nnz * 8)],
                         unique=index.unique, e1=e1, micro_batches=1)

    def step_forward(self, lookups, batch_size: int, batch, work: TTWork):
        """Every TT table's step in one native call (ops.elrec_tables_forward) where the device has its kernel; else
        table by table in torch passes and stage ops (a GPU)."""
        if not ops.has_kernel("elrec_tables_forward", batch.values.device):
            return super().step_forward(lookups, batch_size, batch, work)
        return ops.elrec_tables_forward(self.step_tables(lookups), batch.values, batch.offsets, batch.tables,
                                        batch_size, work)

    def step_backward(self, tables, saved, grads, work: TTWork) -> None:
        if not tables or not ops.has_kernel("elrec_tables_backward", grads[0].device):
            super().step_backward(tables, saved, grads, work)
            return
        ops.elrec_tables_backward(self.cores_and_shapes(tables), saved, grads, [t.grads for t in tables], work)

    def lookup_forward(self, table: TTTable, values: Tensor, offsets: Tensor, batch_size: int, work: TTWork):
        s = table.shape
        dd = dedup(values, offsets, batch_size)  # EL-Rec's local index reordering (sorted unique)
        groups = prefix_groups(dd.unique, s.last_radix)
        work.unique += dd.unique.numel()
        work.e1 += groups.prefix_ids.numel()
        work.micro_batches += 1
        item_group = groups.group_of.index_select(0, dd.inverse)  # every occurrence is an item
        emb = table.stages_forward(groups.prefix_ids, item_group, values % s.last_radix, work)
        out = torch.zeros(batch_size, s.dim, device=values.device)
        ops.gather_pool(emb, torch.arange(values.numel(), device=values.device), offsets, out, check_indices=False)
        return out, (dd, offsets)

    def lookup_backward(self, table: TTTable, saved: Any, grad: Tensor, work: TTWork) -> None:
        dd, offsets = saved
        s = table.shape
        U = dd.unique.numel()
        bags = bag_ids(offsets, dd.inverse.numel())
        d_unique = table.buffer("d_unique", U, s.dim).zero_()  # gradient aggregation per unique id
        ops.gather_pool(grad, bags.index_select(0, dd.sorted_positions), dd.count_offsets, d_unique,
                        check_indices=False)
        prefix_ids = torch.div(dd.unique, s.last_radix, rounding_mode="floor")  # per unique: no reuse
        table.stages_backward(
            prefix_ids, torch.arange(U, device=grad.device), dd.unique % s.last_radix, d_unique, work, bags
        )
