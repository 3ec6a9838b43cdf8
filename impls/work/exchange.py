"""The bytes every rank sends and receives in one step's exchanges, per phase, counted as impls/sharding/comm.py
counts them (all_to_all: exact per peer; a ring all-reduce: 2(G-1)/G of its buffer, sent and received), from the
systems' own placement and plans, never from a run:

- table-wise (TT-Rec, EcoRec, the dense baseline; impls/sharding/table_wise.py): the id exchange (a header of two
  int64 per peer and micro-batch, each owned table's bag lengths and ids of the local batch, int64), the pooled
  rows of every owned table back to each source (fp32) and their gradients to each owner; placement and groups by
  plan.place_tables / group_tables, EcoRec's LPT on its per-table unique counts;
- data-parallel (EL-Rec's cores, impls/sharding/data_parallel.py): one coalesced all-reduce of every gradient the
  replica holds (its table_param_bytes);
- EMBark (impls/embark/collection.py, a Plan): each source's RB keys with per-sample counts, its UB keys deduplicated
  per owner shard, the owners' answers (RB: b_src partial sums of d' per shard; UB: one vector per unique key) and
  the gradients back; hierarchical RB partial sums through the node (hier.py); DP tables' dense wgrad all-reduce;
- the DLRM MLPs' all-reduce (mlp.dp, impls/model/train.py) when given their parameter count.

What depends on the ids (a table's lookups and a shard's distinct keys in a local batch) comes from a ``Keys``
source: ``SampledKeys`` counts them on the ranks' local batches (equal to the counters, tests/work), ``ExpectedKeys``
takes their expectation under the generator's id law, with each hot rank on the shard its id falls on."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol, Sequence

import numpy as np

from impls.api import TableSpec


class Keys(Protocol):
    def lookups(self, source: int, table: int) -> float: ...

    def shard_keys(self, source: int, table: int, rows: int, row: int) -> tuple[float, float]:
        """(keys, distinct keys) of ``source``'s local batch on row shard ``row`` of ``rows`` of ``table``."""
        ...

    def union_keys(self, table: int, rows: int, row: int) -> float:
        """Distinct keys of that shard over every source's batch (the global batch)."""
        ...


@dataclass
class Exchange:
    """Bytes per phase and rank: ``sent[phase][r]``, ``received[phase][r]``."""

    world_size: int
    sent: dict[str, np.ndarray] = field(default_factory=dict)
    received: dict[str, np.ndarray] = field(default_factory=dict)

    def _phase(self, phase: str) -> tuple[np.ndarray, np.ndarray]:
        if phase not in self.sent:
            self.sent[phase] = np.zeros(self.world_size)
            self.received[phase] = np.zeros(self.world_size)
        return self.sent[phase], self.received[phase]

    def peer(self, phase: str, src: int, dst: int, nbytes: float) -> None:
        """``src`` sends ``dst`` ``nbytes`` in an all_to_all (a rank's own block is not sent)."""
        if src != dst and nbytes:
            s, r = self._phase(phase)
            s[src] += nbytes
            r[dst] += nbytes

    def ring(self, phase: str, nbytes: int, ranks: Sequence[int] | None = None) -> None:
        """A ring all-reduce of an ``nbytes`` buffer over ``ranks`` (default all): 2(G-1)/G of it each way."""
        ranks = list(range(self.world_size)) if ranks is None else list(ranks)
        G = len(ranks)
        if G > 1 and nbytes:
            s, r = self._phase(phase)
            for k in ranks:
                s[k] += 2 * (G - 1) * int(nbytes) // G
                r[k] += 2 * (G - 1) * int(nbytes) // G

    def by_phase(self, rank: int) -> dict[str, float]:
        """What ``rank`` sends per phase (as WorkReport.extra["comm_bytes_by_phase"] and Comm.sent say it)."""
        return {p: float(v[rank]) for p, v in self.sent.items() if v[rank]}

    def total_sent(self) -> np.ndarray:
        return sum(self.sent.values(), np.zeros(self.world_size))

    def total_received(self) -> np.ndarray:
        return sum(self.received.values(), np.zeros(self.world_size))


def rank_sizes(global_batch: int, world_size: int) -> list[int]:
    """Samples of each rank's local batch, as the loader cuts a global batch (impls/data/loader.rank_rows)."""
    from impls.data.loader import rank_rows

    return [hi - lo for lo, hi in (rank_rows(global_batch, r, world_size) for r in range(world_size))]


def table_wise(ex: Exchange, tables: Sequence[TableSpec], owned: Sequence[Sequence[int]], sizes: Sequence[int],
               keys: Keys, micro_batches: int = 1) -> None:
    """A table-wise step's exchanges (``micro_batches`` > 1: the batch pipeline's id exchange per micro-batch)."""
    G = len(owned)
    D = [sum(tables[t].dim for t in owned[r]) for r in range(G)]
    for s in range(G):
        for r in range(G):
            ex.peer("emb.ids.header", s, r, 16 * micro_batches)
            ex.peer("emb.ids.lengths", s, r, 8 * len(owned[r]) * sizes[s])
            ex.peer("emb.ids.values", s, r, 8 * sum(keys.lookups(s, t) for t in owned[r]))
            ex.peer("emb.fwd", r, s, 4 * sizes[s] * D[r])  # owner r returns source s its rows
            ex.peer("emb.bwd", s, r, 4 * sizes[s] * D[r])  # and s sends r their gradients


