"""The EMBark planner's search on the calibrated cost model (calibrated.py): every plan it could propose is a
candidate, and the one with the smallest predicted step wins, so the planner never picks a plan it predicts slower
than a simple one. Candidates:

  round_robin, table_row_wise, uniform   the simple plans (every table reduction-based)
  column_wise                           every table's columns spread over the ranks (as many column groups as
                                        divide its width, up to the world size)
  data_parallel                         every table replicated, where that fits the memory cap
  unique_based                          every table unique-based over every rank
  hugectr, hugectr_rb                   HugeCTR's greedy (its cost function), with its cluster rules and without
  balanced                              whole tables, the most expensive first, each on the rank whose predicted
                                        compute is smallest (longest-processing-time, on the calibrated terms)

then the best candidate is improved one table at a time: each table (the most expensive first) tries the other
clusters (DP where it fits, UB over every rank, RB on the least loaded rank) and keeps a move that lowers the
predicted step. DP and UB are thus chosen by the calibrated cost (all-reduce and dedup included), not by bytes.
A plan the search made (HugeCTR's, balanced, anything improved, any plan with DP or UB tables) runs only when its
predicted gain is larger than the model can resolve: it must be predicted faster than the best simple all-RB plan
(``SAFE``) by more than the calibration's worst error at this world size (the profile's ``engine_fit``), else
that simple plan runs (the record's ``not_worth_its_risk`` names the plan set aside). A planner that cannot tell
two plans apart keeps the one anyone would propose, so it never loses to it by more than the noise. The worst
error, not the median: with the median as the margin, a searched plan predicted faster than round_robin by more
than it measured slower (recsys24 on the reference CPU, DCNv2 at 4 ranks): a median-sized margin lets through gains
the model cannot vouch for. On a machine the model fits well the margin is small and the search acts."""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from impls.api import TableSpec
from impls.embark.calibrated import Breakdown, Profile, TableLoad, Tally
from impls.embark.cost import CostModel
from impls.embark.planner import PlanError, assign_clusters, embark_plan, round_robin, table_row_wise, uniform_plan
from impls.embark.shards import Cluster, Plan, TablePlacement


@dataclasses.dataclass
class Search:
    """What the search needs to score a plan: the tables, their loads, the profile, the batch and storage, and the
    HugeCTR model for the memory cap (and for its own greedy)."""

    tables: Sequence[TableSpec]
    loads: Sequence[TableLoad]
    profile: Profile
    model: CostModel
    storage: str
    elem_bytes: int = 4

    def tally(self, plan: Plan) -> Tally:
        return Tally.of(plan, self.tables, self.loads, self.profile, self.model.batch_size, self.storage,
                        self.elem_bytes, shard_bytes=self.model.shard_bytes)

    def judge(self, tally: Tally) -> Breakdown | None:
        """The predicted step of what ``tally`` holds, or None when a rank's memory exceeds the cap."""
        if max(tally.mem) > self.model.bucket_cap():
            return None
        return tally.breakdown()

    def score(self, plan: Plan) -> Breakdown | None:
        """The predicted step, or None when the plan does not fit the memory cap."""
        return self.judge(self.tally(plan))

    def table_weight(self, t: int) -> float:
        """A whole table's share of a rank's step when RB on it (lookups both ways, no fixed costs)."""
        spec, ld, B = self.tables[t], self.loads[t], self.model.batch_size
        keys = B * ld.keys_per_sample
        uniq = keys * ld.unique_global
        per = self.profile.lookup.get(self.storage)
        if per is None:
            return self.profile.lookup_s(self.storage, "fwd", 1, 1, 1, 1, 1, 1)  # raises the profile's clear error
        w = 4 * spec.dim
        return sum(x.at(B, keys, uniq, keys * w, uniq * w, B * w) - x.fixed_s for x in per.values())


SAFE = ("round_robin", "table_row_wise", "uniform", "column_wise")  # the simple all-RB plans: the margin's fallbacks


