"""EMBark's 3D shard specs, cost model and greedy planner (HugeCTR's embedding-collection planner)."""
import itertools

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.api import TableSpec
from impls.data.zipf import expected_unique
from impls.embark.cost import HARDWARE, CostModel, evaluate
from impls.embark.planner import assign_clusters, make_plan
from impls.embark.shards import Plan, Shard, TablePlacement, check_coverage, shard_rows

HW = HARDWARE["dgx-h100"]


def test_cyclic_rows_and_cells_covered_once():
    tables = [TableSpec("a", 10, 8), TableSpec("b", 7, 4)]
    p = TablePlacement(0, (3, 1, 0, 2, 5, 4), c=2)  # 2 column groups of 3 row shards
    plan = Plan(6, 2, dp=(1,), mp=(p,)).validate(tables)
    # every (row, column) cell of table a exactly once, rows = j mod 3, columns in blocks of 4
    seen = [[0] * 8 for _ in range(10)]
    for s in plan.shards():
        for row in range(s.row, 10, s.rows):
            for col in range(s.col * 4, (s.col + 1) * 4):
                seen[row][col] += 1
    assert all(v == 1 for line in seen for v in line)
    assert [shard_rows(10, 3, j) for j in range(3)] == [4, 3, 3]
    assert p.owner(7, col=0) == 1 and p.owner(7, col=1) == 5  # key 7 -> row shard 1 of each column group
    with pytest.raises(ValueError, match="covered twice"):
        check_coverage(tables, [Shard(0, 0, 2, 0, 1, 0), Shard(0, 0, 2, 0, 1, 1)])
    with pytest.raises(ValueError, match="missing"):
        check_coverage(tables, [Shard(0, 0, 2, 0, 1, 0)])
    with pytest.raises(ValueError, match="does not split into 3 columns"):
        Plan(3, 3, dp=(1,), mp=(TablePlacement(0, (0, 1, 2), c=3),)).validate(tables)
    with pytest.raises(ValueError, match="in no cluster"):
        Plan(6, 2, mp=(p,)).validate(tables)
    with pytest.raises(ValueError, match="placed twice"):
        Plan(6, 2, dp=(0, 1), mp=(p,)).validate(tables)
    with pytest.raises(ValueError, match="two of its shards on one GPU"):
        Plan(2, 2, dp=(1,), mp=(TablePlacement(0, (1, 1)),)).validate(tables)


def test_cost_model_hand_cases():
    t = [TableSpec("a", 1000, 64, hotness=10)]
    m = CostModel(HW, 2, 2, batch_size=100, w_s=4, rho=80)
    one = evaluate(Plan(2, 2, mp=(TablePlacement(0, (0,)),)), t, m)
    assert one.comp == [4 * 100 * 10 * 64, 0] and one.comm == [80 * 100 * 64, 0]
    rows = evaluate(Plan(2, 2, mp=(TablePlacement(0, (0, 1)),)), t, m)  # r = 2: compute halves, comm stays
    assert rows.comp == [2 * 100 * 10 * 64] * 2 and rows.comm == [80 * 100 * 64] * 2
    cols = evaluate(Plan(2, 2, mp=(TablePlacement(0, (0, 1), c=2),)), t, m)  # c = 2: both halve per shard
    assert cols.comp == [2 * 100 * 10 * 64] * 2 and cols.comm == [40 * 100 * 64] * 2
    assert cols.bytes == [1000 * 32 * 4] * 2  # each GPU holds every row of half the columns
    h = CostModel(HW, 4, 2, batch_size=100, w_s=4, rho=80, hierarchical=True)
    hier = evaluate(Plan(4, 2, mp=(TablePlacement(0, (0, 1)),), hierarchical=True), t, h)  # one node shard
    assert hier.comp == [4 * 100 * 10 * 64 / 2, 0] and hier.comm == [1.5 * 80 * 100 * 64 / 2, 0]
    assert one.step_s == pytest.approx(one.max_cost * 4 / HW.mem_bw)


def test_expected_unique_matches_the_exact_sum():
    import numpy as np

    for rows, n, a in [(1000, 500, 1.1), (50_000, 20_000, 0.9), (3, 100, 1.1)]:
        p = np.arange(1, rows + 1, dtype=float) ** -a
        p /= p.sum()
        exact = float((1 - (1 - p) ** n).sum())
        assert expected_unique(rows, n, a) == pytest.approx(exact, rel=0.02)