def data_parallel(ex: Exchange, param_bytes: int) -> None:
    ex.ring("emb.dp", param_bytes)


def embark(ex: Exchange, tables: Sequence[TableSpec], plan, sizes: Sequence[int], keys: Keys, fp16: bool = False,
           gpus_per_node: int | None = None) -> None:
    """An EMBark step of ``plan`` (impls/embark/shards.Plan)."""
    from impls.embark.shards import Cluster

    G, e = plan.world_size, (2 if fp16 else 4)
    L = gpus_per_node or plan.gpus_per_node
    shards = [plan.gpu_shards(g) for g in range(G)]
    rb = [[s for s in shards[g] if plan.cluster_of(s.table) is Cluster.RB] for g in range(G)]
    ub = [[s for s in shards[g] if plan.cluster_of(s.table) is Cluster.UB] for g in range(G)]
    width = lambda s: tables[s.table].dim // s.cols  # noqa: E731
    for src in range(G):
        for g in range(G):
            if src == g:
                continue
            ex.peer("embark.keys.header", src, g, 16)
            nk = 0.0
            for s in rb[g]:  # counts per sample + the keys
                nk += 8 * (sizes[src] + keys.shard_keys(src, s.table, s.rows, s.row)[0])
                if not plan.hierarchical:
                    ex.peer("embark.bwd", src, g, e * sizes[src] * width(s))
                    ex.peer("embark.fwd", g, src, e * sizes[src] * width(s))
            for s in ub[g]:  # unique keys, deduplicated by the source per owner shard
                u = keys.shard_keys(src, s.table, s.rows, s.row)[1]
                nk += 8 * (1 + u)
                ex.peer("embark.bwd", src, g, e * u * width(s))
                ex.peer("embark.fwd", g, src, e * u * width(s))
            ex.peer("embark.keys", src, g, nk)
    if plan.hierarchical:  # RB partial sums: reduced inside the node to the serving peer, then one message per rail
        N = G // L
        Dn = [sum(width(s) for s in rb[n * L]) for n in range(N)]
        for g in range(G):
            node, lr = divmod(g, L)
            for q in range(L):  # intra: my node's partial sums of the sources whose local rank is q
                if q != lr:
                    ex.peer("embark.fwd.intra", g, node * L + q, e * Dn[node] * sum(sizes[s] for s in range(q, G, L)))
                    ex.peer("embark.bwd.intra", g, node * L + q, e * Dn[node] * sum(sizes[s] for s in range(lr, G, L)))
            for n in range(N):  # rail: to the same local rank of every other node
                if n != node:
                    ex.peer("embark.fwd.rail", g, n * L + lr, e * Dn[node] * sizes[n * L + lr])
                    ex.peer("embark.bwd.rail", g, n * L + lr, e * sizes[g] * Dn[n])
    ex.ring("emb.dp", 4 * sum(tables[t].num_embeddings * tables[t].dim for t in plan.dp))


def embark_lookups(tables: Sequence[TableSpec], plan, keys: Keys) -> list[float]:
    """The rows each rank's stores look up in one EMBark step (their work reports' nnz): its DP tables' local
    lookups, every source's keys on its RB shards, and the distinct keys of its UB shards over the global batch
    (the owner deduplicates across sources and looks each up once)."""
    from impls.embark.shards import Cluster

    out = []
    for g in range(plan.world_size):
        n = sum(keys.lookups(g, t) for t in plan.dp)
        for s in plan.gpu_shards(g):
            if plan.cluster_of(s.table) is Cluster.RB:
                n += sum(keys.shard_keys(src, s.table, s.rows, s.row)[0] for src in range(plan.world_size))
            else:
                n += keys.union_keys(s.table, s.rows, s.row)
        out.append(n)
    return out


class SampledKeys:
    """Lookups and shard keys counted on the ranks' local batches (SparseFeatures, one per rank)."""

    def __init__(self, local_batches: Sequence) -> None:
        self.ids = [[loc.table(t)[0] for t in range(loc.num_tables)] for loc in local_batches]
        self._cache: dict[tuple[int, int, int, int], tuple[float, float]] = {}

    def lookups(self, source: int, table: int) -> float:
        return float(self.ids[source][table].numel())

    def shard_keys(self, source: int, table: int, rows: int, row: int) -> tuple[float, float]:
        k = (source, table, rows, row)
        if k not in self._cache:
            v = self.ids[source][table]
            mine = v[v % rows == row]
            self._cache[k] = (float(mine.numel()), float(mine.unique().numel()))
        return self._cache[k]

    def union_keys(self, table: int, rows: int, row: int) -> float:
        import torch

        v = torch.cat([ids[table] for ids in self.ids])
        return float(v[v % rows == row].unique().numel())