def all_rb(plan: Plan) -> bool:
    """Every table reduction-based (no DP replicas, no UB shards)."""
    return not plan.dp and all(x.cluster is Cluster.RB for x in plan.mp)


def _plan(model: CostModel, dp, mp, name: str) -> Plan:
    return Plan(model.world_size, model.gpus_per_node, tuple(sorted(dp)), tuple(sorted(mp, key=lambda p: p.table)),
                name)


def column_wise(tables: Sequence[TableSpec], model: CostModel) -> Plan:
    """Each table cut into the most column groups (a power of two up to the world size) its width divides into,
    widths of at least 4, the groups on consecutive ranks starting where the previous table ended."""
    G, nxt, mp = model.world_size, 0, []
    for t, spec in enumerate(tables):
        c = 1
        while 2 * c <= G and spec.dim % (2 * c) == 0 and spec.dim // (2 * c) >= 4:
            c *= 2
        mp.append(TablePlacement(t, tuple((nxt + k) % G for k in range(c)), c, Cluster.RB))
        nxt = (nxt + c) % G
    return _plan(model, (), mp, "column_wise")


def balanced(tables: Sequence[TableSpec], search: Search) -> Plan:
    """Whole RB tables, the heaviest first, each on the rank with the least predicted work that has room."""
    model = search.model
    G, cap = model.world_size, model.bucket_cap()
    load, mem, mp = [0.0] * G, [0.0] * G, []
    for t in sorted(range(len(tables)), key=lambda t: (-search.table_weight(t), t)):
        size = model.shard_bytes(tables[t], 1, 1)
        fits = [g for g in range(G) if mem[g] + size <= cap] or list(range(G))  # no room: the score says OOM
        g = min(fits, key=lambda g: (load[g], g))
        load[g] += search.table_weight(t)
        mem[g] += size
        mp.append(TablePlacement(t, (g,), 1, Cluster.RB))
    return _plan(model, (), mp, "balanced")


def candidates(tables: Sequence[TableSpec], search: Search) -> list[Plan]:
    model, T = search.model, len(tables)
    every = list(range(T))
    out = [round_robin(tables, model, [], [], every), table_row_wise(tables, model, [], [], every),
           uniform_plan(every, model, [], []), column_wise(tables, model), balanced(tables, search)]
    if model.world_size > 1:
        out.append(_plan(model, every, (), "data_parallel"))
        out.append(_plan(model, (), [TablePlacement(t, tuple(range(model.world_size)), 1, Cluster.UB) for t in every],
                         "unique_based"))
    for name, clusters in (("hugectr", True), ("hugectr_rb", False)):
        dp, ub, rb = assign_clusters(tables, model) if clusters else ([], [], every)
        try:
            out.append(dataclasses.replace(embark_plan(tables, model, dp, ub, rb), name=name, notes={}))
        except PlanError:
            pass  # HugeCTR's greedy found nothing under the cap: the other candidates stand
    return out


def _alternatives(t: int, now: TablePlacement | None, G: int, compute: Sequence[float]) -> list[TablePlacement | None]:
    """Table t's other clusters: DP (None), UB over every rank, or RB whole on the least loaded rank."""
    out: list[TablePlacement | None] = []
    if now is not None and G > 1:
        out.append(None)
    if (now is None or now.cluster is not Cluster.UB) and G > 1:
        out.append(TablePlacement(t, tuple(range(G)), 1, Cluster.UB))
    if now is None or now.cluster is not Cluster.RB or len(now.gpus) > 1:
        g = min(range(G), key=lambda g: (compute[g], g))
        out.append(TablePlacement(t, (g,), 1, Cluster.RB))
    return out


