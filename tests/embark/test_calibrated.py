"""EMBark's calibrated cost model (calibrated.py), the planner's search over every candidate plan (search.py) and the
fits behind a profile (reproduce/harness/calibration_run.py)."""
import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.api import TableSpec
from impls.embark.calibrated import Engine, Line, Lookup, Profile, TableLoad, Tally, predict, table_loads
from impls.embark.cost import HARDWARE, CostModel
from impls.embark.search import SAFE, Search, all_rb, calibrated_plan, candidates
from impls.embark.shards import Cluster, Plan, TablePlacement


def profile(a2a=(1e-3, 1e-9), ar=(2e-3, 2e-9), per_key=1e-7, per_byte=0.0, per_bag=0.0, fixed=0.0, dedup=(0.0, 1e-8),
            pool=(0.0, 0.0), worlds=(2, 4), cores=8, threads=1, engine=(0.0,) * 9, per_out_byte=0.0) -> Profile:
    lk = Lookup(fixed, per_bag, per_key, 0.0, per_byte, 0.0, per_out_byte, 0.0, 2.0**22)
    return Profile("m", "gloo", cores, threads,
                   {"all_to_all": {w: Line(*a2a) for w in worlds}, "all_reduce": {w: Line(*ar) for w in worlds},
                    "all_gather": {w: Line(*ar) for w in worlds}},
                   {"dense": {"fwd": lk, "bwd": lk}, "fbgemm": {"fwd": lk, "bwd": lk}}, Line(*dedup), Line(*pool),
                   engine={w: Engine(*engine) for w in worlds})


def test_profile_round_trip_and_clear_errors(tmp_path):
    p = profile()
    path = tmp_path / "gloo.json"
    path.write_text(json.dumps(p.to_dict()))
    back = Profile.load(path)
    assert back.collectives == p.collectives and back.lookup == p.lookup and back.dedup == p.dedup
    assert back.engine == p.engine
    assert back.path == str(path) and len(back.digest) == 12
    with pytest.raises(ValueError, match="dlrmbench calibrate"):
        Profile.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        Profile.load(bad)
    bad.write_text(json.dumps({**p.to_dict(), "version": 0}))
    with pytest.raises(ValueError, match="version"):
        Profile.load(bad)
    bad.write_text(json.dumps({k: v for k, v in p.to_dict().items() if k != "dedup"}))
    with pytest.raises(ValueError, match="not a calibration profile"):
        Profile.load(bad)
    with pytest.raises(ValueError, match=r"world sizes \[2, 4\], not 8.*--world 8"):
        p.collective_s("all_to_all", 8, 100)
    with pytest.raises(ValueError, match="not 'tt'"):
        p.lookup_s("tt", "fwd", 1, 1, 1, 1, 1, 1)
    bad.write_text(json.dumps({k: v for k, v in p.to_dict().items() if k != "engine"}))  # a version-1 layout
    with pytest.raises(ValueError, match="not a calibration profile"):
        Profile.load(bad)
    # the primitive terms alone (what calibrate fits the engine against) are never a profile to plan on
    bad.write_text(json.dumps({**p.to_dict(), "engine": None}))
    with pytest.raises(ValueError, match="no engine term.*dlrmbench calibrate"):
        Profile.load(bad)
    assert Profile.from_dict({**p.to_dict(), "engine": None}).engine is None
    with pytest.raises(ValueError, match=r"engine at world sizes \[2, 4\], not 8"):
        p.engine_s(8, (0.0,) * 8)


