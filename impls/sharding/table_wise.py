"""Table-wise model parallelism over any single-device implementation: each rank owns whole tables, receives
their lookups over the global batch (id AlltoAll), looks them up with the system's own schedule and returns
the pooled rows (output AlltoAll, reverse in backward). Options:

placement        sequential | greedy | random (plan.py); greedy needs per-table costs
pipeline         none (one stage, TT-Rec's and the dense baseline's) | table (EcoRec's table-group pipeline)
                 | batch (its batch-wise ablation: sample micro-batches)
pipeline_groups  table groups per rank (EcoRec's num_micro_keys), default 4
skew             slope of the group sizes in [0, 1] (EcoRec's skew_degree)
reorder          reverse each rank's cost-ordered list before grouping (cheap tables first); the backward pass
                 runs its own groups, cut as the artifact cuts them (plan.backward_group_tables), so under
                 the table pipeline every owned table is its own local module (looked up as a part of its stage)
pipeline_micro_batches   sample micro-batches of the batch-wise pipeline, default 4
overlap          issue AlltoAlls asynchronously (default); False waits on each, same numbers
capacity_bytes   per-rank parameter budget; a placement that cannot fit is an error"""
from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor

from impls.api import (EmbeddingCollection, EmbeddingOptim, MemoryReport, SparseFeatures, TableSpec, WorkReport,
                       column_offsets)
from impls.sharding.context import DistContext
from impls.sharding.exchange import exchange_ids
from impls.sharding.gather import Block, assemble_table
from impls.sharding.pipeline import BackwardGroup, Stage, run_stages
from impls.sharding.plan import backward_group_tables, group_tables, place_tables
from impls.sharding.reports import merge_memory, merge_work
from impls.sharding.sharded import WrappedCollection

PIPELINES = ("none", "table", "batch")


