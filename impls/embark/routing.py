"""EMBark's source side: which owner gets which keys of the local batch, and how the answers land in the output,
as whole-batch tensor passes (no loop over shards or GPUs on the step's path).

Shards are numbered once (``ShardLayout``): the RB shards owner by owner, then the UB shards owner by owner. A
key of table t (r row shards, c column groups) belongs to row shard key % r, local row key // r, and goes to the
c shards of its column groups. The native ``route_keys`` op lays the keys out shard by shard (a counting sort,
each shard's keys in sample order) with the per-sample counts of the RB shards; UB keys are deduplicated per
shard by one unique over (shard, key).

What a source sends owner g: the per-sample key counts of g's RB shards ([S_rb(g), b]), the unique-key counts of
its UB shards ([S_ub(g)]), then the keys of its RB shards and of its UB shards. The answer is one [b, W_rb(g)]
block of partial sums (g's RB shards side by side) followed by the unique vectors of its UB shards, shard by
width group by width group (an owner's UB shards are ordered by width), shard by shard, key by key; the
backward sends the same layouts back. The source pools UB vectors by width: per width one scatter_add_rows into
a [b * slots, w] pool, added into the output's columns as rows (columns.py; their transposes for the gradient)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from impls.api import SparseFeatures, TableSpec
from impls.core import ops
from impls.embark.columns import Columns
from impls.embark.shards import Cluster, Plan, Shard


class ShardLayout:
    """The numbering of every model-parallel shard and what both ends of an exchange derive from it: the RB shards
    owner by owner, then the UB shards owner by owner (each owner's in plan order)."""

    def __init__(self, plan: Plan, tables: Sequence[TableSpec], device: torch.device) -> None:
        G = plan.world_size
        self.world = G
        self.cluster = {p.table: Cluster(p.cluster) for p in plan.mp}
        self.rb: list[list[Shard]] = []
        self.ub: list[list[Shard]] = []
        for g in range(G):
            mine = plan.gpu_shards(g)
            self.rb.append([s for s in mine if self.cluster[s.table] is Cluster.RB])
            ub = [s for s in mine if self.cluster[s.table] is Cluster.UB]  # by width, then plan order
            self.ub.append(sorted(ub, key=lambda s: tables[s.table].dim // s.cols))
        self.shards = [s for x in self.rb for s in x] + [s for x in self.ub for s in x]
        self.n_rb = [len(x) for x in self.rb]
        self.n_ub = [len(x) for x in self.ub]
        self.num_rb = sum(self.n_rb)
        number = {(s.table, s.row, s.col): i for i, s in enumerate(self.shards)}
        dims = [t.dim for t in tables]
        col0 = [sum(dims[:i]) for i in range(len(dims))]
        width = [dims[s.table] // s.cols for s in self.shards]
        out_col = [col0[s.table] + s.col * w for s, w in zip(self.shards, width)]
        self.width = torch.tensor(width, dtype=torch.int64, device=device)
        self.out_col = torch.tensor(out_col, dtype=torch.int64, device=device)
        # per table: r (0: not routed, a DP table), c, and where its (column group, row shard) numbers start
        T = len(tables)
        r, c, base, shard_of = [0] * T, [1] * T, [0] * T, []
        for p in plan.mp:
            r[p.table], c[p.table], base[p.table] = p.r, p.c, len(shard_of)
            shard_of += [number[(p.table, j, k)] for k in range(p.c) for j in range(p.r)]
        self.r, self.c, self.base, self.shard_of = (torch.tensor(x, dtype=torch.int64, device=device)
                                                    for x in (r, c, base, shard_of))
        # RB answer columns: owner g's block [b, W_rb(g)] adds into these output columns
        starts = [sum(self.n_rb[:g]) for g in range(G + 1)]
        self.rb_cols = [torch.tensor([x for i in range(starts[g], starts[g + 1])
                                      for x in range(out_col[i], out_col[i] + width[i])], dtype=torch.int64,
                                     device=device) for g in range(G)]
        self.rb_width = [int(x.numel()) for x in self.rb_cols]
        self.unit = math.gcd(*dims, *width)  # every shard's output columns: aligned runs of this many
        self.out_dim = sum(dims)
        self.rb_out = [Columns(c, self.out_dim, self.unit) for c in self.rb_cols]
        self.max_rows = max(t.num_embeddings for t in tables) + 1
        self.rb_at = [sum(self.n_rb[:g]) for g in range(G + 1)]  # owner g's RB shards: numbers rb_at[g]..rb_at[g+1]
        self.ub_at = [sum(self.n_ub[:g]) for g in range(G + 1)]  # and its UB shards, counted from num_rb
        # UB at the source: the column groups (table, column) of the UB shards, by width; a group's row shards
        # all add into the same output columns, so an occurrence pools into row sample * n_w + slot of its width
        self.ub_groups: list[tuple[int, Columns]] = []  # (width, the output columns of its slots [n_w * width])
        slot = [0] * len(self.shards)
        for w in sorted({width[i] for i in range(self.num_rb, len(self.shards))}):
            pairs: dict[tuple[int, int], int] = {}
            for i in range(self.num_rb, len(self.shards)):
                if width[i] == w:
                    slot[i] = pairs.setdefault((self.shards[i].table, self.shards[i].col), len(pairs))
            cols = [x for (t, k) in pairs for x in range(col0[t] + k * w, col0[t] + (k + 1) * w)]
            self.ub_groups.append((w, Columns(torch.tensor(cols, dtype=torch.int64, device=device), self.out_dim,
                                              self.unit)))
        self.slot = torch.tensor(slot, dtype=torch.int64, device=device)
        self.owner_of = torch.tensor([s.gpu for s in self.shards], dtype=torch.int64, device=device)


@dataclass
class UBGroup:
    """The UB occurrences of one width w at the source: how many of its unique keys each owner answers (as rows
    of width w, owner by owner), which unique each occurrence reads, and the row (sample * slots + slot) of the
    [b * slots, w] pool it adds into."""

    width: int
    cols: Columns  # [slots * w] output columns of the pool
    per_owner: list[int]  # unique keys of width w per owner
    occ_unique: Tensor  # [n_w] index among the width's unique keys (owner-major, as answered)
    occ_row: Tensor  # [n_w]


@dataclass
class Routed:
    """One step's keys for every owner (int64 payloads) and what the source keeps to use the answers."""

    payload: list[Tensor]  # per owner: RB counts, UB counts, RB keys, UB keys
    answer_sizes: list[int]  # per owner: floats of its answer (RB block unless hierarchical, UB vectors)
    batch: int
    ub_groups: list[UBGroup]  # UB occurrences by width (an owner's UB answer: its rows width by width)
    rb_sizes: list[int]  # per owner: floats of its RB block (0 when hierarchical)


def route(layout: ShardLayout, features: SparseFeatures, hierarchical: bool) -> Routed:
    """Every model-parallel key of the local batch to its shards' owners (see the module docstring)."""
    b, dev, G = features.batch_size, features.values.device, layout.world
    S, S_rb = len(layout.shards), layout.num_rb
    keys, sample, shard_counts, rb_counts = ops.route_keys(features.values, features.offsets, b, layout.r,
                                                           layout.c, layout.base, layout.shard_of, S, S_rb)
    per_shard = shard_counts.tolist()
    n_rb_keys = sum(per_shard[:S_rb])
    # UB: unique keys per shard (sorted), and where each occurrence's vector comes back
    ub_shard = torch.repeat_interleave(torch.arange(S_rb, S, device=dev), shard_counts[S_rb:],
                                       output_size=keys.numel() - n_rb_keys)
    uniq, inv = torch.unique(ub_shard * layout.max_rows + keys[n_rb_keys:], sorted=True, return_inverse=True)
    u_shard = uniq // layout.max_rows
    u_count = torch.bincount(u_shard - S_rb, minlength=S - S_rb).tolist()
    u_width = layout.width.index_select(0, u_shard)
    u_owner = layout.owner_of.index_select(0, u_shard)
    groups = []
    occ_width = u_width.index_select(0, inv)
    ub_sample = sample[n_rb_keys:]
    for w, cols in layout.ub_groups:
        is_w = u_width == w
        local = torch.cumsum(is_w.long(), 0) - 1  # rank among the width's unique keys, owner-major
        osel = torch.nonzero(occ_width == w).squeeze(1)
        slots = cols.width // w
        per_owner = torch.bincount(u_owner[is_w], minlength=G).tolist()
        occ_shard = ub_shard.index_select(0, osel)
        groups.append(UBGroup(w, cols, per_owner, local.index_select(0, inv.index_select(0, osel)),
                              ub_sample.index_select(0, osel) * slots + layout.slot.index_select(0, occ_shard)))
    # per owner payloads: slices of the shard-by-shard layout (owner totals by cumulative sums at the owners'
    # boundaries, no loop over shards)
    rb_at, ub_at = layout.rb_at, layout.ub_at
    zero = torch.zeros(1, dtype=torch.int64, device=dev)
    rb_cum = torch.cat([zero, torch.cumsum(shard_counts[:S_rb], 0)])
    ub_counts = torch.tensor(u_count, dtype=torch.int64, device=dev)
    ub_cum = torch.cat([zero, torch.cumsum(ub_counts, 0)])
    rb_keys = torch.split(keys[:n_rb_keys], (rb_cum[rb_at[1:]] - rb_cum[rb_at[:-1]]).tolist())
    ub_keys = torch.split(uniq % layout.max_rows, (ub_cum[ub_at[1:]] - ub_cum[ub_at[:-1]]).tolist())
    ub_floats = torch.bincount(u_owner, weights=u_width.double(), minlength=G).long().tolist()
    payload, sizes, rb_sizes = [], [], []
    for g in range(G):
        payload.append(torch.cat([rb_counts[rb_at[g] : rb_at[g + 1]].reshape(-1), ub_counts[ub_at[g] : ub_at[g + 1]],
                                  rb_keys[g], ub_keys[g]]))
        rb_sizes.append(0 if hierarchical else b * layout.rb_width[g])
        sizes.append(rb_sizes[-1] + ub_floats[g])
    return Routed(payload, sizes, b, groups, rb_sizes)
