"""EMBark's sharding planner (HugeCTR's embedding-collection benchmark planner, as EMBark describes it) and its
baselines.

Cluster assignment: data-parallel for tables small enough that all-reducing their dense gradient costs less
than exchanging their pooled rows (2 (G-1)/G * V_t <= b, the local batch, within ``dp_share`` of the memory cap), unique-based
for duplicate-rich low-hotness tables whose expected unique vectors per sample are fewer than the one partial
sum RB ships at least (h_t * u_t < 1), reduction-based for the rest. Given thresholds instead (``dp_tables`` / ``ub_tables``), the
smallest tables (V*d, then higher hotness) go to DP and then the lowest-hotness (h, then V*d) to UB, as HugeCTR's
generate_plan does.

Split along TorchRec's lines: the proposer (proposer.py: each RB table's split, which table to split next), the
partitioner (partitioner.py: greedy placement of the shards, a typed ShardAssignment or Unplaceable) and the evaluator
(cost.evaluate). Greedy search: start with every table whole; place; record the candidate; split the hottest
splittable table (rank d'h/r + 80 d'; 2 r c <= buckets) by doubling r (or, with ``column_wise``, halving d' when
that gives the lower max cost); a shard that fits nowhere splits its own table. Up to ``max_iter`` rounds; the
uniform plan (every table row-sharded on every bucket) is candidate 0; the smallest max cost wins.

Baselines: ``table_row_wise`` (a table larger than a node's memory row-sharded on all GPUs, otherwise table i on
node i mod N row-sharded over its L GPUs; the paper's baseline), ``uniform`` and ``round_robin``."""
from __future__ import annotations

import dataclasses
import time
from typing import Sequence

from impls.api import TableSpec
from impls.embark.cost import CostModel, evaluate
from impls.embark.partitioner import ShardAssignment, place
from impls.embark.proposer import HOWS, Splits, hottest
from impls.embark.shards import Cluster, Plan, TablePlacement

STRATEGIES = ("embark", "table_row_wise", "uniform", "round_robin")


class PlanError(ValueError):
    """No plan satisfies the memory cap."""


def assign_clusters(tables: Sequence[TableSpec], model: CostModel, dp_tables: int | None = None,
                    ub_tables: int | None = None, dp_share: float = 0.25) -> tuple[list[int], list[int], list[int]]:
    """(DP, UB, RB) table indices."""
    G, B = model.world_size, model.batch_size
    idx = list(range(len(tables)))
    size = [t.num_embeddings * t.dim for t in tables]
    if dp_tables is not None or ub_tables is not None:
        by_size = sorted(idx, key=lambda i: (size[i], -tables[i].hotness, i))
        dp = by_size[: dp_tables or 0]
        rest = [i for i in idx if i not in set(dp)]
        ub = sorted(rest, key=lambda i: (tables[i].hotness, size[i], i))[: ub_tables or 0]
    else:
        budget = dp_share * model.cap / model.optimizer_bytes
        dp = []
        for i in sorted(idx, key=lambda i: (size[i], -tables[i].hotness, i)):
            # every bucket all-reduces 2 (G-1)/G V d; RB would cost one bucket B d, i.e. b d per bucket
            if G > 1 and 2 * (G - 1) / G * tables[i].num_embeddings <= B / G and size[i] <= budget:
                dp.append(i)
                budget -= size[i]
        # UB ships ~h*u vectors per sample where RB ships r partial sums (r >= 1): UB wins when h*u < 1
        ub = [i for i in idx if i not in set(dp) and G > 1 and tables[i].hotness * model.unique_fraction(tables[i]) < 1]
    taken = set(dp) | set(ub)
    return sorted(dp), sorted(ub), [i for i in idx if i not in taken]


def _buckets_gpus(model: CostModel, bucket: int) -> list[int]:
    L = model.gpus_per_node
    return list(range(bucket * L, (bucket + 1) * L)) if model.hierarchical else [bucket]


def _to_plan(where, st: Splits, model: CostModel, dp, ub, name: str) -> Plan:
    mp = []
    L = model.gpus_per_node
    for t, cells in where.items():
        r, c = st.r[t], st.c[t]
        if model.hierarchical:  # a node bucket: the shard is row-split over the node's L GPUs
            gpus = tuple(g for k in range(c) for j in range(r) for g in _buckets_gpus(model, cells[(k, j)]))
            mp.append(TablePlacement(t, gpus, c, Cluster.RB))
            continue
        mp.append(TablePlacement(t, tuple(cells[(k, j)] for k in range(c) for j in range(r)), c, Cluster.RB))
    for t in ub:
        mp.append(TablePlacement(t, tuple(range(model.world_size)), 1, Cluster.UB))
    return Plan(model.world_size, L, tuple(dp), tuple(sorted(mp, key=lambda p: p.table)), name, model.hierarchical)


def uniform_plan(rb, model: CostModel, dp, ub, name="uniform") -> Plan:
    G = model.world_size
    mp = [TablePlacement(t, tuple(range(G)), 1, Cluster.RB) for t in rb]
    mp += [TablePlacement(t, tuple(range(G)), 1, Cluster.UB) for t in ub]
    return Plan(G, model.gpus_per_node, tuple(dp), tuple(sorted(mp, key=lambda p: p.table)), name)