class TableWiseCollection(WrappedCollection):
    def __init__(
        self,
        tables: Sequence[TableSpec],
        optim: EmbeddingOptim,
        ctx: DistContext,
        *,
        costs: Sequence[float] | None = None,
        placement: str = "sequential",
        pipeline: str = "none",
        pipeline_groups: int = 4,
        skew: float = 0.0,
        reorder: bool = False,
        pipeline_micro_batches: int = 4,
        overlap: bool = True,
        capacity_bytes: int | None = None,
        **common: Any,
    ) -> None:
        super().__init__(tables, optim, ctx, **common)
        if pipeline not in PIPELINES:
            raise ValueError(f"pipeline must be one of {PIPELINES}, got {pipeline!r}")
        if pipeline_groups < 1 or pipeline_micro_batches < 1:
            raise ValueError(f"pipeline_groups and pipeline_micro_batches must be >= 1, got "
                             f"{pipeline_groups}, {pipeline_micro_batches}")
        if placement == "greedy" and costs is None:
            raise ValueError("greedy placement needs per-table costs (unique ids of a sampled batch)")
        self.pipeline, self.overlap, self.micro_batches = pipeline, bool(overlap), int(pipeline_micro_batches)
        local_cls, local_options = self.local_cls, self.local_options
        G, me = ctx.world_size, ctx.rank
        sizes = local_cls.table_param_bytes(self.tables, local_options)
        self.owned = place_tables(costs if costs is not None else [1.0] * len(self.tables), G, placement,
                                  sizes, capacity_bytes, self.seed, [t.name for t in self.tables])
        ngroups = pipeline_groups if pipeline == "table" else 1
        # every rank's groups (global table indices), in the order they run: all ranks know all of them
        self.groups = [group_tables(o, ngroups, skew, reorder) for o in self.owned]
        dims, col0 = [t.dim for t in self.tables], column_offsets(self.tables)

        def columns(tables):
            return torch.tensor([c for i in tables for c in range(col0[i], col0[i] + dims[i])], dtype=torch.int64,
                                device=ctx.device)

        self._widths = [[sum(dims[i] for i in g[s]) for g in self.groups] for s in range(ngroups)]
        self._columns = [[columns(g[s]) for g in self.groups] for s in range(ngroups)]
        if pipeline == "batch" and local_cls.supports_external_update:
            # several backward passes per step: updates wait for all of them (the same numbers); a system that
            # updates inside backward updates once per micro-batch
            local_options = local_cls.external_update_options(local_options)
        self.local = torch.nn.ModuleList()
        self._local_pos: list[list[int]] = []  # per stage group: positions in this rank's received table order
        self._parts: list[list[int]] = []  # per stage group: its local modules (one per table under the table pipeline)
        per_table = pipeline == "table"
        for grp in self.groups[me]:
            units = [[i] for i in grp] if per_table else ([grp] if grp else [])
            self._parts.append([])
            for unit in units:
                specs = [self.tables[i] for i in unit]
                self._parts[-1].append(len(self.local))
                names = [t.name for t in specs]
                self.local.append(self.build_local(specs, **local_cls.options_for_tables(local_options, names)))
            self._local_pos.append([self.owned[me].index(i) for i in grp])
        self._local_tables = [[i] for grp in self.groups[me] for i in grp] if per_table else [g for g in self.groups[me] if g]
        self.backward_groups: list[list[list[int]]] | None = None
        self._backward: list[BackwardGroup] | None = None
        if per_table:
            self.backward_groups = [backward_group_tables(o, ngroups, skew, reorder) for o in self.owned]
            where = {i: (s, k) for s, grp in enumerate(self.groups[me]) for k, i in enumerate(grp)}
            self._backward = [
                BackwardGroup([where[i] for i in self.backward_groups[me][b]],
                              [sum(dims[i] for i in bg[b]) for bg in self.backward_groups],
                              [columns(bg[b]) for bg in self.backward_groups], 0)
                for b in range(ngroups)
            ]
        self._earlier: list[WorkReport] = []  # batch pipeline: forward counters of the earlier micro-batches
        self._calls = 0

    # --- where tables live -------------------------------------------------------------------------
    def placement(self) -> dict[str, list]:
        """Table names per rank, and per rank its pipeline groups in running order (for records)."""
        names = [t.name for t in self.tables]
        out = {"owned": [[names[i] for i in o] for o in self.owned],
               "groups": [[[names[i] for i in g] for g in gs] for gs in self.groups]}
        if self.backward_groups is not None:
            out["backward_groups"] = [[[names[i] for i in g] for g in gs] for gs in self.backward_groups]
        return out

    def owner_of(self, table: str) -> int:
        i = self.table_index(table)
        return next(r for r, o in enumerate(self.owned) if i in o)

    def _local_of(self, table: str) -> EmbeddingCollection:
        i = self.table_index(table)
        for tables, coll in zip(self._local_tables, self.local):
            if i in tables:
                return coll
        raise KeyError(f"table {table!r} lives on rank {self.owner_of(table)}, not on rank {self.ctx.rank}")

    # --- the step ------------------------------------------------------------------------------------
    def _stages(self, features: SparseFeatures) -> list[Stage]:
        me = self.ctx.rank
        B = features.batch_size
        if self.pipeline == "batch":
            if B < self.micro_batches:
                raise ValueError(f"local batch {B} is smaller than pipeline_micro_batches={self.micro_batches}")
            parts, starts = features.split_batch(self.micro_batches), []
            acc = 0
            for p in parts:
                starts.append(acc)
                acc += p.batch_size
            routed = [exchange_ids(self.comm, p, self.owned, "emb.ids") for p in parts]
            plan = [(r, 0, st, p.batch_size) for r, st, p in zip(routed, starts, parts)]
        else:
            r = exchange_ids(self.comm, features, self.owned, "emb.ids")
            plan = [(r, s, 0, B) for s in range(len(self.groups[me]))]
        stages = []
        for routed, s, row_start, rows in plan:
            mods, pos = [self.local[m] for m in self._parts[s]], self._local_pos[s]
            total = routed.features.batch_size

            def compute(mods=mods, pos=pos, f=routed.features, total=total) -> list[Tensor]:
                if not mods:
                    return [torch.zeros(total, 0, device=self.ctx.device)]
                if self.pipeline == "batch" and self._calls:  # the previous micro-batch's forward counters
                    self._earlier.append(mods[0].work_report())
                self._calls += 1
                if len(mods) == 1 and len(pos) > 1:  # one module for the stage's tables
                    return [mods[0](f.select_tables(pos))]
                return [m(f.select_tables([p])) for m, p in zip(mods, pos)]

            stages.append(Stage(compute, routed.batch_sizes, rows, row_start, self._widths[s], self._columns[s]))
        return stages

    def forward(self, features: SparseFeatures) -> Tensor:
        features = self.checked(features)
        self.mark_step()
        self._earlier, self._calls = [], 0
        return run_stages(self.comm, self._stages(features), features.batch_size, self.output_dim, self.overlap,
                          backward_groups=self._backward)

    def optimizer_step(self) -> None:
        for coll in self.local:
            if coll is not None:
                coll.optimizer_step()

    def materialize(self, table: str) -> Tensor:
        return self._local_of(table).materialize(table)

    def gather_table(self, table: str) -> Tensor:
        """The table on every rank, from its owner (a collective: every rank calls it)."""
        mine = [Block(0, 1, 0, self.materialize(table))] if self.owner_of(table) == self.ctx.rank else []
        return assemble_table(self.comm, self.tables[self.table_index(table)], mine)

    def table_parameters(self, table: str) -> list[Tensor]:
        return self._local_of(table).table_parameters(table)

    def materialize_from(self, table: str, params: Sequence[Tensor]) -> Tensor:
        return self._local_of(table).materialize_from(table, params)

    def memory_report(self) -> MemoryReport:
        return merge_memory([c.memory_report() for c in self.local if c is not None])

    def work_report(self) -> WorkReport:
        reports = [c.work_report() for c in self.local if c is not None]
        return merge_work(reports + self._earlier, self.comm, self._comm_mark)