def test_engine_term_by_hand():
    """The engine term of a plan: fixed + per routed key + per output byte + per byte the busiest owner returns + per
    shard + per UB key and occurrence byte + per DP table and byte, from the tally's counts."""
    tables = [TableSpec("a", 100, 8), TableSpec("b", 100, 16), TableSpec("c", 50, 4)]
    loads = [TableLoad(2.0, 0.5, 0.25), TableLoad(1.0, 1.0, 1.0), TableLoad(1.0, 1.0, 1.0)]
    coef = (1e-3, 1e-6, 1e-9, 1e-8, 1e-4, 1e-5, 1e-10, 1e-2, 1e-11)
    p = profile(per_key=0.0, dedup=(0.0, 0.0), a2a=(0.0, 0.0), ar=(0.0, 0.0), engine=coef)
    # a: row-split over both ranks (RB), b: UB over both, c: DP
    plan = Plan(2, 2, dp=(2,), mp=(TablePlacement(0, (0, 1)), TablePlacement(1, (0, 1), cluster="ub")))
    B, b = 64, 32
    tally = Tally.of(plan, tables, loads, p, B, "dense")
    keys = b * 2 * 1 + b * 1 * 1  # every key a source routes (no column split)
    out = b * 8 * 4 + b * 16 * 4
    owner = 2 * (b * 8 * 4 + b * 1 * 1.0 / 2 * 16 * 4)  # each owner: a's partial sums, its half of b's unique keys
    ub_keys, ub_bytes = b * 1 / 2 * 2, b * 1 * 16 * 4 / 2 * 2
    feats = (keys, out, owner, 4, ub_keys, ub_bytes, 1, 50 * 4 * 4)
    assert tally.engine_features() == pytest.approx(feats)
    want = coef[0] + sum(c * x for c, x in zip(coef[1:], feats))
    assert tally.breakdown().engine_s == pytest.approx(want, rel=1e-12)
    assert predict(plan, tables, loads, p, B, "dense").engine_s == pytest.approx(want, rel=1e-12)
    with pytest.raises(ValueError, match="takes 8 features"):
        p.engine[2].at(1.0)
    # the lookups' scale inside the engine's steps multiplies the lookup term only
    lk = profile(per_key=1e-7, dedup=(0.0, 0.0), a2a=(0.0, 0.0), ar=(0.0, 0.0))
    half = dataclasses.replace(lk, engine={w: dataclasses.replace(e, lookup_scale=0.5) for w, e in lk.engine.items()})
    assert predict(plan, tables, loads, half, B, "dense").lookup_s == pytest.approx(
        0.5 * predict(plan, tables, loads, lk, B, "dense").lookup_s)


def test_prediction_by_hand():
    """Two tables round robin on 2 ranks, per-key lookups only: the busiest rank's lookups, four all_to_alls."""
    tables = [TableSpec("a", 100, 8), TableSpec("b", 100, 16)]
    loads = [TableLoad(2.0, 1.0, 1.0), TableLoad(1.0, 1.0, 1.0)]
    p = profile(pool=(0.0, 0.0))
    plan = Plan(2, 2, mp=(TablePlacement(0, (0,)), TablePlacement(1, (1,))))
    B, b = 64, 32
    got = predict(plan, tables, loads, p, B, "fbgemm")
    # rank 0 looks up B * 2 keys of a, rank 1 B * 1 of b; forward and backward each
    assert got.rank_compute_s == pytest.approx([2 * B * 2 * 1e-7, 2 * B * 1e-7])
    assert got.lookup_s == pytest.approx(2 * B * 2 * 1e-7)
    assert got.comm_latency_s == pytest.approx(4 * 1e-3)
    # keys: a source sends rank 0 (b counts + b*2 keys) * 8 bytes and rank 1 (b + b) * 8; the busiest direction is
    # max(sent to the other, received from it) = max over owners of their payload
    keys = max(8 * (b + 2 * b), 8 * (b + b))
    rows = max(b * 8 * 4, b * 16 * 4)  # forward rows back (and the same in backward)
    header = 16
    assert got.comm_bytes_s == pytest.approx(1e-9 * (header + keys + 2 * rows))
    assert got.dp_allreduce_s == 0 and got.dedup_s == 0
    # every table data-parallel: one all-reduce of both tables, local lookups of b keys per sample share
    dp = predict(Plan(2, 2, dp=(0, 1)), tables, loads, p, B, "fbgemm")
    assert dp.dp_allreduce_s == pytest.approx(2e-3 + 2e-9 * (100 * 8 + 100 * 16) * 4)
    assert dp.comm_latency_s == 0 and dp.lookup_s == pytest.approx(2 * (b * 2 + b * 1) * 1e-7)
    # 4 ranks on 2 cores: compute takes turns (x2), collectives were measured at that world size already
    over = predict(Plan(4, 4, mp=(TablePlacement(0, (0,)), TablePlacement(1, (1,)))), tables, loads,
                   profile(cores=2), B, "fbgemm")
    assert over.lookup_s == pytest.approx(2 * 2 * B * 2 * 1e-7)
    # the pooled output's bytes: each owner writes B bags x its table's width (forward; read back in backward)
    wide = predict(plan, tables, loads, profile(per_key=0.0, per_out_byte=1e-9), B, "fbgemm")
    assert wide.rank_compute_s == pytest.approx([2 * B * 8 * 4 * 1e-9, 2 * B * 16 * 4 * 1e-9])
    assert wide.lookup_s == pytest.approx(2 * B * 16 * 4 * 1e-9)
    with pytest.raises(ValueError, match="hierarchical"):
        predict(Plan(4, 2, mp=(TablePlacement(0, (0, 1)),), dp=(1,), hierarchical=True), tables, loads, p, B, "dense")


