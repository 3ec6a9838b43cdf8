"""EMBark's owner side: one fused lookup per cluster per rank. All RB shards a rank holds are the tables of ONE
storage collection, looked up once per step for every sample of the global batch (its partial sums, the shards
side by side); its UB shards of one width are ONE table (their rows concatenated), looked up once per step for
the unique keys of every source (one unique and one lookup over the concatenated key space per width).
Storage: ``dense`` (dense-torch), ``fbgemm`` (dense-fbgemm: one TBE with its fused optimizer; the default where
fbgemm_gpu is installed, default_storage) or ``tt`` (ecorec);
a dense shard starts from the rows and columns of the table the single-device model starts from, drawn directly
(dense_table_init on the shard's block).

The step (collection.py) hands the RB engine every source's keys already laid out shard by shard (the native
transpose_segments); the UB engine takes each source's unique keys, shard-major, and merges them with tensor
passes."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from impls.api import EmbeddingCollection, EmbeddingOptim, SparseFeatures, TableSpec, get_impl
from impls.core.init import dense_table_init
from impls.embark.shards import Shard, shard_rows

STORAGES = {"dense": "dense-torch", "fbgemm": "dense-fbgemm", "tt": "ecorec"}


def default_storage() -> str:
    """The fastest storage installed: fbgemm's fused TBE (HugeCTR's clusters run fused kernels too) where fbgemm_gpu
    loads, else dense-torch."""
    try:
        get_impl("dense-fbgemm")
    except ImportError:
        return "dense"
    return "fbgemm"


def shard_spec(spec: TableSpec, s: Shard) -> TableSpec:
    """The (rows, d') table one shard holds (sum pooling: RB partial sums are averaged at the source)."""
    return TableSpec(f"{spec.name}#r{s.row}of{s.rows}c{s.col}of{s.cols}",
                     max(1, shard_rows(spec.num_embeddings, s.rows, s.row)), spec.dim // s.cols)


def init_shard(full: TableSpec, s: Shard, sub: TableSpec, w: Tensor, seed: int) -> None:
    """Fill ``w`` (the shard's weight, in place) with the rows and columns of the single-device table it holds."""
    if sub.num_embeddings != shard_rows(full.num_embeddings, s.rows, s.row):
        return  # an empty row shard holds one unused row
    block = dict(rows=slice(s.row, None, s.rows), cols=slice(s.col * sub.dim, (s.col + 1) * sub.dim))
    if w.is_cpu:
        dense_table_init(full, seed, w, **block)
    else:
        w.copy_(dense_table_init(full, seed, **block))


def build_store(tables: Sequence[TableSpec], shards: Sequence[Shard], optim: EmbeddingOptim, storage: str,
                device, seed: int, options: dict | None) -> EmbeddingCollection | None:
    """One collection whose tables are ``shards``; dense shards hold the rows of the single-device tables."""
    if not shards:
        return None
    subs = [shard_spec(tables[s.table], s) for s in shards]
    # checked: one pass of the native bounds_check over the routed keys (a routing bug surfaces as a named
    # error), and fbgemm then skips its own check and the defensive copy of the keys it needs
    store = get_impl(STORAGES[storage])(subs, optim, None, device=device, check_bounds=True, seed=seed,
                                        **(options or {}))
    if storage != "tt":
        for s, sub in zip(shards, subs):
            init_shard(tables[s.table], s, sub, store.materialize(sub.name), seed)
    return store


def build_concat_store(tables: Sequence[TableSpec], shards: Sequence[Shard], name: str, optim: EmbeddingOptim,
                       storage: str, device, seed: int, options: dict | None) -> tuple[EmbeddingCollection, list[int]]:
    """One collection holding ONE table: the rows of ``shards`` (all of one width) one after another, and where
    each shard's rows start in it; dense shards start from the rows of the single-device tables."""
    subs = [shard_spec(tables[s.table], s) for s in shards]
    base = [0]
    for sub in subs:
        base.append(base[-1] + sub.num_embeddings)
    spec = TableSpec(name, base[-1], subs[0].dim)
    store = get_impl(STORAGES[storage])([spec], optim, None, device=device, check_bounds=True, seed=seed,
                                        **(options or {}))
    if storage != "tt":
        w = store.materialize(name)
        for s, sub, b0 in zip(shards, subs, base):
            init_shard(tables[s.table], s, sub, w[b0 : b0 + sub.num_embeddings], seed)
    return store, base[:-1]


class RBEngine:
    """The rank's RB shards: per step, partial sums [B_global, W] (W = their widths side by side)."""

    def __init__(self, store: EmbeddingCollection, n: int, width: int) -> None:
        self.store, self.n, self.width = store, n, width

    def forward(self, lengths: Tensor, values: Tensor, grad_enabled: bool) -> Tensor:
        """``lengths`` [n, B]: the bags of every source's samples (sources side by side), shard by shard;
        ``values`` their keys in that order: the partial sums [B, W]."""
        B = lengths.shape[1]
        offsets = torch.zeros(self.n * B + 1, dtype=torch.int64, device=values.device)
        torch.cumsum(lengths.reshape(-1), 0, out=offsets[1:])
        with torch.set_grad_enabled(grad_enabled):
            self.out = self.store(SparseFeatures(values, offsets, B))
        return self.out.detach()

    def backward(self, grad: Tensor) -> tuple[Tensor, Tensor]:
        return self.out, grad


class UBEngine:
    """The rank's UB shards, grouped by width (the layout orders each owner's UB shards by width): per width ONE
    table holding the group's shards' rows one after another, so a step is one unique and one lookup over that
    concatenated key space per width. Each received key gets its vector back as a row: per source, its keys'
    rows width group by width group, in its payload's (shard, key) order."""

    def __init__(self, tables: Sequence[TableSpec], shards: Sequence[Shard], optim: EmbeddingOptim, storage: str,
                 device, seed: int, options: dict | None, rank: int) -> None:
        widths = [tables[x.table].dim // x.cols for x in shards]
        self.n = len(shards)
        self.groups = []  # (width, first shard, end shard, store, table name)
        self.base = torch.zeros(self.n, dtype=torch.int64)
        self.stores = torch.nn.ModuleList()
        i = 0
        while i < self.n:
            e = i
            while e < self.n and widths[e] == widths[i]:
                e += 1
            name = f"ub.rank{rank}.w{widths[i]}"
            store, base = build_concat_store(tables, shards[i:e], name, optim, storage, device, seed, options)
            self.base[i:e] = torch.tensor(base)
            self.groups.append((widths[i], i, e, store, name))
            self.stores.append(store)
            i = e

    def forward(self, counts: Sequence[Tensor], keys: Tensor, grad_enabled: bool) -> list[list[Tensor]]:
        """``counts[src]`` [n] unique keys per shard, ``keys`` every source's keys back to back, each source's
        shard-major: per source, its vectors (one [k, w] block per width)."""
        dev = keys.device
        seg = torch.stack(list(counts))  # [G, n]
        shard = torch.repeat_interleave(torch.arange(self.n, device=dev).repeat(len(counts)), seg.reshape(-1),
                                        output_size=keys.numel())
        rows = self.base.to(dev).index_select(0, shard) + keys
        self.steps = []
        answers: list[list[Tensor]] = [[] for _ in counts]
        for w, i, e, store, _ in self.groups:
            sel = torch.nonzero((shard >= i) & (shard < e)).squeeze(1)
            uniq, inv = torch.unique(rows.index_select(0, sel), sorted=True, return_inverse=True)
            with torch.set_grad_enabled(grad_enabled):
                out = store(SparseFeatures(uniq, torch.arange(uniq.numel() + 1, device=dev), uniq.numel())
                            if uniq.numel() else SparseFeatures(uniq, torch.zeros(2, dtype=torch.int64, device=dev), 1))
            per_src = seg[:, i:e].sum(1).tolist()
            for src, blk in enumerate(torch.split(out.detach().index_select(0, inv), per_src)):
                answers[src].append(blk)
            self.steps.append((out, inv, per_src, w))
        return answers

    def backward(self, grads: Sequence[Tensor]) -> list[tuple[Tensor, Tensor]]:
        """``grads[src]``: the source's flat UB gradient, laid out as its answer."""
        parts: list[list[Tensor]] = [[] for _ in self.steps]
        for src, g in enumerate(grads):  # per source: width group by width group, [k_src, w] rows
            pos = 0
            for k, (_, _, per_src, w) in enumerate(self.steps):
                n = per_src[src] * w
                parts[k].append(g[pos : pos + n].view(-1, w))
                pos += n
        out = []
        for (y, inv, _, w), rows in zip(self.steps, parts):
            gy = torch.zeros(y.shape[0], w, device=y.device)
            if inv.numel():
                gy.index_add_(0, inv, torch.cat(rows))
            out.append((y, gy))
        return out

    def materialize_shard(self, i: int, rows: int) -> Tensor:
        """Shard i's rows (its first ``rows``) from its group's concatenated table."""
        for _, a, e, store, name in self.groups:
            if a <= i < e:
                b0 = int(self.base[i])
                return store.materialize(name)[b0 : b0 + rows]
        raise IndexError(i)
