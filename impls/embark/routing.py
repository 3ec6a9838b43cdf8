"""EMBark's source side: which owner gets which keys of the local batch, and how the answers land in the output,
as whole-batch tensor passes (no loop over shards or GPUs on the step's path).

Shards are numbered once (``ShardLayout``): owner by owner, each owner's RB shards then its UB shards, each in
plan order. A key of table t (r row shards, c column groups) belongs to row shard key % r, local row key // r,
and goes to the c shards of its column groups. One stable sort by shard number lays the keys out owner by owner,
shard by shard, and within a shard in sample order; per-sample counts of RB shards come from one bincount, and
UB keys are deduplicated per shard by one unique over (shard, key).

What a source sends owner g: the per-sample key counts of g's RB shards ([S_rb(g), b]), the unique-key counts of
its UB shards ([S_ub(g)]), then the keys of its RB shards and of its UB shards. The answer is one [b, W_rb(g)]
block of partial sums (g's RB shards side by side) followed by the unique vectors of its UB shards, shard by
shard, key by key (d' floats each); the backward sends the same layouts back."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from impls.api import SparseFeatures, TableSpec
from impls.embark.shards import Cluster, Plan, Shard


def expand_ranges(starts: Tensor, lengths: Tensor) -> Tensor:
    """cat(arange(s, s + n) for s, n in zip(starts, lengths)), in one pass."""
    total = int(lengths.sum()) if lengths.numel() else 0
    if total == 0:
        return torch.zeros(0, dtype=torch.int64, device=starts.device)
    seg_start = torch.cumsum(lengths, 0) - lengths
    seg = torch.repeat_interleave(torch.arange(lengths.numel(), device=starts.device), lengths, output_size=total)
    return starts[seg] + (torch.arange(total, device=starts.device) - seg_start[seg])


class ShardLayout:
    """The numbering of every model-parallel shard and what both ends of an exchange derive from it."""

    def __init__(self, plan: Plan, tables: Sequence[TableSpec], device: torch.device) -> None:
        G = plan.world_size
        self.world = G
        self.cluster = {p.table: Cluster(p.cluster) for p in plan.mp}
        self.rb: list[list[Shard]] = []
        self.ub: list[list[Shard]] = []
        for g in range(G):
            mine = plan.gpu_shards(g)
            self.rb.append([s for s in mine if self.cluster[s.table] is Cluster.RB])
            self.ub.append([s for s in mine if self.cluster[s.table] is Cluster.UB])
        self.shards = [s for g in range(G) for s in self.rb[g] + self.ub[g]]
        number = {(s.table, s.row, s.col): i for i, s in enumerate(self.shards)}
        dims = [t.dim for t in tables]
        col0 = [sum(dims[:i]) for i in range(len(dims))]
        self.width = torch.tensor([dims[s.table] // s.cols for s in self.shards], dtype=torch.int64)
        self.out_col = torch.tensor([col0[s.table] + s.col * (dims[s.table] // s.cols) for s in self.shards],
                                    dtype=torch.int64)
        self.is_rb = torch.tensor([self.cluster[s.table] is Cluster.RB for s in self.shards], dtype=torch.bool)
        self.owner = torch.tensor([s.gpu for s in self.shards], dtype=torch.int64)
        # per table: r, c and where its (column group, row shard) numbers start in `shard_of`
        T = len(tables)
        self.mp = torch.zeros(T, dtype=torch.bool)
        self.r = torch.ones(T, dtype=torch.int64)
        self.c = torch.ones(T, dtype=torch.int64)
        self.base = torch.zeros(T, dtype=torch.int64)
        shard_of = []
        for p in plan.mp:
            self.mp[p.table], self.r[p.table], self.c[p.table] = True, p.r, p.c
            self.base[p.table] = len(shard_of)
            shard_of += [number[(p.table, j, k)] for k in range(p.c) for j in range(p.r)]
        self.shard_of = torch.tensor(shard_of, dtype=torch.int64)
        self.n_rb = [len(x) for x in self.rb]
        self.n_ub = [len(x) for x in self.ub]
        # RB answer columns: owner g's block [b, W_rb(g)] adds into these output columns
        self.rb_cols = [torch.cat([torch.arange(int(self.out_col[i]), int(self.out_col[i] + self.width[i]))
                                   for i in self._numbers(g, Cluster.RB)] or [torch.zeros(0, dtype=torch.int64)])
                        for g in range(G)]
        self.rb_width = [int(c.numel()) for c in self.rb_cols]
        self.rb_number = torch.full((len(self.shards),), -1, dtype=torch.int64)
        self.rb_number[self.is_rb] = torch.arange(int(self.is_rb.sum()))
        self.max_rows = max(t.num_embeddings for t in tables) + 1
        for name in ("width", "out_col", "is_rb", "owner", "mp", "r", "c", "base", "shard_of", "rb_number"):
            setattr(self, name, getattr(self, name).to(device))
        self.rb_cols = [x.to(device) for x in self.rb_cols]

    def _numbers(self, g: int, kind: Cluster) -> range:
        start = sum(self.n_rb[h] + self.n_ub[h] for h in range(g))
        return range(start, start + self.n_rb[g]) if kind is Cluster.RB else \
            range(start + self.n_rb[g], start + self.n_rb[g] + self.n_ub[g])


@dataclass
class Routed:
    """One step's keys for every owner (int64 payloads) and what the source keeps to use the answers."""

    payload: list[Tensor]  # per owner: RB counts, UB counts, RB keys, UB keys
    answer_sizes: list[int]  # per owner: floats of its answer (RB block unless hierarchical, UB vectors)
    batch: int
    ub_src: Tensor  # UB occurrences: flat position of their unique vector in the UB part of all answers
    ub_dst: Tensor  # ... and the flat position it adds into in the [b, D] output
    ub_total: int  # floats of all UB answers together
    rb_sizes: list[int]  # per owner: floats of its RB block (0 when hierarchical)