def test_unique_based_tables_pay_dedup_and_ship_unique_rows():
    tables = [TableSpec("a", 1000, 32)]
    p = profile(per_key=0.0)
    dup = [TableLoad(4.0, 0.25, 0.1)]
    rb = predict(Plan(2, 2, mp=(TablePlacement(0, (0, 1)),)), tables, dup, p, 256, "fbgemm")
    ub = predict(Plan(2, 2, mp=(TablePlacement(0, (0, 1), cluster=Cluster.UB),)), tables, dup, p, 256, "fbgemm")
    assert rb.dedup_s == 0 and ub.dedup_s > 0
    assert ub.comm_bytes_s < rb.comm_bytes_s  # a quarter of the keys are distinct: fewer rows than partial sums


def test_table_loads_from_a_sample_and_from_the_expectation():
    import torch

    from impls.api import SparseFeatures

    tables = [TableSpec("a", 10, 4, hotness=2.0), TableSpec("b", 1000, 4)]
    # 4 samples: table a has ids [1, 1] [1, 2] [3, 3] [4, 5]; table b one id each
    va = torch.tensor([1, 1, 1, 2, 3, 3, 4, 5])
    vb = torch.tensor([7, 7, 8, 9])
    offsets = torch.tensor([0, 2, 4, 6, 8, 9, 10, 11, 12])
    sf = SparseFeatures(torch.cat([va, vb]), offsets, 4)
    got = table_loads(tables, 4, 2, sf)
    assert got[0] == TableLoad(2.0, 2 / 4, 5 / 8)  # local batch = first 2 samples: {1, 2} of 4 keys
    assert got[1] == TableLoad(1.0, 1 / 2, 3 / 4)
    exp = table_loads(tables, 4, 2)
    assert exp[0].keys_per_sample == 2.0 and 0 < exp[0].unique_local <= 1


def _search(tables, p, world, B=512, cap=1e12):
    model = CostModel(HARDWARE["cpu-gloo"], world, world, B, mem_cap=cap)
    return Search(tables, table_loads(tables, B, world), p, model, "fbgemm")


TABLES = st.lists(st.tuples(st.integers(10, 20_000), st.sampled_from([8, 16, 64, 128]), st.integers(1, 30)),
                  min_size=1, max_size=10)
PROFILES = st.builds(
    profile, a2a=st.tuples(st.floats(1e-6, 1e-2), st.floats(1e-11, 1e-8)),
    ar=st.tuples(st.floats(1e-6, 1e-2), st.floats(1e-11, 1e-8)), per_key=st.floats(1e-9, 1e-6),
    per_byte=st.floats(0, 1e-10), per_bag=st.floats(0, 1e-7), fixed=st.floats(0, 1e-3), per_out_byte=st.floats(0, 1e-10),
    dedup=st.tuples(st.floats(0, 1e-4), st.floats(0, 1e-7)), pool=st.tuples(st.just(0.0), st.floats(0, 1e-10)),
    engine=st.tuples(st.floats(0, 1e-2), st.floats(0, 1e-7), st.floats(0, 1e-9), st.floats(0, 1e-9),
                     st.floats(0, 1e-4), st.floats(0, 1e-6), st.floats(0, 1e-9), st.floats(0, 1e-3), st.floats(0, 1e-9)))


