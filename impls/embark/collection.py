"""EMBark's embedding clusters over gloo / NCCL ranks, from a Plan (shards.py): the step.

- DP tables: replicated, local lookups, one dense wgrad all-reduce per step (impls/sharding/data_parallel.py).
- RB (reduction-based) shards: each source sends every owner the keys of its local batch that the owner's row
  shards hold (key % r; one owner per column group), with per-sample counts; the owner pools partial sums for
  every sample of the global batch and returns each source its rows; the source sums the r partials of each
  column group (and divides by the bag length for mean pooling). Backward: each source returns the gradient
  columns of the group to every owner of it; the owner's lookup backward reduces them per key. Hierarchical:
  the partial sums travel through the node first (hier.py).
- UB (unique-based) shards: each source deduplicates the keys it sends per owner; the owner deduplicates again
  across sources, looks the unique set up once and returns one vector per (source, unique key); the source
  expands and pools. Backward: the source sums its gradient per unique key and returns U x d'; the owner sums
  over sources and keys.

Routing (routing.py) and the owners' fused lookups, one per cluster per rank (engines.py), are tensor passes;
the step loops over ranks only to cut one buffer into per-rank blocks. Keys travel as int64 local rows
(key // r); payloads are fp32, or fp16 with ``fp16_comm``. Phases: embark.keys.header / embark.keys /
embark.fwd / embark.bwd (hierarchical: embark.fwd.intra / .rail, embark.bwd.rail / .intra), emb.dp."""
from __future__ import annotations

from typing import Any, ClassVar, Sequence

import torch
from torch import Tensor

from impls.api import (EmbeddingOptim, MemoryReport, ShardedCollection, SparseFeatures, TableSpec, WorkReport,
                       column_offsets, get_impl, register)
from impls.core import ops
from impls.core.pooling import bag_lengths
from impls.core.tt import DEFAULT_RANK
from impls.embark.planning import COSTS
from impls.embark import hier
from impls.embark.columns import Columns
from impls.embark.engines import STORAGES, RBEngine, UBEngine, build_store, default_storage, shard_spec
from impls.embark.routing import Routed, ShardLayout, route
from impls.embark.shards import Cluster, Plan, shard_rows
from impls.sharding.comm import Comm
from impls.sharding.context import DistContext
from impls.sharding.data_parallel import DataParallelCollection
from impls.sharding.gather import Block, assemble_table
from impls.sharding.reports import merge_memory, merge_work




def on_rank0(comm: Comm, rank: int, fn):
    """``fn()`` on rank 0, its result on every rank; a ValueError it raises is raised on every rank (none waits)."""
    out = None
    if rank == 0:
        try:
            out = (True, fn())
        except ValueError as exc:
            out = (False, exc)
    ok, value = comm.broadcast_object(out)
    if not ok:
        raise value
    return value


