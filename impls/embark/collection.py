"""EMBark's embedding clusters over gloo / NCCL ranks, from a Plan (shards.py).

- DP tables: replicated, local lookups, one dense wgrad all-reduce per step (impls/sharding/data_parallel.py).
- RB (reduction-based) shards: each source sends every owner the keys of its local batch that the owner's row
  shard holds (key % r; one owner per column group), with per-sample counts; the owner pools partial sums for
  every sample of the global batch and returns each source its rows; the source sums the r partials of each
  column group (and divides by the bag length for mean pooling). Backward: each source returns the gradient
  columns of the group to every owner of it; the owner's lookup backward reduces them per key.
- UB (unique-based) shards: each source deduplicates the keys it sends per owner; the owner deduplicates again
  across sources, looks the unique set up once and returns one vector per (source, unique key); the source
  expands and pools. Backward: the source sums its gradient per unique key and returns U x d'; the owner sums
  over sources and keys.

A shard's storage is a single-device collection over a (rows, d') table: ``storage="dense"`` (dense-torch,
initialized with the rows and columns of the table dense-torch would start from, so the sharded model equals
the single-device one) or ``"tt"`` (an ecorec TT table per shard; no published system has this). Keys travel
as int64 local rows (key // r); payloads are fp32, or fp16 with ``fp16_comm``.

Every exchange goes through Comm: phases embark.keys.header / embark.keys / embark.fwd / embark.bwd, and
emb.dp for the DP all-reduce."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
from torch import Tensor

from impls.api import (EmbeddingCollection, EmbeddingOptim, MemoryReport, SparseFeatures, TableSpec, WorkReport,
                       get_impl, register)
from impls.dense.init import dense_table_init
from impls.sharding.comm import Comm
from impls.sharding.context import DistContext
from impls.sharding.data_parallel import DataParallelCollection
from impls.sharding.reports import merge_memory, merge_work
from impls.embark import hier
from impls.embark.shards import Plan, Shard, shard_rows

STORAGES = {"dense": "dense-torch", "tt": "ecorec"}


@dataclass
class _Send:
    """What a source sends one owner for one shard, and what it keeps to use the answer."""

    shard: Shard
    counts: Tensor  # RB: keys per local sample [b]; UB: [number of unique keys]
    keys: Tensor  # local rows
    sample: Tensor  # RB: unused; UB: the sample of each occurrence
    inverse: Tensor | None = None  # UB: occurrence -> index into keys


@dataclass
class _Step:
    sends: list[list[_Send]] = field(default_factory=list)  # per owner, in the owner's shard order
    outs: list[tuple[Tensor, Any]] = field(default_factory=list)  # owner: (output with graph, backward plan)
    lengths: dict[int, Tensor] = field(default_factory=dict)  # mean tables: bag lengths [b]
    batch: int = 0


@register
class EmbarkCollection(EmbeddingCollection):
    """Registered as ``embark``: distributed only (``dlrmbench run --impl embark --world-size N``); the plan
    comes from ``build_distributed`` (planner.py) unless one is given."""

    name = "embark"
    supports_dist = True
    distributed_only = True

    def __init__(self, tables: Sequence[TableSpec], optim: EmbeddingOptim, dist: DistContext | None = None, *,
                 plan: Plan | None = None, comm: Comm | None = None, device: str | torch.device = "cpu",
                 check_bounds: bool = True, seed: int = 0, storage: str = "dense",
                 storage_options: dict | None = None, fp16_comm: bool = False) -> None:
        super().__init__(tables, optim, dist, check_bounds=check_bounds, seed=seed)
        if dist is None or plan is None:
            raise ValueError("embark shards tables over ranks: run it with --world-size >= 2 (it needs a plan "
                             "and a process group)")
        if storage not in STORAGES:
            raise ValueError(f"storage must be one of {sorted(STORAGES)}, got {storage!r}")
        if plan.world_size != dist.world_size:
            raise ValueError(f"the plan is for {plan.world_size} ranks, this run has {dist.world_size}")
        self.plan = plan.validate(self.tables)
        self.comm = comm or Comm(dist)
        self.device = torch.device(device)
        self.payload_dtype = torch.float16 if fp16_comm else torch.float32
        me = dist.rank
        dims = [t.dim for t in self.tables]
        self.col0 = [sum(dims[:i]) for i in range(len(dims))]
        # every rank's shards in one canonical order (plan order), so both ends agree on the layout
        self.by_gpu: list[list[Shard]] = [plan.gpu_shards(g) for g in range(plan.world_size)]
        self.cluster = {p.table: p.cluster for p in plan.mp}
        store_cls = get_impl(STORAGES[storage])
        self.storage = torch.nn.ModuleList()
        for s in self.by_gpu[me]:
            spec = self.tables[s.table]
            width = spec.dim // s.cols
            sub = TableSpec(f"{spec.name}#r{s.row}of{s.rows}c{s.col}of{s.cols}",
                            max(1, shard_rows(spec.num_embeddings, s.rows, s.row)), width)
            coll = store_cls([sub], optim, None, device=device, check_bounds=False, seed=seed,
                             **(storage_options or {}))
            if storage == "dense" and sub.num_embeddings == shard_rows(spec.num_embeddings, s.rows, s.row):
                # the rows and columns of the table the single-device model starts from, generated directly
                dense_table_init(spec, seed, coll.weights[0].data, rows=slice(s.row, None, s.rows),
                                 cols=slice(s.col * width, (s.col + 1) * width))
            self.storage.append(coll)
        # hierarchical RB: every GPU of a node holds the same (table, column) sequence of RB row shards
        self.hier = plan.hierarchical and any(p.cluster == "rb" for p in plan.mp)
        L = dist.local_world_size
        if self.hier and L != plan.gpus_per_node:
            raise ValueError(f"the plan has {plan.gpus_per_node} GPUs per node, the run {L}")
        self.layout = []
        for n in range(dist.num_nodes if self.hier else 0):
            seqs = [[(x.table, x.col, self.tables[x.table].dim // x.cols) for x in self.by_gpu[g]
                     if self.cluster[x.table] == "rb"] for g in range(n * L, (n + 1) * L)]
            if any(q != seqs[0] for q in seqs):
                raise ValueError(f"hierarchical RB needs every GPU of node {n} to hold row shards of the same "
                                 f"tables and columns; they hold {seqs}")
            self.layout.append(seqs[0])
        self.dp_tables = list(plan.dp)
        self.dp = None
        if self.dp_tables:
            self.dp = DataParallelCollection([self.tables[i] for i in self.dp_tables], optim, dist,
                                             local_cls=get_impl("dense-torch"), comm=self.comm, device=device,
                                             check_bounds=False, seed=seed)
        self._mark: dict = {}
        self.plan_info: dict = {"strategy": "given", "hierarchical": plan.hierarchical}

    @classmethod
    def build_distributed(cls, tables, optim, ctx, comm, *, stats=None, strategy: str = "embark",
                          hw: str = "cpu-gloo", column_wise: bool = False, **options: Any) -> "EmbarkCollection":
        """Plan the tables for this world (the global batch from the sampled batch's size) and build."""
        from impls.embark.cost import HARDWARE, CostModel, evaluate
        from impls.embark.planner import make_plan

        if hw not in HARDWARE:
            raise ValueError(f"unknown hardware profile {hw!r}; known: {', '.join(HARDWARE)}")
        batch = comm.broadcast_object(stats.batch_size if stats is not None else None)
        if not batch:
            raise ValueError("embark's planner needs the sampled global batch on rank 0")
        model = CostModel(HARDWARE[hw], ctx.world_size, ctx.local_world_size, batch,
                          optimizer_bytes=8 if optim.kind == "adagrad" else 4,
                          elem_bytes=2 if options.get("fp16_comm") else 4, storage=options.get("storage", "dense"),
                          tt_ranks=int((options.get("storage_options") or {}).get("ranks", 32)))
        plan, secs = make_plan(tables, model, strategy, column_wise=column_wise)
        coll = cls(tables, optim, ctx, plan=plan, comm=comm, **options)
        ev = evaluate(plan, tables, model)
        coll.plan_info = {"strategy": strategy, "hw": hw, "hierarchical": plan.hierarchical, "dp": len(plan.dp),
                          "ub": sum(p.cluster == "ub" for p in plan.mp), "rb": sum(p.cluster == "rb" for p in plan.mp),
                          "shards": len(plan.shards()), "planning_s": secs, "predicted_step_ms": ev.step_s * 1e3,
                          "max_cost": ev.max_cost, "oom_predicted": ev.oom}
        return coll

    # --- the key exchange -------------------------------------------------------------------------
    def _route(self, features: SparseFeatures) -> _Step:
        b = features.batch_size
        st = _Step(batch=b)
        per_table = {}
        for p in self.plan.mp:
            vals, offs = features.table(p.table)
            lengths = offs.diff()
            per_table[p.table] = (vals, torch.repeat_interleave(torch.arange(b, device=vals.device), lengths))
            if self.tables[p.table].pooling == "mean":
                st.lengths[p.table] = lengths.clamp(min=1).to(torch.float32).unsqueeze(1)
        for g, shards in enumerate(self.by_gpu):
            out = []
            for s in shards:
                vals, sample = per_table[s.table]
                mine = vals % s.rows == s.row
                keys, smp = vals[mine] // s.rows, sample[mine]
                if self.cluster[s.table] == "rb":
                    out.append(_Send(s, torch.bincount(smp, minlength=b), keys, smp))
                else:
                    uniq, inv = torch.unique(keys, sorted=True, return_inverse=True)
                    out.append(_Send(s, torch.tensor([uniq.numel()], device=vals.device), uniq, smp, inv))
            st.sends.append(out)
        return st

    def _exchange_keys(self, st: _Step) -> list[tuple[int, Tensor]]:
        """Per source: (its batch size, its int64 payload: counts of every shard, then keys of every shard)."""
        G = self.dist.world_size
        dev = self.dist.device
        payload = [torch.cat([x.counts for x in sends] + [x.keys for x in sends]) if sends
                   else torch.zeros(0, dtype=torch.int64, device=dev) for sends in st.sends]
        header = torch.tensor([[st.batch, p.numel()] for p in payload], dtype=torch.int64, device=dev).reshape(-1)
        got = torch.empty_like(header)
        self.comm.all_to_all(got, header, [2] * G, [2] * G, "embark.keys.header")
        got = got.view(G, 2).tolist()
        recv = torch.empty(sum(n for _, n in got), dtype=torch.int64, device=dev)
        self.comm.all_to_all(recv, torch.cat(payload), [n for _, n in got], [p.numel() for p in payload],
                             "embark.keys")
        return [(bs, blk) for (bs, _), blk in zip(got, torch.split(recv, [n for _, n in got]))]

    # --- owner side ---------------------------------------------------------------------------------
    def _owner_forward(self, received: list[tuple[int, Tensor]], grad_enabled: bool) -> list[list[Tensor]]:
        """Look up this rank's shards for every source; per source the blocks to send back, shard by shard."""
        mine = self.by_gpu[self.dist.rank]
        G = len(received)
        # parse: counts of every shard, then the keys of every shard
        parsed = []  # per source: list of (counts, keys) per shard
        for bs, blk in received:
            ncount = [bs if self.cluster[s.table] == "rb" else 1 for s in mine]
            counts = list(torch.split(blk[: sum(ncount)], ncount))
            nkeys = [int(c.sum()) if self.cluster[s.table] == "rb" else int(c[0]) for s, c in zip(mine, counts)]
            keys = list(torch.split(blk[sum(ncount):], nkeys))
            parsed.append((bs, counts, keys))
        back: list[list[Tensor]] = [[] for _ in range(G)]
        outs = []
        for i, (s, coll) in enumerate(zip(mine, self.storage)):
            with torch.set_grad_enabled(grad_enabled):
                if self.cluster[s.table] == "rb":  # partial sums for every sample of the global batch
                    lengths = torch.cat([p[1][i] for p in parsed])
                    values = torch.cat([p[2][i] for p in parsed])
                    offsets = torch.zeros(lengths.numel() + 1, dtype=torch.int64, device=values.device)
                    torch.cumsum(lengths, 0, out=offsets[1:])
                    y = coll(SparseFeatures(values, offsets, lengths.numel()))
                    rows = [p[0] for p in parsed]
                    if self.hier:  # they travel through the node (hier.py), not the flat exchange
                        outs.append((y, ("rbh", rows)))
                        continue
                    for src, blk in enumerate(torch.split(y.detach(), rows)):
                        back[src].append(blk.reshape(-1))
                    outs.append((y, ("rb", rows)))
                else:  # unique across sources, one lookup, one vector per (source, unique key)
                    keys = [p[2][i] for p in parsed]
                    uniq, inv = torch.unique(torch.cat(keys), sorted=True, return_inverse=True)
                    y = coll(SparseFeatures(uniq, torch.arange(uniq.numel() + 1, device=uniq.device), uniq.numel())) \
                        if uniq.numel() else torch.zeros(0, self.tables[s.table].dim // s.cols, device=uniq.device)
                    per_src = list(torch.split(inv, [k.numel() for k in keys]))
                    for src, idx in enumerate(per_src):
                        back[src].append(y.detach()[idx].reshape(-1))
                    outs.append((y, ("ub", per_src)))
        self._owner_outs = outs
        return back

    # --- the step -----------------------------------------------------------------------------------
    def _mp_forward(self, features: SparseFeatures, grad_enabled: bool) -> Tensor:
        G, b = self.dist.world_size, features.batch_size
        st = self._route(features)
        received = self._exchange_keys(st)
        self._sources = [bs for bs, _ in received]  # every source's batch size
        back = self._owner_forward(received, grad_enabled)
        send = [torch.cat(x).to(self.payload_dtype) if x else torch.zeros(0, dtype=self.payload_dtype,
                                                                            device=self.dist.device) for x in back]
        sizes = [self._answer_size(st, g) for g in range(G)]
        recv = torch.empty(sum(sizes), dtype=self.payload_dtype, device=self.dist.device)
        self.comm.all_to_all(recv, torch.cat(send), sizes, [x.numel() for x in send], "embark.fwd")
        out = torch.zeros(b, self.output_dim, device=self.dist.device)
        for g, blk in enumerate(torch.split(recv.to(torch.float32), sizes)):
            pos = 0
            for x in st.sends[g]:
                s, d = x.shard, self.tables[x.shard.table].dim // x.shard.cols
                lo = self.col0[s.table] + s.col * d
                if self.cluster[s.table] == "rb" and self.hier:
                    continue
                if self.cluster[s.table] == "rb":
                    out[:, lo : lo + d] += blk[pos : pos + b * d].view(b, d)
                    pos += b * d
                else:
                    u = x.keys.numel()
                    vec = blk[pos : pos + u * d].view(u, d)
                    out[:, lo : lo + d].index_add_(0, x.sample, vec[x.inverse])
                    pos += u * d
        if self.hier:
            mine = [y.detach() for y, (kind, _) in self._owner_outs if kind == "rbh"]
            rows = self._sources
            partial = torch.cat(mine, 1) if mine else torch.zeros(sum(rows), 0)
            widths = [sum(d for _, _, d in lay) for lay in self.layout]
            for lay, part in zip(self.layout, hier.forward(self.comm, partial, rows, widths, self.payload_dtype)):
                pos = 0
                for t, k, d in lay:
                    lo = self.col0[t] + k * d
                    out[:, lo : lo + d] += part[:, pos : pos + d]
                    pos += d
        for t, ln in st.lengths.items():
            lo = self.col0[t]
            out[:, lo : lo + self.tables[t].dim] /= ln
        self._step = st
        return out

    def _answer_size(self, st: _Step, g: int) -> int:
        n = 0
        for x in st.sends[g]:
            d = self.tables[x.shard.table].dim // x.shard.cols
            if self.cluster[x.shard.table] == "rb" and self.hier:
                continue
            n += (st.batch if self.cluster[x.shard.table] == "rb" else x.keys.numel()) * d
        return n

    def _mp_backward(self, grad: Tensor) -> None:
        st, G = self._step, self.dist.world_size
        grad = grad.clone()
        for t, ln in st.lengths.items():
            lo = self.col0[t]
            grad[:, lo : lo + self.tables[t].dim] /= ln
        send = []
        for g in range(G):
            parts = []
            for x in st.sends[g]:
                s, d = x.shard, self.tables[x.shard.table].dim // x.shard.cols
                lo = self.col0[s.table] + s.col * d
                cols = grad[:, lo : lo + d]
                if self.cluster[s.table] == "rb" and self.hier:
                    continue
                if self.cluster[s.table] == "rb":
                    parts.append(cols.reshape(-1))
                else:  # the source's gradient per unique key
                    gu = torch.zeros(x.keys.numel(), d, device=grad.device).index_add_(0, x.inverse, cols[x.sample])
                    parts.append(gu.reshape(-1))
            send.append(torch.cat(parts).to(self.payload_dtype) if parts
                        else torch.zeros(0, dtype=self.payload_dtype, device=grad.device))
        my = self._owner_outs  # what this rank sent each source in forward, shard by shard, comes back

        def rows(kind, info, src):  # RB: the source's samples; UB: its unique keys; hierarchical RB: not here
            return info[src] if kind == "rb" else 0 if kind == "rbh" else info[src].numel()

        recv_sizes = [sum(rows(kind, info, src) * y.shape[1] for y, (kind, info) in my) for src in range(G)]
        recv = torch.empty(sum(recv_sizes), dtype=self.payload_dtype, device=grad.device)
        self.comm.all_to_all(recv, torch.cat(send), recv_sizes, [x.numel() for x in send], "embark.bwd")
        tensors, grads = [], []
        blocks: list[list[Tensor]] = [[] for _ in my]
        for src, blk in enumerate(torch.split(recv.to(torch.float32), recv_sizes)):
            pos = 0
            for i, (y, (kind, info)) in enumerate(my):
                n = rows(kind, info, src) * y.shape[1]
                blocks[i].append(blk[pos : pos + n].view(-1, y.shape[1]))
                pos += n
        if self.hier:  # the node path's gradient of this GPU's partial sums, split over its RB shards
            per_node = [torch.cat([grad[:, self.col0[t] + k * d : self.col0[t] + (k + 1) * d] for t, k, d in lay], 1)
                        if lay else grad[:, :0] for lay in self.layout]
            width = sum(y.shape[1] for y, (kind, _) in my if kind == "rbh")
            g_mine = hier.backward(self.comm, per_node, self._sources, width, self.payload_dtype)
            pos = 0
            for i, (y, (kind, _)) in enumerate(my):
                if kind == "rbh":
                    blocks[i] = [g_mine[:, pos : pos + y.shape[1]]]
                    pos += y.shape[1]
        for (y, (kind, info)), parts in zip(my, blocks):
            if not y.requires_grad:
                continue
            if kind in ("rb", "rbh"):
                g = torch.cat(parts)
            else:
                g = torch.zeros_like(y)
                for idx, part in zip(info, parts):
                    g.index_add_(0, idx, part)
            tensors.append(y)
            grads.append(g)
        if tensors:
            torch.autograd.backward(tensors, grads)
        self._owner_outs = []

    def forward(self, features: SparseFeatures) -> Tensor:
        features = self.checked(features)
        self._mark = dict(self.comm.sent)
        outs = []
        if self.plan.mp:
            if torch.is_grad_enabled():
                outs.append(_EmbarkFn.apply(self, features, torch.zeros(0, requires_grad=True)))
            else:
                outs.append(self._mp_forward(features, False))
        if self.dp is not None:
            dp_out = self.dp(features.select_tables(self.dp_tables))
            if not outs:
                return self._place_dp(torch.zeros(features.batch_size, self.output_dim, device=dp_out.device), dp_out)
            return self._place_dp(outs[0], dp_out)
        return outs[0]

    def _place_dp(self, mp_out: Tensor, dp_out: Tensor) -> Tensor:
        """The MP output with the DP tables' columns taken from ``dp_out`` (differentiably)."""
        cols = torch.cat([torch.arange(self.col0[t], self.col0[t] + self.tables[t].dim, device=mp_out.device)
                          for t in self.dp_tables])
        return mp_out.index_copy(1, cols, dp_out)

    def optimizer_step(self) -> None:
        if self.dp is not None:
            self.dp.optimizer_step()
        for coll in self.storage:
            coll.optimizer_step()

    # --- oracles and reports --------------------------------------------------------------------------
    def gather_table(self, table: str) -> Tensor:
        """The whole table assembled from every rank's shards (a collective: every rank calls it)."""
        import torch.distributed as dist

        t = self.table_index(table)
        if t in self.dp_tables:
            return self.dp.materialize(table)
        spec = self.tables[t]
        mine = [(s.row, s.rows, s.col, s.cols, coll.materialize(coll.tables[0].name).detach().cpu())
                for s, coll in zip(self.by_gpu[self.dist.rank], self.storage) if s.table == t]
        parts = [None] * self.dist.world_size
        dist.all_gather_object(parts, mine)
        full = torch.empty(spec.num_embeddings, spec.dim)
        for j, r, k, c, w in (x for p in parts for x in p):
            d = spec.dim // c
            n = shard_rows(spec.num_embeddings, r, j)
            full[j::r, k * d : (k + 1) * d] = w[:n]
        return full

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
        reports = [c.work_report() for c in self.storage]
        return merge_work(reports, self.comm, self._mark)


class _EmbarkFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, coll: EmbarkCollection, features: SparseFeatures, anchor: Tensor) -> Tensor:
        ctx.coll = coll
        return coll._mp_forward(features, True)

    @staticmethod
    def backward(ctx, grad: Tensor):
        ctx.coll._mp_backward(grad.contiguous())
        ctx.coll = None
        return None, None, None