@settings(max_examples=40, deadline=None)
@given(TABLES, PROFILES, st.sampled_from([2, 4]), st.sampled_from([0.0, 0.1, 0.3]))
def test_search_never_predicts_worse_than_a_candidate(sizes, p, world, err):
    """The plan it picks is valid, deterministic, fits, and its predicted step is no worse than any simple all-RB
    candidate's (round_robin, table_row_wise, uniform, column_wise): the planner cannot choose a plan it predicts
    slower than a simple one. Against every candidate it is no worse either, unless the search's plan gains less
    than the model's measured error (``err``) over the best simple one: then that simple plan runs."""
    p = dataclasses.replace(p, measured={"engine_fit": {str(world): {"max_rel_err": err}}})
    tables = [TableSpec(f"t{i}", v, d, hotness=h) for i, (v, d, h) in enumerate(sizes)]
    s = _search(tables, p, world)
    plan = calibrated_plan(tables, s)
    assert plan == calibrated_plan(tables, s)
    plan.validate(tables)
    best = s.score(plan)
    assert best is not None and best.total_s == pytest.approx(plan.notes["predicted"]["total_ms"] / 1e3)
    assert plan.notes["margin"] == err
    names, every, simple = set(), [], []
    for cand in candidates(tables, s):
        names.add(cand.name)
        sc = s.score(cand)
        if sc is not None:
            every.append(sc.total_s)
            if cand.name in SAFE and all_rb(cand):
                simple.append(sc.total_s)
    assert best.total_s <= min(simple) * (1 + 1e-9)
    if plan.notes["not_worth_its_risk"] is None:
        assert best.total_s <= min(every) * (1 + 1e-9)
    else:  # set aside: a searched plan predicted within the margin of the best simple one, which runs instead
        assert plan.notes["start"] in SAFE and plan.notes["moves"] == 0 and best.total_s == pytest.approx(min(simple))
        assert plan.notes["not_worth_its_risk"]["predicted_ms"] / 1e3 > (1 - err) * best.total_s * (1 - 1e-9)
    assert {"round_robin", "table_row_wise", "uniform", "column_wise", "balanced", "data_parallel",
            "unique_based"} <= names
    assert set(plan.notes["candidates"]) <= names


def test_search_follows_the_calibrated_terms():
    """Costly collectives and cheap lookups: small tables go data-parallel (no all_to_all at all); costly all-reduce
    and cheap all_to_all: no table is replicated."""
    tables = [TableSpec(f"t{i}", 50, 16, hotness=2) for i in range(4)]
    chatty = calibrated_plan(tables, _search(tables, profile(a2a=(5e-2, 1e-9), ar=(1e-4, 1e-9)), 2))
    assert sorted(chatty.dp) == [0, 1, 2, 3] and not chatty.mp and chatty.notes["not_worth_its_risk"] is None
    # a gain the model cannot resolve (a 99 % worst error over its calibration steps): the best simple plan runs
    sure = profile(a2a=(1e-3, 1e-9), ar=(1e-4, 1e-9))
    assert calibrated_plan(tables, _search(tables, sure, 2)).dp
    unsure = dataclasses.replace(sure, measured={"engine_fit": {"2": {"max_rel_err": 0.99}}})
    careful = calibrated_plan(tables, _search(tables, unsure, 2))
    assert all_rb(careful) and careful.notes["not_worth_its_risk"]["dp"] >= 1
    quiet = calibrated_plan(tables, _search(tables, profile(a2a=(1e-5, 1e-10), ar=(1.0, 1e-6)), 2))
    assert not quiet.dp and quiet.notes["cost"] == "calibrated"
    # a memory cap no replica fits: never data-parallel, whatever the collectives cost
    capped = calibrated_plan(tables, _search(tables, profile(a2a=(5e-2, 1e-9), ar=(1e-4, 1e-9)), 2, cap=50 * 16 * 4 * 3))
    assert len(capped.dp) < 4


