"""EMBark's owner side: one fused lookup per cluster per rank. All RB shards a rank holds are the tables of ONE
storage collection, looked up once per step for every sample of the global batch (its partial sums, the
shards side by side); likewise all its UB shards, looked up once for their unique keys across every source.
Storage: ``dense`` (dense-torch), ``fbgemm`` (dense-fbgemm: one TBE with its fused optimizer) or ``tt`` (ecorec);
a dense shard starts from the rows and columns of the table the single-device model starts from, drawn directly
(dense_table_init on the shard's block).

A source's payload (routing.py) holds the RB shards' per-sample counts and the UB shards' unique counts, then
their keys, shard-major; the engines turn the payloads of all sources into one table-major batch with tensor
passes (segments reordered from (source, shard) to (shard, source) by offset arithmetic)."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from impls.api import EmbeddingCollection, EmbeddingOptim, SparseFeatures, TableSpec, get_impl
from impls.dense.init import dense_table_init
from impls.embark.routing import expand_ranges
from impls.embark.shards import Shard, shard_rows

STORAGES = {"dense": "dense-torch", "fbgemm": "dense-fbgemm", "tt": "ecorec"}


def shard_spec(spec: TableSpec, s: Shard) -> TableSpec:
    """The (rows, d') table one shard holds (sum pooling: RB partial sums are averaged at the source)."""
    return TableSpec(f"{spec.name}#r{s.row}of{s.rows}c{s.col}of{s.cols}",
                     max(1, shard_rows(spec.num_embeddings, s.rows, s.row)), spec.dim // s.cols)


def build_store(tables: Sequence[TableSpec], shards: Sequence[Shard], optim: EmbeddingOptim, storage: str,
                device, seed: int, options: dict | None) -> EmbeddingCollection | None:
    """One collection whose tables are ``shards``; dense shards hold the rows of the single-device tables."""
    if not shards:
        return None
    subs = [shard_spec(tables[s.table], s) for s in shards]
    store = get_impl(STORAGES[storage])(subs, optim, None, device=device, check_bounds=False, seed=seed,
                                        **(options or {}))
    if storage != "tt":
        for s, sub in zip(shards, subs):
            spec = tables[s.table]
            if sub.num_embeddings != shard_rows(spec.num_embeddings, s.rows, s.row):
                continue  # an empty row shard holds one unused row
            w = store.materialize(sub.name)
            block = dict(rows=slice(s.row, None, s.rows), cols=slice(s.col * sub.dim, (s.col + 1) * sub.dim))
            if w.is_cpu:
                dense_table_init(spec, seed, w, **block)
            else:
                w.copy_(dense_table_init(spec, seed, **block))
    return store


def _reorder(seg_len: Tensor) -> Tensor:
    """For segments laid out (source, shard) with lengths seg_len [G, S]: the gather index that lays the same
    elements out (shard, source)."""
    G, S = seg_len.shape
    src_start = (torch.cumsum(seg_len.reshape(-1), 0) - seg_len.reshape(-1)).view(G, S)
    return expand_ranges(src_start.t().reshape(-1), seg_len.t().reshape(-1))


class RBEngine:
    """The rank's RB shards: per step, partial sums [B_global, W] (W = their widths side by side)."""

    def __init__(self, store: EmbeddingCollection, n: int, width: int) -> None:
        self.store, self.n, self.width = store, n, width

    def forward(self, counts: Sequence[Tensor], keys: Sequence[Tensor], grad_enabled: bool) -> Tensor:
        """``counts[src]`` [n, b_src], ``keys[src]`` shard-major: the partial sums of every source's samples."""
        lengths = torch.cat(list(counts), 1)  # [n, B]: table-major bags of the global batch
        B = lengths.shape[1]
        values = torch.cat(list(keys))
        if len(keys) > 1:
            values = values[_reorder(torch.stack([c.sum(1) for c in counts]))]
        offsets = torch.zeros(self.n * B + 1, dtype=torch.int64, device=values.device)
        torch.cumsum(lengths.reshape(-1), 0, out=offsets[1:])
        with torch.set_grad_enabled(grad_enabled):
            self.out = self.store(SparseFeatures(values, offsets, B))
        return self.out.detach()

    def backward(self, grad: Tensor) -> tuple[Tensor, Tensor]:
        return self.out, grad


class UBEngine:
    """The rank's UB shards: per step, one vector per (source, unique key of the source), looked up once per
    unique key across sources. Vectors move by width: the shards of one width w are slots of a [rows * slots, w]
    view of the store's output, gathered and scattered row-wise."""

    def __init__(self, store: EmbeddingCollection, widths: Sequence[int], max_rows: int) -> None:
        self.store, self.n, self.max_rows = store, len(widths), max_rows
        self.widths = torch.tensor(list(widths), dtype=torch.int64)
        col0 = torch.cumsum(self.widths, 0) - self.widths
        self.slot = torch.zeros(self.n, dtype=torch.int64)
        self.groups: list[tuple[int, Tensor]] = []  # (width, the store output columns of its slots)
        for w in sorted(set(widths)):
            mine = [i for i, x in enumerate(widths) if x == w]
            self.slot[mine] = torch.arange(len(mine))
            self.groups.append((w, torch.cat([torch.arange(int(col0[i]), int(col0[i]) + w) for i in mine])))

    def forward(self, counts: Sequence[Tensor], keys: Sequence[Tensor], grad_enabled: bool) -> list[Tensor]:
        """``counts[src]`` [n] unique keys per shard, ``keys[src]`` shard-major: per source, its vectors
        (shard by shard, key by key, flat)."""
        dev = keys[0].device
        seg = torch.stack(list(counts))  # [G, n]
        widths = self.widths.to(dev)
        shard = torch.repeat_interleave(torch.arange(self.n, device=dev).repeat(len(keys)), seg.reshape(-1))
        uniq, inv = torch.unique(shard * self.max_rows + torch.cat(list(keys)), sorted=True, return_inverse=True)
        u_shard = uniq // self.max_rows
        per_shard = torch.bincount(u_shard, minlength=self.n)
        rows = max(1, int(per_shard.max()) if per_shard.numel() else 1)
        u_row = torch.arange(uniq.numel(), device=dev) - (torch.cumsum(per_shard, 0) - per_shard)[u_shard]
        lengths = (torch.arange(rows, device=dev).unsqueeze(0) < per_shard.unsqueeze(1)).long()  # [n, rows]
        offsets = torch.zeros(self.n * rows + 1, dtype=torch.int64, device=dev)
        torch.cumsum(lengths.reshape(-1), 0, out=offsets[1:])
        with torch.set_grad_enabled(grad_enabled):
            self.out = self.store(SparseFeatures(uniq % self.max_rows, offsets, rows))  # [rows, W]
        # every received key: its width, where its floats go in the answers, and its row in its width's view
        key_w = widths[shard]
        start = torch.cumsum(key_w, 0) - key_w
        self.moves = []
        flat = torch.empty(int(key_w.sum()), device=self.out.device)
        y = self.out.detach()
        for w, cols in self.groups:
            sel = torch.nonzero(key_w == w).squeeze(1)
            slots = cols.numel() // w
            rows_w = u_row[inv[sel]] * slots + self.slot.to(dev)[shard[sel]]
            at = start[sel].unsqueeze(1) + torch.arange(w, device=dev)
            cols = cols.to(dev)
            flat[at] = y.index_select(1, cols).view(-1, w)[rows_w]
            self.moves.append((w, cols, rows_w, at))
        return list(torch.split(flat, (seg * widths).sum(1).tolist()))

    def backward(self, grads: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
        g_flat = torch.cat(list(grads))
        g = torch.zeros_like(self.out)
        for w, cols, rows_w, at in self.moves:
            per_row = torch.zeros(g.shape[0] * (cols.numel() // w), w, device=g.device)
            per_row.index_add_(0, rows_w, g_flat[at])
            g.index_add_(1, cols, per_row.view(g.shape[0], -1))
        return self.out, g