class ExpectedKeys:
    """Lookups and shard keys expected under the synthetic generator's id law: ``lookups[s][t]`` given; a row
    shard's share from the law itself, the first HEAD ranks one by one (each rank's id through the spec's own
    rank -> id map, ``maps[t]``: a scattered table's Bijection, None for ranked ids) and the rest split evenly:
    a hot id lands on one shard, and that shard looks it up for every draw."""

    HEAD = 1 << 16

    def __init__(self, tables: Sequence[TableSpec], lookups: Sequence[Sequence[float]], alpha: float,
                 maps: Sequence | None = None) -> None:
        self.lk, self.tables, self.alpha = lookups, tables, alpha
        self.maps = list(maps) if maps is not None else [None] * len(tables)
        self._heads: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def of_source(cls, source, lookups: Sequence[Sequence[float]]) -> "ExpectedKeys":
        """For a SyntheticSource's tables, law and maps."""
        return cls(source.tables, lookups, source.spec.alpha, source.maps)

    def _head(self, table: int) -> tuple[np.ndarray, np.ndarray]:
        """The ids and probabilities of the table's HEAD most likely ranks."""
        from impls.data.synthetic import rank_cdf

        if table not in self._heads:
            rows = self.tables[table].num_embeddings
            h = min(rows, self.HEAD)
            p = np.diff(rank_cdf(rows, self.alpha, np.arange(h + 1, dtype=np.float64)))
            ranks = np.arange(h, dtype=np.int64)
            m = self.maps[table]
            self._heads[table] = ((ranks if m is None else np.asarray(m(ranks))).astype(np.int64), p)
        return self._heads[table]

    def _share(self, table: int, rows: int, row: int, draws: float) -> tuple[float, float]:
        from impls.work.index_law import expected_groups, hit

        # distinct ids from the sampler's own CDF (groups of one id): the head below is summed from it too
        total_u = expected_groups(self.tables[table].num_embeddings, draws, self.alpha, 1, "ranked")
        if rows == 1:
            return draws, total_u
        ids, p = self._head(table)
        sel = ids % rows == row
        hits = hit(p, draws)
        keys = draws * (p[sel].sum() + (1.0 - p.sum()) / rows)
        return float(keys), float(hits[sel].sum() + (total_u - hits.sum()) / rows)

    def lookups(self, source: int, table: int) -> float:
        return float(self.lk[source][table])

    def shard_keys(self, source: int, table: int, rows: int, row: int) -> tuple[float, float]:
        return self._share(table, rows, row, self.lk[source][table])

    def union_keys(self, table: int, rows: int, row: int) -> float:
        return self._share(table, rows, row, sum(lk[table] for lk in self.lk))[1]


def mlp(ex: Exchange, mlp_params: int) -> None:
    """The DLRM MLPs' gradient all-reduce (fp32)."""
    ex.ring("mlp.dp", 4 * mlp_params)


def system_exchange(system: str, tables: Sequence[TableSpec], options: Mapping, sizes: Sequence[int], keys: Keys,
                    costs: Sequence[float] | None = None, plan=None, mlp_params: int = 0, seed: int = 0) -> Exchange:
    """One step's exchanges of ``system`` over ``len(sizes)`` ranks with local batches ``sizes``, sharded as its
    dist_defaults overridden by ``options`` say (build_sharded's rules); EcoRec's greedy placement balances
    ``costs`` (its unique ids per table of a sampled global batch). EMBark takes its ``plan``."""
    from impls.registry import get_impl
    from impls.sharding.build import DIST_KEYS
    from impls.sharding.plan import place_tables

    G = len(sizes)
    ex = Exchange(G)
    if system == "embark":
        if plan is None:
            raise ValueError("embark's exchange follows a plan (impls/embark/planning.plan_for)")
        embark(ex, tables, plan, sizes, keys, fp16=bool(options.get("fp16_comm")))
    else:
        cls = get_impl(system)
        dist_opts = {**cls.dist_defaults, **{k: options[k] for k in DIST_KEYS if k in options}}
        local = {k: v for k, v in options.items() if k not in DIST_KEYS}
        if G > 1 and dist_opts["sharding"] == "data-parallel":
            data_parallel(ex, sum(cls.table_param_bytes(tables, local)))
        elif G > 1:
            how = dist_opts.get("placement", "sequential")
            if how == "greedy" and costs is None:
                raise ValueError(f"{system}: greedy placement balances per-table costs; give them (costs=)")
            sizes_b = cls.table_param_bytes(tables, local)
            owned = place_tables(costs if costs is not None else [1.0] * len(tables), G, how, sizes_b,
                                 dist_opts.get("capacity_bytes"), seed, [t.name for t in tables])
            micro = int(dist_opts.get("pipeline_micro_batches", 4)) if dist_opts.get("pipeline") == "batch" else 1
            table_wise(ex, tables, owned, sizes, keys, micro)
    if G > 1:
        mlp(ex, mlp_params)
    return ex