def test_cluster_thresholds_follow_the_sort_keys():
    tables = [TableSpec(f"t{i}", v, 16, hotness=h) for i, (v, h) in enumerate(
        [(100, 1), (100, 5), (10_000, 1), (50, 2), (1_000_000, 30), (1_000_000, 2)])]
    m = CostModel(HW, 8, 8, 8192 * 8)
    dp, ub, rb = assign_clusters(tables, m, dp_tables=2, ub_tables=2)
    assert dp == [1, 3]  # smallest V*d: t3 (50 rows), then t0 / t1 tie on size -> the hotter t1
    assert ub == [0, 2] and rb == [4, 5]  # lowest hotness (1), then the smaller table; the rest RB
    dp, ub, rb = assign_clusters(tables, m)  # the cost rules
    assert set(dp) >= {0, 1, 3} and 4 in rb
    assert not set(dp) & set(ub) and sorted(dp + ub + rb) == list(range(6))


def _random_tables(draw_sizes):
    return [TableSpec(f"t{i}", v, d, hotness=h) for i, (v, d, h) in enumerate(draw_sizes)]


TABLES = st.lists(st.tuples(st.integers(10, 10**6), st.sampled_from([16, 32, 64, 128]), st.integers(1, 100)),
                  min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(TABLES, st.sampled_from([(1, 4), (2, 2), (2, 4), (4, 2)]), st.booleans())
def test_planner_invariants(sizes, shape, column_wise):
    tables = _random_tables(sizes)
    N, L = shape
    m = CostModel(HW, N * L, L, 1024 * N * L, mem_cap=float(sum(t.dense_bytes for t in tables)))
    plan, _ = make_plan(tables, m, "embark", column_wise=column_wise)
    again, _ = make_plan(tables, m, "embark", column_wise=column_wise)
    assert plan == again  # deterministic
    plan.validate(tables)  # coverage: every table once, every cell once
    ev = evaluate(plan, tables, m)
    assert not ev.oom
    for p in plan.mp:
        assert len(set(p.gpus)) == len(p.gpus)  # one shard of a table per GPU
        for x in (p.r, p.c):
            assert x & (x - 1) == 0  # powers of two (UB spans all GPUs: a power of two here)
    # the chosen plan is no worse than the uniform plan, one of the candidates it chooses from, when that fits
    # (table-wise round robin is not a candidate: the greedy search is not guaranteed to beat it)
    o, _ = make_plan(tables, m, "uniform", clusters=True)
    eo = evaluate(o, tables, m)
    if not eo.oom and not plan.hierarchical:
        assert ev.max_cost <= eo.max_cost * (1 + 1e-9)


def _brute_force(tables, m, splits=(1, 2, 4), fixed=None):
    """The least max bucket cost over every row split in ``splits`` (c = 1, all tables RB, flat), or only the splits
    ``fixed`` (one r per table), and every placement with at most one shard of a table per bucket: branch and bound
    over the shards, largest first."""
    G = m.world_size
    best = float("inf")
    choices = [[r] for r in fixed] if fixed is not None else [[r for r in splits if r <= G] for _ in tables]
    for rs in itertools.product(*choices):
        shards = sorted(((sum(m.shard_cost(t, r, 1)), i) for i, (t, r) in enumerate(zip(tables, rs))
                         for _ in range(r)), reverse=True)
        load = [0.0] * G
        holds = [set() for _ in range(G)]

        def place(k):
            nonlocal best
            if k == len(shards):
                best = min(best, max(load))
                return
            w, i = shards[k]
            tried = set()
            for g in range(G):
                if i in holds[g] or load[g] + w >= best or (load[g], frozenset(holds[g])) in tried:
                    continue
                tried.add((load[g], frozenset(holds[g])))  # symmetric buckets: try one of them
                load[g] += w
                holds[g].add(i)
                place(k + 1)
                load[g] -= w
                holds[g].discard(i)

        place(0)
    return best


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.integers(100, 10**5), st.sampled_from([16, 32, 64]), st.integers(1, 200)),
                min_size=1, max_size=5))
def test_greedy_against_brute_force(sizes):
    tables = _random_tables(sizes)
    m = CostModel(HW, 4, 4, 4096, mem_cap=1e12)
    plan, _ = make_plan(tables, m, "embark", clusters=False, max_iter=20)
    got = evaluate(plan, tables, m).max_cost
    assert got >= _brute_force(tables, m) * (1 - 1e-9)
    # HugeCTR's split order follows its hotness rank, not the cost (proposer.py: hot_rank), so the splits it settles
    # on need not be the best ones (tables of 100 rows, dims 16 and 32, hotness 5 and 1: 1.45x the best plan); the
    # placement of its shards is greedy, largest first, and within LPT's 4/3 of the best placement of those shards
    r = {p.table: p.r for p in plan.mp}
    best_of_its_splits = _brute_force(tables, m, fixed=[r[t] for t in range(len(tables))])
    assert got <= 4 / 3 * best_of_its_splits * (1 + 1e-9), (got / best_of_its_splits, plan)


