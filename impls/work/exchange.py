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
    def lookups(self) -> np.ndarray:
        """[sources, tables]: each source's lookups of each table in its local batch."""
        ...

    def shard_keys(self, table: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """([sources, rows], [sources, rows]): each source's keys and distinct keys of ``table`` on each row shard of
        ``rows`` (shard j holds the ids = j mod rows)."""
        ...

    def union_keys(self, table: int, rows: int) -> np.ndarray:
        """[rows]: each row shard's distinct keys over every source's batch (the global batch)."""
        ...


@dataclass
class Exchange:
    """Bytes per phase: ``matrix[phase][src, dst]`` what src sends dst in its all_to_alls (the diagonal, a rank's own
    block, is never sent), ``ring_bytes[phase][r]`` what r sends (and receives) in ring all-reduces."""

    world_size: int
    matrix: dict[str, np.ndarray] = field(default_factory=dict)
    ring_bytes: dict[str, np.ndarray] = field(default_factory=dict)

    def block(self, phase: str, m: np.ndarray) -> None:
        """Add ``m`` [G, G] (src, dst) to the phase's all_to_all bytes."""
        if phase not in self.matrix:
            self.matrix[phase] = np.zeros((self.world_size, self.world_size))
        self.matrix[phase] += m

    def column(self, phase: str, dst: int, from_each: np.ndarray) -> None:
        """Every source s sends ``dst`` ``from_each[s]`` bytes."""
        if phase not in self.matrix:
            self.matrix[phase] = np.zeros((self.world_size, self.world_size))
        self.matrix[phase][:, dst] += from_each

    def row(self, phase: str, src: int, to_each: np.ndarray) -> None:
        """``src`` sends every rank d ``to_each[d]`` bytes."""
        if phase not in self.matrix:
            self.matrix[phase] = np.zeros((self.world_size, self.world_size))
        self.matrix[phase][src, :] += to_each

    def ring(self, phase: str, nbytes: int) -> None:
        """A ring all-reduce of an ``nbytes`` buffer over every rank: 2(G-1)/G of it each way (Comm's floor)."""
        G = self.world_size
        if G > 1 and nbytes:
            self.ring_bytes.setdefault(phase, np.zeros(G))
            self.ring_bytes[phase] += 2 * (G - 1) * int(nbytes) // G

    def _offdiag(self, m: np.ndarray) -> np.ndarray:
        return m - np.diag(np.diag(m))

    @property
    def sent(self) -> dict[str, np.ndarray]:
        """Per phase, the bytes each rank sends."""
        out = {p: self._offdiag(m).sum(1) for p, m in self.matrix.items()}
        return {**out, **self.ring_bytes}

    @property
    def received(self) -> dict[str, np.ndarray]:
        out = {p: self._offdiag(m).sum(0) for p, m in self.matrix.items()}
        return {**out, **self.ring_bytes}

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
    b = np.asarray(sizes, dtype=np.float64)
    D = np.array([sum(tables[t].dim for t in owned[r]) for r in range(G)], dtype=np.float64)
    T = np.array([len(owned[r]) for r in range(G)], dtype=np.float64)
    lk = keys.lookups()
    ex.block("emb.ids.header", np.full((G, G), 16.0 * micro_batches))
    ex.block("emb.ids.lengths", 8 * np.outer(b, T))
    ex.block("emb.ids.values", 8 * np.stack([lk[:, list(o)].sum(1) for o in owned], 1))
    ex.block("emb.fwd", 4 * np.outer(D, b))  # owner r returns source s its rows
    ex.block("emb.bwd", 4 * np.outer(b, D))  # and s sends r their gradients


def data_parallel(ex: Exchange, param_bytes: int) -> None:
    ex.ring("emb.dp", param_bytes)


def embark(ex: Exchange, tables: Sequence[TableSpec], plan, sizes: Sequence[int], keys: Keys, fp16: bool = False,
           gpus_per_node: int | None = None) -> None:
    """An EMBark step of ``plan`` (impls/embark/shards.Plan)."""
    from impls.embark.shards import Cluster

    G, e = plan.world_size, (2 if fp16 else 4)
    L = gpus_per_node or plan.gpus_per_node
    b = np.asarray(sizes, dtype=np.float64)
    rb_width = np.zeros(G)
    ex.block("embark.keys.header", np.full((G, G), 16.0))
    rb = {p.table for p in plan.mp if p.cluster == Cluster.RB}
    for s in plan.shards():
        g, w = s.gpu, tables[s.table].dim // s.cols
        k, u = keys.shard_keys(s.table, s.rows)
        if s.table in rb:  # counts per sample + the keys
            ex.column("embark.keys", g, 8 * (b + k[:, s.row]))
            rb_width[g] += w
        else:  # unique keys, deduplicated by the source per owner shard: its count, its keys, a vector per key
            ex.column("embark.keys", g, 8 * (1 + u[:, s.row]))
            ex.column("embark.bwd", g, e * w * u[:, s.row])
            ex.row("embark.fwd", g, e * w * u[:, s.row])
    if not plan.hierarchical:  # every source's partial sums of an owner's RB shards, and their gradients back
        ex.block("embark.fwd", e * np.outer(rb_width, b))
        ex.block("embark.bwd", e * np.outer(b, rb_width))
    else:  # RB partial sums: reduced inside the node to the serving peer, then one message per rail
        N = G // L
        Dn = np.array([rb_width[n * L] for n in range(N)])
        served = np.array([b[q::L].sum() for q in range(L)])  # samples of the sources whose local rank is q
        intra_f, intra_b = np.zeros((G, G)), np.zeros((G, G))
        rail_f, rail_b = np.zeros((G, G)), np.zeros((G, G))
        for g in range(G):
            node, lr = divmod(g, L)
            peers = node * L + np.arange(L)
            intra_f[g, peers] = e * Dn[node] * served
            intra_b[g, peers] = e * Dn[node] * served[lr]
            rails = np.arange(N) * L + lr
            rail_f[g, rails] = e * Dn[node] * b[rails]
            rail_b[g, rails] = e * b[g] * Dn
        ex.block("embark.fwd.intra", intra_f)
        ex.block("embark.bwd.intra", intra_b)
        ex.block("embark.fwd.rail", rail_f)
        ex.block("embark.bwd.rail", rail_b)
    ex.ring("emb.dp", 4 * sum(tables[t].num_embeddings * tables[t].dim for t in plan.dp))


def embark_lookups(tables: Sequence[TableSpec], plan, keys: Keys) -> np.ndarray:
    """The rows each rank's stores look up in one EMBark step (their work reports' nnz): its DP tables' local
    lookups, every source's keys on its RB shards, and the distinct keys of its UB shards over the global batch
    (the owner deduplicates across sources and looks each up once)."""
    from impls.embark.shards import Cluster

    out = keys.lookups()[:, list(plan.dp)].sum(1) if plan.dp else np.zeros(plan.world_size)
    rb = {p.table for p in plan.mp if p.cluster == Cluster.RB}
    for s in plan.shards():
        if s.table in rb:
            out[s.gpu] += keys.shard_keys(s.table, s.rows)[0][:, s.row].sum()
        else:
            out[s.gpu] += keys.union_keys(s.table, s.rows)[s.row]
    return out


class SampledKeys:
    """Lookups and shard keys counted on the ranks' local batches (SparseFeatures, one per rank)."""

    def __init__(self, local_batches: Sequence) -> None:
        self.ids = [[loc.table(t)[0] for t in range(loc.num_tables)] for loc in local_batches]

    def lookups(self) -> np.ndarray:
        return np.array([[float(v.numel()) for v in row] for row in self.ids])

    def shard_keys(self, table: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
        k = np.zeros((len(self.ids), rows))
        u = np.zeros((len(self.ids), rows))
        for src, row in enumerate(self.ids):
            v = row[table]
            k[src] = np.bincount((v % rows).numpy(), minlength=rows)
            u[src] = np.bincount((v.unique() % rows).numpy(), minlength=rows)
        return k, u

    def union_keys(self, table: int, rows: int) -> np.ndarray:
        import torch

        v = torch.cat([row[table] for row in self.ids]).unique()
        return np.bincount((v % rows).numpy(), minlength=rows).astype(np.float64)


class ExpectedKeys:
    """Lookups and shard keys expected under the synthetic generator's id law: ``lookups[s][t]`` given; a row
    shard's share from the law itself, the first HEAD ranks one by one (each rank's id through the spec's own
    rank -> id map, ``maps[t]``: a scattered table's Bijection, None for ranked ids) and the rest split evenly:
    a hot id lands on one shard, and that shard looks it up for every draw."""

    HEAD = 1 << 16

    def __init__(self, tables: Sequence[TableSpec], lookups: Sequence[Sequence[float]], alpha: float,
                 maps: Sequence | None = None) -> None:
        self.lk, self.tables, self.alpha = np.asarray(lookups, dtype=np.float64), tables, alpha
        self.maps = list(maps) if maps is not None else [None] * len(tables)
        self._heads: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._shares: dict[tuple[int, int, float], tuple[np.ndarray, np.ndarray]] = {}
        self._per_source: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._pmf: dict[int, np.ndarray] = {}  # the head's probabilities, by the table's rows
        self._unique: dict[tuple[int, float], float] = {}

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
            if rows not in self._pmf:
                self._pmf[rows] = np.diff(rank_cdf(rows, self.alpha, np.arange(h + 1, dtype=np.float64)))
            p = self._pmf[rows]
            ranks = np.arange(h, dtype=np.int64)
            m = self.maps[table]
            self._heads[table] = ((ranks if m is None else np.asarray(m(ranks))).astype(np.int64), p)
        return self._heads[table]

    def _share(self, table: int, rows: int, draws: float) -> tuple[np.ndarray, np.ndarray]:
        """([rows], [rows]): expected keys and distinct keys of ``draws`` ids of ``table`` on each row shard."""
        key = (table, rows, draws)
        if key not in self._shares:
            from impls.work.index_law import expected_groups, hit

            # distinct ids from the sampler's own CDF (groups of one id): the head below is summed from it too
            rows_t = self.tables[table].num_embeddings
            if (rows_t, draws) not in self._unique:
                self._unique[rows_t, draws] = expected_groups(rows_t, draws, self.alpha, 1, "ranked")
            total_u = self._unique[rows_t, draws]
            if rows == 1:
                self._shares[key] = (np.array([draws]), np.array([total_u]))
            else:
                ids, p = self._head(table)
                h = hit(p, draws)
                shard = ids % rows
                keys = draws * (np.bincount(shard, p, rows) + (1.0 - p.sum()) / rows)
                self._shares[key] = (keys, np.bincount(shard, h, rows) + (total_u - h.sum()) / rows)
        return self._shares[key]

    def lookups(self) -> np.ndarray:
        return self.lk

    def shard_keys(self, table: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
        key = (table, rows)
        if key not in self._per_source:
            col = self.lk[:, table]
            draws = np.unique(col)
            shares = {d: self._share(table, rows, float(d)) for d in draws}
            self._per_source[key] = (np.stack([shares[d][0] for d in col]), np.stack([shares[d][1] for d in col]))
        return self._per_source[key]

    def union_keys(self, table: int, rows: int) -> np.ndarray:
        return self._share(table, rows, float(self._totals[table]))[1]

    @property
    def _totals(self) -> np.ndarray:
        if not hasattr(self, "_total_lookups"):
            self._total_lookups = self.lk.sum(0)
        return self._total_lookups


def mlp(ex: Exchange, mlp_params: int) -> None:
    """The DLRM MLPs' gradient all-reduce (fp32)."""
    ex.ring("mlp.dp", 4 * mlp_params)


def sharding(system: str, options: Mapping, world_size: int, tables: Sequence[TableSpec],
             costs: Sequence[float] | None = None, seed: int = 0) -> tuple[dict, list[list[int]] | None]:
    """``system``'s distributed options (its dist_defaults overridden by ``options``, as build_sharded takes them)
    and, table-wise, the tables each rank owns (plan.place_tables; EcoRec's greedy placement balances ``costs``,
    its unique ids per table of a sampled global batch); data-parallel: None."""
    from impls.registry import get_impl
    from impls.sharding.build import DIST_KEYS
    from impls.sharding.plan import place_tables

    cls = get_impl(system)
    dist_opts = {**cls.dist_defaults, **{k: options[k] for k in DIST_KEYS if k in options}}
    if dist_opts["sharding"] == "data-parallel":
        return dist_opts, None
    how = dist_opts.get("placement", "sequential")
    if how == "greedy" and costs is None:
        raise ValueError(f"{system}: greedy placement balances per-table costs; give them (costs=)")
    local = {k: v for k, v in options.items() if k not in DIST_KEYS}
    owned = place_tables(costs if costs is not None else [1.0] * len(tables), world_size, how,
                         cls.table_param_bytes(tables, local), dist_opts.get("capacity_bytes"), seed,
                         [t.name for t in tables])
    return dist_opts, owned


def system_exchange(system: str, tables: Sequence[TableSpec], options: Mapping, sizes: Sequence[int], keys: Keys,
                    costs: Sequence[float] | None = None, plan=None, mlp_params: int = 0, seed: int = 0) -> Exchange:
    """One step's exchanges of ``system`` over ``len(sizes)`` ranks with local batches ``sizes`` (sharding()
    says how it shards). EMBark takes its ``plan``."""
    from impls.registry import get_impl
    from impls.sharding.build import DIST_KEYS

    G = len(sizes)
    ex = Exchange(G)
    if system == "embark":
        if plan is None:
            raise ValueError("embark's exchange follows a plan (impls/embark/planning.plan_for)")
        embark(ex, tables, plan, sizes, keys, fp16=bool(options.get("fp16_comm")))
    elif G > 1:
        dist_opts, owned = sharding(system, options, G, tables, costs, seed)
        if owned is None:
            local = {k: v for k, v in options.items() if k not in DIST_KEYS}
            data_parallel(ex, sum(get_impl(system).table_param_bytes(tables, local)))
        else:
            micro = int(dist_opts.get("pipeline_micro_batches", 4)) if dist_opts.get("pipeline") == "batch" else 1
            table_wise(ex, tables, owned, sizes, keys, micro)
    if G > 1:
        mlp(ex, mlp_params)
    return ex