def test_nonnegative_fit_recovers_known_terms():
    from reproduce.harness.calibration_run import fit_line, fit_lookup

    pts = [(x, 2e-5 + 3e-10 * x) for x in (64, 1024, 2**16, 2**20, 2**24)]
    line = fit_line(pts)
    assert line.fixed_s == pytest.approx(2e-5, rel=1e-6) and line.per_unit_s == pytest.approx(3e-10, rel=1e-6)
    # lookups: per bag, key, distinct row, row byte, distinct row byte and output byte, the output dearer past 4 MiB
    true = Lookup(1e-5, 2e-9, 5e-9, 3e-8, 1e-11, 4e-11, 3e-11, 1e-10, 2.0**22)
    grid = [{"bags": b, "keys": b * h, "unique": b * h * u, "row_bytes": b * h * d * 4, "unique_bytes": b * h * u * d * 4,
             "out_bytes": b * d * 4} for b in (256, 4096, 16384, 65536) for h in (1, 4, 30) for d in (16, 128) for u in (1, 0.1)]
    for g in grid:
        g["fwd_s"] = true.at(g["bags"], g["keys"], g["unique"], g["row_bytes"], g["unique_bytes"], g["out_bytes"])
    c = fit_lookup(grid, "fwd_s")
    assert c.cache_bytes == true.cache_bytes
    assert c.coef() == pytest.approx(true.coef(), rel=1e-4)
    wide = (4096, 4096, 4096, *(4096 * 512 * 4,) * 3)  # 4,096 bags of a 512-wide table: 8 MiB of output
    assert true.at(*wide) - Lookup(*true.coef(), cache_bytes=2.0**40).at(*wide) == pytest.approx(
        1e-10 * (8 - 4) * 2**20)  # past the 4 MiB cache the output's bytes cost more
    # a term the data cannot support stays at zero rather than going negative
    flat = fit_line([(x, 1e-3) for x in (1, 10, 100)])
    assert flat.per_unit_s >= 0 and flat.fixed_s == pytest.approx(1e-3, rel=1e-6)


def test_engine_fit_recovers_the_residual_of_known_terms():
    """fit_engine fits measured - primitive per feature with the lookups' scale inside the steps, and reports how well
    the whole prediction then matches."""
    import random

    from reproduce.harness.calibration_run import fit_engine

    true = Engine(2e-3, 3e-8, 0.0, 1e-10, 5e-6, 4e-8, 0.0, 1e-4, 2e-10, lookup_scale=0.7)
    rng = random.Random(0)
    pts = []
    for _ in range(30):
        f = [rng.uniform(0, 1e5), rng.uniform(0, 4e6), rng.uniform(0, 8e6), rng.randint(1, 200), rng.uniform(0, 5e4),
             rng.uniform(0, 2e6), rng.randint(0, 30), rng.uniform(0, 5e7)]
        prim, lookup = rng.uniform(1e-3, 5e-2), rng.uniform(1e-3, 1e-1)  # lookups alone over-predict them by 1 / 0.7
        pts.append({"features": f, "primitive_s": prim + lookup, "lookup_s": lookup,
                    "measured_s": prim + 0.7 * lookup + true.at(*f)})
    got, fit = fit_engine(pts)
    assert got.fixed_s == pytest.approx(true.fixed_s, rel=1e-5) and got.per_dp_byte_s == pytest.approx(2e-10, rel=1e-5)
    assert got.lookup_scale == pytest.approx(0.7, rel=1e-5)
    assert fit["plans"] == 30 and fit["max_rel_err"] < 1e-6


def test_plan_cli_lists_the_calibrated_candidates(tmp_path):
    from click.testing import CliRunner

    from reproduce.cli import cli

    path = tmp_path / "gloo.json"
    path.write_text(json.dumps(profile().to_dict()))
    res = CliRunner().invoke(cli, ["plan", "--workload", "dcnv2", "--nodes", "1", "--gpus-per-node", "4",
                                   "--local-batch", "256", "--calibration", str(path)])
    assert res.exit_code == 0, res.output
    assert "predicted step per candidate" in res.output and "round_robin" in res.output
    assert "calibrated plan (from" in res.output
    res = CliRunner().invoke(cli, ["plan", "--workload", "dcnv2", "--nodes", "2", "--gpus-per-node", "4",
                                   "--calibration", str(path)])
    assert res.exit_code != 0 and "cost=hugectr" in res.output