def test_baselines():
    tables = [TableSpec(f"t{i}", 1000 * (i + 1), 32, hotness=2) for i in range(5)]
    m = CostModel(HW, 4, 2, 4096, mem_cap=1e9)
    trw, _ = make_plan(tables, m, "table_row_wise")
    assert [p.gpus for p in trw.mp] == [(0, 1), (2, 3), (0, 1), (2, 3), (0, 1)] and trw.hierarchical
    rr, _ = make_plan(tables, m, "round_robin")
    assert [p.gpus for p in rr.mp] == [(0,), (1,), (2,), (3,), (0,)]
    uni, _ = make_plan(tables, m, "uniform")
    assert all(p.gpus == (0, 1, 2, 3) for p in uni.mp) and not uni.dp
    big = [TableSpec("huge", 10**7, 64)]
    trw, _ = make_plan(big, CostModel(HW, 4, 2, 4096, mem_cap=1e9), "table_row_wise")
    assert trw.mp[0].gpus == (0, 1, 2, 3)  # larger than a node's memory: over every GPU


def test_plan_cli():
    from reproduce.cli import cli

    res = CliRunner().invoke(cli, ["plan", "--workload", "t180", "--nodes", "2", "--gpus-per-node", "8"])
    assert res.exit_code == 0, res.output
    assert "predicted embedding step" in res.output and "table_row_wise" in res.output
    res = CliRunner().invoke(cli, ["plan", "--workload", "nope", "--nodes", "2"])
    assert res.exit_code != 0 and "unknown data preset" in res.output


def test_tt_storage_in_the_cost_model():
    """TT shards: far fewer bytes (a plan fits where dense cannot) and more compute per lookup."""
    from impls.embark.planner import PlanError

    tables = [TableSpec(f"t{i}", 5_000_000, 64, hotness=4) for i in range(4)]
    dense = CostModel(HW, 2, 2, 8192, mem_cap=1e9)
    tt = CostModel(HW, 2, 2, 8192, mem_cap=1e9, storage="tt", tt_ranks=16)
    with pytest.raises(PlanError, match="no plan fits"):
        make_plan(tables, dense, "embark", clusters=False)
    plan, _ = make_plan(tables, tt, "embark", clusters=False)
    assert not evaluate(plan, tables, tt).oom
    assert tt.shard_bytes(tables[0], 1, 1) * 100 < dense.shard_bytes(tables[0], 1, 1)
    assert tt.shard_cost(tables[0], 1, 1)[0] > dense.shard_cost(tables[0], 1, 1)[0]


def test_fidelity_to_hugectr_cost_model_and_tie_order():
    """HugeCTR's planner.py / cost model: caps in GiB, V / r rows per shard, equal-cost shards placed larger first,
    and node buckets (hierarchical RB) whenever there is more than one node."""
    from impls.embark.partitioner import ShardAssignment, Unplaceable, place
    from impls.embark.proposer import Splits

    assert HW.mem_cap == 60 * 2**30 and HARDWARE["cpu-gloo"].mem_cap == 4 * 2**30
    m = CostModel(HW, 4, 4, 1024, w_s=4, rho=80)
    t = TableSpec("t", 10, 8)
    assert m.shard_bytes(t, 4, 1) == 10 / 4 * 8 * 4  # the mean rows V / r, not the largest shard's 3
    # equal cost (same dim and hotness), different sizes: the larger table's shard is placed first (bucket 0)
    small, big = TableSpec("small", 100, 16, hotness=2), TableSpec("big", 10_000, 16, hotness=2)
    assert m.shard_cost(small, 1, 1) == m.shard_cost(big, 1, 1)
    res = place([small, big], [0, 1], m, Splits.whole([0, 1]), 0.0)
    assert isinstance(res, ShardAssignment) and res.where[1][(0, 0)] == 0 and res.where[0][(0, 0)] == 1
    # a shard that fits nowhere is a typed answer naming its table
    tight = CostModel(HW, 4, 4, 1024, mem_cap=1000.0)
    assert place([small, big], [0, 1], tight, Splits.whole([0, 1]), 0.0) == Unplaceable(1)
    # two nodes: the planner's plan is hierarchical; one node: flat
    tables = [TableSpec(f"t{i}", 10**5, 64, hotness=5) for i in range(4)]
    two = CostModel(HW, 8, 4, 8 * 1024)
    assert make_plan(tables, two, "embark")[0].hierarchical
    one = CostModel(HW, 4, 4, 4 * 1024)
    assert not make_plan(tables, one, "embark")[0].hierarchical