def embark_plan(tables: Sequence[TableSpec], model: CostModel, dp: Sequence[int], ub: Sequence[int],
                rb: Sequence[int], max_iter: int | None = None, column_wise: bool = False,
                patience: int = 20) -> Plan:
    """``max_iter``: split rounds (HugeCTR stops at 20; default 20 + 2 per RB table, as one round splits one
    table and every hot table needs its own rounds before the largest bucket gets cheaper); the search also
    stops after ``patience`` rounds without a better candidate."""
    if max_iter is None:
        max_iter = 20 + 2 * len(rb)
    n = model.num_buckets
    base_mem = model.shared_bytes(tables, dp, ub) * (model.gpus_per_node if model.hierarchical else 1)
    candidates: list[tuple[float, int, Plan]] = []
    uni = uniform_plan(rb, model, dp, ub, "uniform")
    ev = evaluate(uni, tables, model)
    if not ev.oom:
        candidates.append((ev.max_cost, 0, uni))
    st = Splits.whole(list(rb))

    def splittable(t):
        return st.can_split(tables[t], t, "row", n) or (column_wise and st.can_split(tables[t], t, "col", n))

    def trial(t, how) -> float:  # the largest bucket cost after this split (inf when it cannot be placed)
        st.split(t, how)
        res = place(tables, rb, model, st, base_mem)
        st.unsplit(t, how)
        return res.max_cost if isinstance(res, ShardAssignment) else float("inf")

    shared = model.shared_cost(tables, dp, ub)
    best, since = float("inf"), 0
    for it in range(1, max_iter + 1):
        res = place(tables, rb, model, st, base_mem)
        if isinstance(res, ShardAssignment):
            cost = res.max_cost + shared
            candidates.append((cost, it, (res.where, st.copy())))
            best, since = (cost, 0) if cost < best * (1 - 1e-9) else (best, since + 1)
            if since >= patience:  # no better candidate for this many rounds
                break
            options = [t for t in rb if splittable(t)]
            if not options:
                break
            t = hottest(tables, options, st)
        else:  # a shard fit nowhere: split its own table
            t = res.table
            if not splittable(t):
                break
        hows = [h for h in HOWS if st.can_split(tables[t], t, h, n) and (h == "row" or column_wise)]
        how = hows[0] if len(hows) == 1 else min(hows, key=lambda h: (trial(t, h), h != "row"))
        st.split(t, how)
    if not candidates:
        raise PlanError(f"no plan fits {model.bucket_cap() / 2**30:.1f} GiB per bucket (even the uniform one)")
    cost, it, chosen = min(candidates, key=lambda c: (c[0], c[1]))
    plan = chosen if isinstance(chosen, Plan) else _to_plan(*chosen, model, dp, ub, "embark")
    plan.notes.update({"candidates": len(candidates), "chosen_iteration": it, "max_cost": cost})
    return plan


def table_row_wise(tables, model: CostModel, dp, ub, rb) -> Plan:
    N, L, G = model.num_nodes, model.gpus_per_node, model.world_size
    mp = []
    for k, t in enumerate(rb):
        whole = tables[t].num_embeddings * tables[t].dim * model.optimizer_bytes
        if whole > model.cap * L:
            gpus = tuple(range(G))
        else:
            node = k % N
            gpus = tuple(range(node * L, (node + 1) * L))
        mp.append(TablePlacement(t, gpus, 1, Cluster.RB))
    mp += [TablePlacement(t, tuple(range(G)), 1, Cluster.UB) for t in ub]
    # row shards inside a node reduce over NVLink first, then cross nodes (TorchRec's TWRW, HugeCTR's hier RB)
    return Plan(G, L, tuple(dp), tuple(sorted(mp, key=lambda p: p.table)), "table_row_wise", N > 1)


def round_robin(tables, model: CostModel, dp, ub, rb) -> Plan:
    mp = [TablePlacement(t, (k % model.world_size,), 1, Cluster.RB) for k, t in enumerate(rb)]
    mp += [TablePlacement(t, tuple(range(model.world_size)), 1, Cluster.UB) for t in ub]
    return Plan(model.world_size, model.gpus_per_node, tuple(dp), tuple(sorted(mp, key=lambda p: p.table)),
                "round_robin")


def make_plan(tables: Sequence[TableSpec], model: CostModel, strategy: str = "embark", *,
              clusters: bool | None = None, dp_tables: int | None = None, ub_tables: int | None = None,
              column_wise: bool = False, max_iter: int | None = None) -> tuple[Plan, float]:
    """The plan and the seconds it took to make. Clusters (DP / UB / RB) are assigned for the EMBark plan; the
    baselines put every table in RB unless ``clusters`` says otherwise."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    t0 = time.perf_counter()
    if clusters is None:
        clusters = strategy == "embark"  # the paper's baseline shards every table one way
    if clusters:
        dp, ub, rb = assign_clusters(tables, model, dp_tables, ub_tables)
    else:
        dp, ub, rb = [], [], list(range(len(tables)))
    if strategy == "embark":
        # more than one node: RB partial sums reduce inside a node first, as HugeCTR's runtime always does there,
        # so the planner plans node buckets with the hierarchical costs
        if model.num_nodes > 1:
            model = dataclasses.replace(model, hierarchical=True)
        plan = embark_plan(tables, model, dp, ub, rb, max_iter, column_wise)
    elif strategy == "uniform":
        plan = uniform_plan(rb, model, dp, ub)
    elif strategy == "round_robin":
        plan = round_robin(tables, model, dp, ub, rb)
    else:
        plan = table_row_wise(tables, model, dp, ub, rb)
    plan.validate(tables)
    return plan, time.perf_counter() - t0