@register
class EmbarkCollection(ShardedCollection):
    """Registered as ``embark``: distributed only (``dlrmbench run --impl embark --world-size N``); the plan
    comes from ``build_distributed`` (planner.py) unless one is given."""
    option_keys: ClassVar[frozenset[str]] = frozenset({"fp16_comm", "storage", "storage_options"})
    dist_option_keys: ClassVar[frozenset[str]] = frozenset({"calibration", "column_wise", "cost", "hw", "mem_cap_gib",
                                                           "rho", "strategy"})

    name = "embark"
    # check-system: the planner on HugeCTR's cost model (the calibrated one, its default, needs a calibration profile)
    check_options: ClassVar[dict[str, Any]] = {"cost": "hugectr"}

    def __init__(self, tables: Sequence[TableSpec], optim: EmbeddingOptim, ctx: DistContext | None = None, *,
                 plan: Plan | None = None, comm: Comm | None = None, device: str | torch.device = "cpu",
                 check_bounds: bool = True, seed: int = 0, storage: str | None = None,
                 storage_options: dict | None = None, fp16_comm: bool = False) -> None:
        super().__init__(tables, optim, ctx, check_bounds=check_bounds, seed=seed)
        if ctx is None or plan is None:
            raise ValueError("embark shards tables over ranks: run it with --world-size >= 2 (it needs a plan "
                             "and a process group)")
        storage = storage or default_storage()
        if storage not in STORAGES:
            raise ValueError(f"storage must be one of {sorted(STORAGES)}, got {storage!r}")
        if plan.world_size != ctx.world_size:
            raise ValueError(f"the plan is for {plan.world_size} ranks, this run has {ctx.world_size}")
        self.plan = plan.validate(self.tables)
        self.comm = comm or Comm(ctx)
        self.device = torch.device(device)
        self.payload_dtype = torch.float16 if fp16_comm else torch.float32
        me = ctx.rank
        self.col0 = column_offsets(self.tables)
        self.layout = ShardLayout(plan, self.tables, self.device)
        self.cluster = self.layout.cluster
        rb, ub = self.layout.rb[me], self.layout.ub[me]
        rb_store = build_store(self.tables, rb, optim, storage, device, seed, storage_options)
        self.rb = RBEngine(rb_store, len(rb), self.layout.rb_width[me]) if rb else None
        self.ub = UBEngine(self.tables, ub, optim, storage, device, seed, storage_options, me) if ub else None
        self.storage = torch.nn.ModuleList(([rb_store] if rb else []) + (list(self.ub.stores) if ub else []))
        # hierarchical RB: every GPU of a node holds the same (table, column) sequence of RB row shards
        self.hier = plan.hierarchical and any(p.cluster is Cluster.RB for p in plan.mp)
        L = ctx.local_world_size
        if self.hier and L != plan.gpus_per_node:
            raise ValueError(f"the plan has {plan.gpus_per_node} GPUs per node, the run {L}")
        self.node_cols = []  # hierarchical: the output columns of node n's RB partial sums
        for n in range(ctx.num_nodes if self.hier else 0):
            seqs = [[(x.table, x.col, self.tables[x.table].dim // x.cols) for x in self.layout.rb[g]]
                    for g in range(n * L, (n + 1) * L)]
            if any(q != seqs[0] for q in seqs):
                raise ValueError(f"hierarchical RB needs every GPU of node {n} to hold row shards of the same "
                                 f"tables and columns; they hold {seqs}")
            self.node_cols.append(self.layout.rb_out[n * L])
        self.dp_tables = list(plan.dp)
        self.dp_cols = None  # the DP tables' output columns, in plan.dp order
        if self.dp_tables:
            self.dp_cols = Columns(torch.cat([torch.arange(self.col0[t], self.col0[t] + self.tables[t].dim)
                                              for t in self.dp_tables]).to(self.device), self.output_dim,
                                   self.layout.unit)
        self.dp = None
        if self.dp_tables:
            self.dp = DataParallelCollection([self.tables[i] for i in self.dp_tables], optim, ctx,
                                             local_cls=get_impl("dense-torch"), comm=self.comm, device=device,
                                             check_bounds=False, seed=seed)
        self._mark: dict = {}
        self._plan_info: dict = {"strategy": "given", "hierarchical": plan.hierarchical}

    @classmethod
    def build_distributed(cls, tables, optim, ctx, comm, *, stats=None, strategy: str = "embark",
                          cost: str = "calibrated", calibration: str | None = None, hw: str = "cpu-gloo",
                          column_wise: bool = False, rho: float | None = None, mem_cap_gib: float | None = None,
                          **options: Any) -> "EmbarkCollection":
        """Plan the tables for this world (the global batch from the sampled batch's size) and build.

        ``cost``: ``calibrated`` (default: the planner's search over every candidate plan, scored by ``calibration``:
        the profile `dlrmbench calibrate` measured on this machine, results/calibration/<machine>/<backend>.json,
        which the harness names for every run; search.py) or ``hugectr`` (HugeCTR's greedy on its own cost function,
        with the hardware spec ``hw``: cost.HARDWARE).
        ``rho``: HugeCTR's memory / network bandwidth ratio (default the hardware spec's), ``mem_cap_gib``: GiB per
        GPU for embeddings (default the profile's). A simple strategy (round_robin, ...) is built as it is; given a
        calibration, its record also carries the calibrated prediction."""
        from impls.embark.calibrated import table_loads
        from impls.embark.cost import evaluate
        from impls.embark.planning import cost_model, plan_for, search_for
        from impls.embark.search import notes_for

        if cost not in COSTS:
            raise ValueError(f"unknown cost {cost!r}; choose one of {', '.join(COSTS)}")
        if cost == "calibrated" and strategy == "embark" and calibration is None:
            raise ValueError("embark's planner plans on this machine's calibrated cost (cost=calibrated, the default) "
                             "and was given no calibration profile: run `dlrmbench calibrate` on this machine (the "
                             "harness then names results/calibration/<machine>/<backend>.json for every run), pass "
                             "one (-o embark.calibration=FILE), or plan on HugeCTR's cost function "
                             "(-o embark.cost=hugectr)")
        storage = options["storage"] = options.get("storage") or default_storage()
        batch = comm.broadcast_object(stats.batch_size if stats is not None else None)
        if not batch:
            raise ValueError("embark's planner needs the sampled global batch on rank 0")
        model = cost_model(hw, ctx.world_size, ctx.local_world_size, batch, adagrad=optim.kind == "adagrad",
                           fp16=bool(options.get("fp16_comm")), storage=storage,
                           tt_ranks=int((options.get("storage_options") or {}).get("ranks", DEFAULT_RANK)),
                           rho=rho, mem_cap_gib=mem_cap_gib)
        search = None
        if calibration is not None:  # rank 0 reads the sample and plans; every rank takes its plan
            loads = on_rank0(comm, ctx.rank, lambda: table_loads(tables, batch, ctx.world_size, stats))
            search = search_for(tables, model, calibration, storage, loads)
        if cost == "calibrated" and strategy == "embark":
            plan, secs = on_rank0(comm, ctx.rank, lambda: plan_for(tables, model, strategy, cost, search=search))
        else:
            plan, secs = plan_for(tables, model, strategy, "hugectr", column_wise=column_wise)
        coll = cls(tables, optim, ctx, plan=plan, comm=comm, **options)
        ev = evaluate(plan, tables, model)
        coll._plan_info = {"strategy": strategy, "cost": cost, "storage": storage, "hw": hw,
                           "hierarchical": plan.hierarchical, "dp": len(plan.dp),
                           "ub": sum(p.cluster == "ub" for p in plan.mp), "rb": sum(p.cluster == "rb" for p in plan.mp),
                           "shards": len(plan.shards()), "planning_s": secs,
                           "hugectr_predicted_step_ms": ev.step_s * 1e3, "max_cost": ev.max_cost,
                           "oom_predicted": ev.oom}
        if search is not None:
            coll._plan_info.update(plan.notes if plan.notes.get("cost") == "calibrated" else notes_for(plan, search))
        predicted = (coll._plan_info.get("predicted") or {}).get("total_ms")
        coll._plan_info["predicted_by"] = "calibrated" if predicted is not None else "hugectr"
        coll._plan_info["predicted_step_ms"] = predicted if predicted is not None else ev.step_s * 1e3
        return coll

    # --- the step -----------------------------------------------------------------------------------
    def _exchange_keys(self, st: Routed) -> tuple[list[int], list[int], Tensor]:
        """Every source's batch size and payload length for this rank, and the payloads back to back."""
        G, dev = self.ctx.world_size, self.ctx.device
        header = torch.tensor([[st.batch, p.numel()] for p in st.payload], dtype=torch.int64, device=dev).reshape(-1)
        got = torch.empty_like(header)
        self.comm.all_to_all(got, header, [2] * G, [2] * G, "embark.keys.header")
        got = got.view(G, 2).tolist()
        recv = torch.empty(sum(n for _, n in got), dtype=torch.int64, device=dev)
        self.comm.all_to_all(recv, torch.cat(st.payload), [n for _, n in got], [p.numel() for p in st.payload],
                             "embark.keys")
        return [bs for bs, _ in got], [n for _, n in got], recv

    def _owner_forward(self, sizes: list[int], lengths: list[int], recv: Tensor,
                       grad_enabled: bool) -> list[list[Tensor]]:
        """Both fused lookups for every source; per source the flat pieces to send back (RB block, UB vectors).
        A source's payload is its RB counts [n_rb, b_src] and UB counts [n_ub] (the header), then its RB keys
        shard by shard, then its UB keys: one transpose_segments lays every source's RB keys out shard by shard
        (each shard's keys source by source, as the fused lookup's table-major batch wants them), the UB keys of
        all sources after them, in one copy."""
        me = self.ctx.rank
        n_rb, n_ub = self.layout.n_rb[me], self.layout.n_ub[me]
        rb_counts, ub_counts, seg = [], [], []
        for bs, blk in zip(sizes, torch.split(recv, lengths)):
            c = blk[: n_rb * bs].view(n_rb, bs)
            rb_counts.append(c)
            ub_counts.append(blk[n_rb * bs : n_rb * bs + n_ub])
            seg.append(torch.cat([c.new_tensor([n_rb * bs + n_ub]), c.sum(1)]))
        seg = torch.stack(seg)  # [G, 1 + n_rb]: header, then the RB keys of each shard; the rest is UB keys
        rb_total = seg[:, 1:].sum(1)
        ub_len = torch.tensor(lengths, dtype=torch.int64, device=recv.device) - seg[:, 0] - rb_total
        laid = ops.transpose_segments(recv, torch.cat([seg, ub_len.unsqueeze(1)], 1))
        head, n_keys = int(seg[:, 0].sum()), int(rb_total.sum())
        rb_keys, ub_keys = laid[head : head + n_keys], laid[head + n_keys :]  # the UB keys source by source
        back = [[] for _ in sizes]
        self._partial = None
        if self.rb is not None:
            y = self.rb.forward(torch.cat(rb_counts, 1), rb_keys, grad_enabled)
            if self.hier:
                self._partial = y
            else:
                for src, blk in enumerate(torch.split(y, sizes)):
                    back[src].append(blk.reshape(-1))
        if self.ub is not None:
            for src, blocks in enumerate(self.ub.forward(ub_counts, ub_keys, grad_enabled)):
                back[src] += blocks
        return back

    def _pack(self, pieces: Sequence[Sequence[Tensor]]) -> Tensor:
        """Every destination's flat pieces, destination by destination, in one payload buffer: the pieces
        themselves when they already lie back to back in one buffer (the RB partial sums of every source), else
        one copy."""
        return joined([x.reshape(-1) for dest in pieces for x in dest], self.payload_dtype, self.ctx.device)

    def _mp_forward(self, features: SparseFeatures, grad_enabled: bool) -> Tensor:
        b = features.batch_size
        st = route(self.layout, features, self.hier)
        self._sources, lengths, recv = self._exchange_keys(st)  # every source's batch size, payload length
        back = self._owner_forward(self._sources, lengths, recv, grad_enabled)
        self._recv_sizes = [sum(x.numel() for x in pieces) for pieces in back]
        recv = torch.empty(sum(st.answer_sizes), dtype=self.payload_dtype, device=self.ctx.device)
        self.comm.all_to_all(recv, self._pack(back), st.answer_sizes, self._recv_sizes, "embark.fwd")
        out = torch.zeros(b, self.output_dim, device=self.ctx.device)
        ub_parts = []
        for g, (blk, n_rb) in enumerate(zip(torch.split(recv.to(torch.float32), st.answer_sizes), st.rb_sizes)):
            if n_rb:
                self.layout.rb_out[g].add_into(out, blk[:n_rb].view(b, -1))
            ub_parts.append(blk[n_rb:])
        at = [0] * len(ub_parts)  # each owner's UB answer: its rows width by width
        for grp in st.ub_groups:
            rows = []
            for g, n in enumerate(grp.per_owner):
                rows.append(ub_parts[g][at[g] : at[g] + n * grp.width].view(n, grp.width))
                at[g] += n * grp.width
            pool = torch.zeros(b * (grp.cols.width // grp.width), grp.width, device=out.device)
            ops.scatter_add_rows(torch.cat(rows), grp.occ_unique, grp.occ_row, pool,  # no [occurrences, w] copy
                                 check_indices=False)
            grp.cols.add_into(out, pool.view(b, -1))
        if self.hier:
            partial = self._partial if self._partial is not None else torch.zeros(sum(self._sources), 0)
            widths = [c.width for c in self.node_cols]
            for cols, part in zip(self.node_cols, hier.forward(self.comm, partial, self._sources, widths,
                                                               self.payload_dtype)):
                cols.add_into(out, part)
        self._mean_lengths = {}
        for t, spec in enumerate(self.tables):
            if spec.pooling == "mean" and t in self.cluster:
                ln = bag_lengths(features.table(t)[1])
                self._mean_lengths[t] = ln
                out[:, self.col0[t] : self.col0[t] + spec.dim] /= ln
        self._step = st
        return out

    def _mp_backward(self, grad: Tensor) -> None:
        st = self._step
        if self._mean_lengths:
            grad = grad.clone()
        for t, ln in self._mean_lengths.items():
            grad[:, self.col0[t] : self.col0[t] + self.tables[t].dim] /= ln
        # what each owner gets: the RB gradient columns of its shards, then the gradient per UB unique key
        rb = [grad[:0, 0] if self.hier else cols.take(grad).reshape(-1) for cols in self.layout.rb_out]
        ub: list[list[Tensor]] = [[] for _ in rb]
        for grp in st.ub_groups:
            per_row = grp.cols.take(grad).view(-1, grp.width)
            gu = torch.zeros(sum(grp.per_owner), grp.width, device=grad.device)
            ops.scatter_add_rows(per_row, grp.occ_row, grp.occ_unique, gu, check_indices=False)
            for g, blk in enumerate(torch.split(gu, grp.per_owner)):
                ub[g].append(blk)
        me = self.ctx.rank
        recv_sizes = self._recv_sizes  # what this rank answered each source in forward comes back
        recv = torch.empty(sum(recv_sizes), dtype=self.payload_dtype, device=grad.device)
        self.comm.all_to_all(recv, self._pack([[r, *u] for r, u in zip(rb, ub)]), recv_sizes,
                             [r.numel() + sum(x.numel() for x in u) for r, u in zip(rb, ub)], "embark.bwd")
        rb_grads, ub_grads = [], []
        width = self.layout.rb_width[me] if not self.hier else 0
        for bs, blk in zip(self._sources, torch.split(recv.to(torch.float32), recv_sizes)):
            rb_grads.append(blk[: bs * width].view(bs, width))
            ub_grads.append(blk[bs * width :])
        tensors, grads = [], []
        if self.rb is not None:
            if self.hier:
                per_node = [cols.take(grad) for cols in self.node_cols]
                g = hier.backward(self.comm, per_node, self._sources, self.layout.rb_width[me], self.payload_dtype)
            else:
                g = joined([x.reshape(-1) for x in rb_grads], torch.float32, grad.device).view(-1, width)
            y, g = self.rb.backward(g)
            tensors.append(y)
            grads.append(g)
        elif self.hier:  # this rank holds no RB shard but still takes part in the node exchanges
            per_node = [cols.take(grad) for cols in self.node_cols]
            hier.backward(self.comm, per_node, self._sources, 0, self.payload_dtype)
        if self.ub is not None:
            for y, g in self.ub.backward(ub_grads):
                tensors.append(y)
                grads.append(g)
        keep = [(y, g) for y, g in zip(tensors, grads) if y.requires_grad]
        if keep:
            torch.autograd.backward([y for y, _ in keep], [g for _, g in keep])

    def forward(self, features: SparseFeatures) -> Tensor:
        features = self.checked(features)
        self._mark = dict(self.comm.sent)
        dp_out = self.dp(features.select_tables(self.dp_tables)) if self.dp is not None else None
        if not self.plan.mp:  # every table data-parallel
            cols = self.dp_cols.cols
            return torch.zeros(features.batch_size, self.output_dim, device=dp_out.device).index_copy(1, cols, dp_out)
        if torch.is_grad_enabled():
            anchor = dp_out if dp_out is not None else torch.zeros(0, requires_grad=True)
            return _EmbarkFn.apply(self, features, anchor)
        out = self._mp_forward(features, False)
        if dp_out is not None:
            self.dp_cols.add_into(out, dp_out)
        return out

    def optimizer_step(self) -> None:
        if self.dp is not None:
            self.dp.optimizer_step()
        for coll in self.storage:
            coll.optimizer_step()

    # --- oracles and reports --------------------------------------------------------------------------
    def plan_info(self) -> dict:
        return self._plan_info

    def gather_table(self, table: str) -> Tensor:
        """The whole table assembled from every rank's shards (a collective: every rank calls it)."""
        t = self.table_index(table)
        if t in self.dp_tables:
            return self.dp.materialize(table)
        spec, me = self.tables[t], self.ctx.rank

        def block(s, weight: Tensor) -> Block:  # row shard s.row of s.rows (every s.rows-th row), column slice s.col
            d = spec.dim // s.cols
            return Block(s.row, s.rows, s.col * d, weight[: shard_rows(spec.num_embeddings, s.rows, s.row)])

        mine = [block(s, self.rb.store.materialize(shard_spec(spec, s).name)) for s in self.layout.rb[me] if s.table == t]
        mine += [block(s, self.ub.materialize_shard(i, shard_spec(spec, s).num_embeddings))
                 for i, s in enumerate(self.layout.ub[me]) if s.table == t]
        return assemble_table(self.comm, spec, mine)

    def materialize(self, table: str) -> Tensor:
        t = self.table_index(table)
        if t in self.dp_tables:
            return self.dp.materialize(table)
        raise KeyError(f"table {table!r} is sharded; use gather_table on every rank")

    def memory_report(self) -> MemoryReport:
        reports = [c.memory_report() for c in self.storage]
        if self.dp is not None:
            reports.append(self.dp.memory_report())
        return merge_memory(reports)

    def work_report(self) -> WorkReport:
        """The stores' counters and the DP replica's (its local lookups), and this step's bytes."""
        reports = [c.work_report() for c in self.storage]
        if self.dp is not None:
            reports.append(self.dp.local.work_report())
        return merge_work(reports, self.comm, self._mark)


def joined(flat: Sequence[Tensor], dtype: torch.dtype, device: torch.device) -> Tensor:
    """torch.cat(flat) in ``dtype``, without the copy when the 1-D pieces already lie back to back in one buffer."""
    if not flat:
        return torch.zeros(0, dtype=dtype, device=device)
    first = flat[0]
    adjacent = all(x.dtype == first.dtype and x.is_contiguous() and x.untyped_storage().data_ptr()
                   == first.untyped_storage().data_ptr() for x in flat)
    pos = first.storage_offset()
    for x in flat:
        adjacent = adjacent and x.storage_offset() == pos
        pos += x.numel()
    if adjacent:
        total = pos - first.storage_offset()
        return first.new_empty(0).set_(first.untyped_storage(), first.storage_offset(), (total,), (1,)).to(dtype)
    return torch.cat(list(flat)).to(dtype)


class _EmbarkFn(torch.autograd.Function):
    """The model-parallel step as one autograd node; ``dp_out`` (the DP tables' pooled rows, or an empty anchor)
    lands in the output's DP columns (which no MP shard writes) and gets those columns of the gradient back."""

    @staticmethod
    def forward(ctx, coll: EmbarkCollection, features: SparseFeatures, dp_out: Tensor) -> Tensor:
        ctx.coll = coll
        out = coll._mp_forward(features, True)
        if coll.dp_cols is not None:
            coll.dp_cols.add_into(out, dp_out)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        coll, ctx.coll = ctx.coll, None
        grad = grad.contiguous()
        coll._mp_backward(grad)
        return None, None, coll.dp_cols.take(grad) if coll.dp_cols is not None else None