def route(layout: ShardLayout, features: SparseFeatures, out_dim: int, hierarchical: bool) -> Routed:
    """Every model-parallel key of the local batch to its shards' owners (see the module docstring)."""
    b, dev = features.batch_size, features.values.device
    S = len(layout.shards)
    T = features.num_tables
    lengths = features.offsets.diff()
    per_table = lengths.view(T, b).sum(1)
    table = torch.repeat_interleave(torch.arange(T, device=dev), per_table, output_size=features.nnz)
    sample = torch.repeat_interleave(torch.arange(T * b, device=dev) % b, lengths, output_size=features.nnz)
    keep = layout.mp[table]
    vals, table, sample = features.values[keep], table[keep], sample[keep]
    r, c = layout.r[table], layout.c[table]
    # one entry per (key, column group)
    n = vals.numel()
    idx = expand_ranges(torch.zeros(n, dtype=torch.int64, device=dev), c)
    copy_of = torch.repeat_interleave(torch.arange(n, device=dev), c, output_size=idx.numel())
    vals, table, sample, r = vals[copy_of], table[copy_of], sample[copy_of], r[copy_of]
    shard = layout.shard_of[layout.base[table] + idx * r + vals % r]
    key = vals // r
    order = torch.argsort(shard, stable=True)
    shard, key, sample = shard[order], key[order], sample[order]
    rb = layout.is_rb[shard]
    # RB: per-sample counts of every RB shard, keys in (shard, sample) order
    n_rb_all = int(layout.is_rb.sum())
    counts = torch.bincount(layout.rb_number[shard[rb]] * b + sample[rb], minlength=n_rb_all * b).view(n_rb_all, b)
    # UB: unique keys per shard (sorted), and where each occurrence's vector comes back
    ub_shard, ub_key, ub_sample = shard[~rb], key[~rb], sample[~rb]
    uniq, inv = torch.unique(ub_shard * layout.max_rows + ub_key, sorted=True, return_inverse=True)
    u_shard = uniq // layout.max_rows
    u_count = torch.bincount(u_shard, minlength=S)
    u_width = layout.width[u_shard]
    u_pos = torch.cumsum(u_width, 0) - u_width  # flat position of each unique vector among all UB answers
    occ_width = u_width[inv]
    ub_src = expand_ranges(u_pos[inv], occ_width)
    ub_dst = expand_ranges(ub_sample * out_dim + layout.out_col[ub_shard], occ_width)
    # per owner payloads
    owner_rb = torch.bincount(layout.owner[shard[rb]], minlength=layout.world).tolist()
    owner_ub = torch.bincount(layout.owner[u_shard], minlength=layout.world).tolist()
    ub_floats = torch.bincount(layout.owner[u_shard], weights=u_width.double(), minlength=layout.world).long().tolist()
    rb_counts = torch.split(counts, layout.n_rb)
    rb_keys = torch.split(key[rb], owner_rb)
    ub_keys = torch.split(uniq % layout.max_rows, owner_ub)
    starts = torch.cumsum(torch.tensor([0] + [layout.n_rb[g] + layout.n_ub[g] for g in range(layout.world)]), 0).tolist()
    payload, sizes, rb_sizes = [], [], []
    for g in range(layout.world):
        ub_n = u_count[starts[g] + layout.n_rb[g] : starts[g + 1]]
        payload.append(torch.cat([rb_counts[g].reshape(-1), ub_n, rb_keys[g], ub_keys[g]]))
        rb_sizes.append(0 if hierarchical else b * layout.rb_width[g])
        sizes.append(rb_sizes[-1] + ub_floats[g])
    return Routed(payload, sizes, b, ub_src, ub_dst, int(u_width.sum()), rb_sizes)