def improve(plan: Plan, score: Breakdown, search: Search, rounds: int = 1) -> tuple[Plan, Breakdown, int]:
    """One table at a time (heaviest first), the move to another cluster that lowers the predicted step most, kept;
    ``rounds`` passes (fewer when a pass moves nothing). Each try updates one tally by the table's shards only."""
    G = plan.world_size
    tally = search.tally(plan)
    where: dict[int, TablePlacement | None] = {t: None for t in plan.dp}
    where.update({p.table: p for p in plan.mp})

    def put(p: TablePlacement | None, t: int, sign: int) -> None:
        if p is None:
            tally.replicate(t, sign)
        else:
            tally.place(p, sign)

    order = sorted(range(len(search.tables)), key=lambda t: (-search.table_weight(t), t))
    moves = 0
    for _ in range(rounds):
        moved = False
        for t in order:
            now = where[t]
            put(now, t, -1)
            best, best_score = now, score
            for alt in _alternatives(t, now, G, score.rank_compute_s):
                put(alt, t, +1)
                s = search.judge(tally)
                put(alt, t, -1)
                if s is not None and s.total_s < best_score.total_s * (1 - 1e-9):
                    best, best_score = alt, s
            put(best, t, +1)
            if best is not now:
                where[t], score = best, best_score
                moves += 1
                moved = True
        if not moved:
            break
    dp = [t for t, p in where.items() if p is None]
    return _plan(search.model, dp, [p for p in where.values() if p is not None], plan.name), score, moves


def calibrated_plan(tables: Sequence[TableSpec], search: Search) -> Plan:
    """The candidate with the smallest predicted step, improved table by table; its notes list every candidate's
    prediction and the chosen plan's breakdown."""
    if search.model.num_nodes > 1:
        raise ValueError(f"the calibrated cost model measures one node; this world has {search.model.num_nodes} "
                         "nodes: plan it on HugeCTR's cost function (-o embark.cost=hugectr)")
    scored: list[tuple[Plan, Breakdown]] = []
    for plan in candidates(tables, search):
        plan.validate(tables)
        s = search.score(plan)
        if s is not None:
            scored.append((plan, s))
    if not scored:
        raise PlanError(f"no candidate plan fits {search.model.bucket_cap() / 2**30:.1f} GiB per rank")
    start, start_score = min(scored, key=lambda x: x[1].total_s)
    plan, score, moves = improve(start, start_score, search)
    # the model's own error decides whether a plan the search made is worth its risk: it must beat the best simple
    # all-RB candidate by more than the calibration's worst error at this world size, else that candidate runs
    margin = search.profile.model_error(search.model.world_size)
    simple = [(p, s) for p, s in scored if p.name in SAFE and all_rb(p)]
    kept = None
    if not (start.name in SAFE and moves == 0) and simple:
        best, best_score = min(simple, key=lambda x: x[1].total_s)
        if score.total_s > (1 - margin) * best_score.total_s:
            kept = {"plan": plan.name, "moves": moves, "predicted_ms": score.total_s * 1e3, "dp": len(plan.dp),
                    "ub": sum(x.cluster is Cluster.UB for x in plan.mp)}
            start, plan, score, moves = best, best, best_score, 0
    plan = dataclasses.replace(plan, name="embark", notes={}).validate(tables)
    plan.notes.update({
        "cost": "calibrated", "profile": search.profile.path, "profile_sha": search.profile.digest,
        "start": start.name, "moves": moves, "margin": margin, "not_worth_its_risk": kept,
        "predicted": score.to_dict(),
        "candidates": {p.name: s.total_s * 1e3 for p, s in scored},
    })
    return plan


def notes_for(plan: Plan, search: Search) -> dict[str, Any]:
    """A plan's calibrated prediction (any strategy), for its record."""
    out: dict[str, Any] = {"profile": search.profile.path, "profile_sha": search.profile.digest}
    try:
        s = search.score(plan)
    except ValueError as exc:  # a hierarchical plan: no calibrated terms for it
        return {**out, "predicted": None, "not_predicted": str(exc)}
    return {**out, "predicted": s.to_dict() if s is not None else None}
