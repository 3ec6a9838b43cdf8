"""EL-Rec's global index reordering (EL-Rec, SC'22), an offline data step.

Per table: count each row's accesses over training batches; relabel rows by descending frequency; keep the
hottest ``hot_fraction`` (5 %) of the table's rows fixed at the front; over the other accessed rows build a
co-access graph (an edge between every pair of distinct non-hot ids within each mini-batch of
``graph_batch`` samples, weighted by how often the pair co-occurs) and order them by community, so rows
that are looked up together get neighbouring ids and hence shared TT prefixes (i1, i2), which shrinks E1.

EL-Rec uses Rabbit Order (a hierarchical community ordering, C++); its public substitute here is igraph's
multilevel (Louvain) community detection: vertices are ordered by their community at the coarsest level,
then by finer levels, then by frequency; communities by their hottest member. Rows never accessed keep
their relative order after all accessed ones. The result is one bijection per table, applied to the data
(``ReorderedSource``); a model is invariant under it up to the same permutation of its rows."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from impls.api import SparseFeatures
from impls.data.batch import Batch
from impls.data.staging import staged


@dataclass
class Reordering:
    """new_id = perms[table][old_id] for each reordered table (the others are unchanged)."""

    perms: dict[str, np.ndarray]
    info: dict[str, Any] = field(default_factory=dict)

    def save(self, out: Path, key: dict[str, Any]) -> None:
        """Write into ``out`` (a new or empty folder) under impls/data/staging.py's rule, ``key`` saying what it was
        built from; a finished ``out`` of the same key is left as it is, one of another key refused."""
        Reordering.build_or_reuse(out, key, lambda: self)

    def _write(self, out: Path) -> None:
        for name, p in self.perms.items():
            np.save(out / f"{name}.npy", p)
        (out / "reorder.json").write_text(json.dumps({"tables": sorted(self.perms), **self.info}, indent=2))

    @staticmethod
    def build_or_reuse(out: Path, key: dict[str, Any], build: Callable[[], "Reordering"]) -> tuple["Reordering", bool]:
        """(the reordering at ``out``, True) when ``out`` is finished with this ``key``; else (``build()``, False)
        written into ``out``; the lock on ``out`` is held throughout (one writer)."""
        with staged(Path(out), "reordering", key) as stage:
            if stage.reused:
                return Reordering.load(out), True
            r = build()
            r._write(stage.path)
        return r, False

    @staticmethod
    def load(path: Path) -> "Reordering":
        path = Path(path)
        meta_file = path / "reorder.json"
        if not meta_file.exists():
            raise ValueError(f"{path} holds no reordering (no reorder.json): run `dlrmbench data reorder` first")
        meta = json.loads(meta_file.read_text())
        perms = {name: np.load(path / f"{name}.npy", mmap_mode="r") for name in meta["tables"]}
        return Reordering(perms, {k: v for k, v in meta.items() if k != "tables"})


def _graph_order(ids: np.ndarray, rank: np.ndarray, groups: Sequence[np.ndarray], max_pairs: int,
                 rng: np.random.Generator) -> np.ndarray:
    """``ids`` (non-hot accessed rows, their frequency ``rank``) in community order over the co-access
    graph of ``groups`` (the distinct non-hot ids of each mini-batch)."""
    import igraph

    n = len(ids)
    if n <= 2:
        return ids[np.argsort(rank, kind="stable")]
    edges = []
    for g in groups:
        v = np.searchsorted(ids, g)  # vertex numbers
        k = len(v)
        if k < 2:
            continue
        pairs = k * (k - 1) // 2
        if pairs <= max_pairs:
            a, b = np.triu_indices(k, 1)
        else:  # EL-Rec connects every pair; a very large clique is sampled to max_pairs pairs
            a, b = rng.integers(0, k, max_pairs), rng.integers(0, k, max_pairs)
            keep = a != b
            a, b = a[keep], b[keep]
        lo, hi = np.minimum(v[a], v[b]), np.maximum(v[a], v[b])
        edges.append(lo.astype(np.int64) * n + hi)
    if not edges:
        return ids[np.argsort(rank, kind="stable")]
    code, weight = np.unique(np.concatenate(edges), return_counts=True)
    g = igraph.Graph(n=n, edges=np.stack([code // n, code % n], axis=1).tolist())
    levels = g.community_multilevel(weights=weight.astype(float).tolist(), return_levels=True)
    memberships = [np.asarray(lv.membership) for lv in levels] or [np.zeros(n, dtype=np.int64)]
    # communities ordered by their hottest member, at every level
    keys = []
    for m in reversed(memberships):  # coarsest first
        best = np.full(m.max() + 1, np.iinfo(np.int64).max)
        np.minimum.at(best, m, rank)
        keys.append(best[m])
    order = np.lexsort([rank, *reversed(keys)])  # last key is primary: the coarsest level
    return ids[order]


def build_reordering(source: Any, tables: Sequence[str], batches: int, batch_size: int, hot_fraction: float = 0.05,
                     graph_batch: int = 512, max_pairs: int = 50_000, seed: int = 0) -> Reordering:
    """The reordering of ``tables`` from ``batches`` training batches of ``source``."""
    if not 0 <= hot_fraction < 1 or batches < 1 or batch_size < 1 or graph_batch < 1:
        raise ValueError(f"need 0 <= hot_fraction < 1, batches, batch_size, graph_batch >= 1; got "
                         f"{hot_fraction}, {batches}, {batch_size}, {graph_batch}")
    index = {t.name: i for i, t in enumerate(source.tables)}
    unknown = [t for t in tables if t not in index]
    if unknown:
        raise ValueError(f"unknown table(s) {unknown}; tables: {sorted(index)}")
    rng = np.random.default_rng(seed)
    seen: dict[str, list[np.ndarray]] = {t: [] for t in tables}
    for k in range(batches):
        sf = source.batch(k, batch_size).sparse
        for t in tables:
            v, o = sf.table(index[t])
            bag_of = np.repeat(np.arange(batch_size), (o[1:] - o[:-1]).numpy())
            v = v.numpy()
            for lo in range(0, batch_size, graph_batch):  # mini-batches of graph_batch samples
                sel = (bag_of >= lo) & (bag_of < lo + graph_batch)
                seen[t].append(v[sel])
    perms, info = {}, {"batches": batches, "batch_size": batch_size, "hot_fraction": hot_fraction,
                       "graph_batch": graph_batch, "method": "frequency + igraph multilevel communities"}
    for t in tables:
        rows = source.tables[index[t]].num_embeddings
        ids, counts = np.unique(np.concatenate(seen[t]), return_counts=True)
        by_freq = np.lexsort([ids, -counts])  # descending count, ties by id
        rank = np.empty(len(ids), dtype=np.int64)
        rank[by_freq] = np.arange(len(ids))
        hot_n = min(len(ids), math.ceil(hot_fraction * rows))
        hot = ids[by_freq[:hot_n]]
        cold = np.sort(ids[by_freq[hot_n:]])
        hot_mask = np.zeros(rows, dtype=bool)
        hot_mask[hot] = True
        groups = [np.unique(g[~hot_mask[g]]) for g in seen[t]]
        cold_order = _graph_order(cold, rank[np.searchsorted(ids, cold)], groups, max_pairs, rng)
        accessed = np.zeros(rows, dtype=bool)
        accessed[ids] = True
        new_order = np.concatenate([hot, cold_order, np.flatnonzero(~accessed)])  # old ids in new-id order
        perm = np.empty(rows, dtype=np.int64)
        perm[new_order] = np.arange(rows)
        perms[t] = perm
    return Reordering(perms, info)


class ReorderedSource:
    """A source whose ids of the reordered tables are relabelled by the bijection."""

    def __init__(self, source: Any, reordering: Reordering) -> None:
        self.source, self.reordering = source, reordering
        names = [t.name for t in source.tables]
        unknown = set(reordering.perms) - set(names)
        if unknown:
            raise ValueError(f"the reordering names table(s) {sorted(unknown)} this data does not have")
        self._perm = {}
        for i, t in enumerate(source.tables):
            if t.name in reordering.perms:
                p = reordering.perms[t.name]
                if len(p) != t.num_embeddings:
                    raise ValueError(f"reordering of table {t.name!r} has {len(p)} rows, the table {t.num_embeddings}")
                self._perm[i] = p  # read-only (memory-mapped): indexed in numpy, never wrapped as a tensor
        self.tables = source.tables
        self.num_dense = source.num_dense

    @property
    def num_rows(self) -> int:
        return self.source.num_rows

    @property
    def labels(self):
        """The labels of every row (a relabelling changes ids only)."""
        return self.source.labels

    def batch(self, index: int, batch_size: int) -> Batch:
        return self._relabel(self.source.batch(index, batch_size), batch_size)

    def take(self, rows) -> Batch:
        return self._relabel(self.source.take(rows), len(rows))

    def _relabel(self, b: Batch, batch_size: int) -> Batch:
        sf = b.sparse
        values = sf.values.clone()
        for i, perm in self._perm.items():
            lo, hi = int(sf.offsets[i * batch_size]), int(sf.offsets[(i + 1) * batch_size])
            values[lo:hi] = torch.from_numpy(np.asarray(perm[values[lo:hi].numpy()], dtype=np.int64))
        return Batch(b.dense, SparseFeatures(values, sf.offsets, batch_size), b.labels)

    def batches(self, count: int, batch_size: int, start: int = 0) -> list[Batch]:
        return [self.batch(start + k, batch_size) for k in range(count)]
