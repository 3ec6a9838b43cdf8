"""The SC24 scale model: its byte counts match the sharded layer's, its id counts match the generators, a fit on
records the model itself produced recovers the coefficients exactly, and projections mark what cannot run."""
import math

import pytest
import torch

from impls.data.sources import open_source
from reproduce.harness.records import SCHEMA_VERSION, Record
from reproduce.analysis.scale_model import (Fit, Coefficients, Sharding, Workload, fit, project, rank_loads,
                                   step_ms, validate, validate_out_of_sample)

W = Workload.of("uniform", num_tables=4, rows=5000, dim=8, hotness=3, alpha=1.05)


def test_bytes_match_the_sharded_layers_closed_form():
    b, N, D = 64, 2, 8
    tw = rank_loads(W, Sharding("table-wise"), N, b, 0.0, owned=[[0, 2], [1, 3]])
    # pooled rows of its 2 tables for the peer's b samples, gradients of the peer's 2 tables for its b samples,
    # and ids + lengths (8 bytes each) of its samples for the peer's tables
    assert tw[0].bytes == 4 * D * (b * 2 + b * 2) + 8 * 2 * (b + 3 * b)
    assert tw[0].lookups == 2 * N * b * 3
    dp = rank_loads(W, Sharding("data-parallel"), 4, b, grad_bytes=1000.0)
    assert dp[0].bytes == pytest.approx(2 * 3 / 4 * 1000.0) and dp[0].lookups == 4 * b * 3
    assert rank_loads(W, Sharding("table-wise"), 1, b, 0.0)[0].bytes == 0.0


def test_expected_distinct_ids_match_the_generator():
    w = Workload.of("criteo-kaggle", dim=8)
    src = open_source("criteo-kaggle", seed=3, dim=8)
    batch = src.batch(0, 8192).sparse
    for t in (2, 3, 9, 20):  # tables from 1e3 to 1e7 rows
        measured = torch.unique(batch.table(t)[0]).numel()
        assert w.distinct(t, 8192) == pytest.approx(measured, rel=0.05)


def _records(cal: Fit, impl: str) -> list[Record]:
    """Records the model itself would produce for ``impl`` at 1, 2 and 4 ranks (placement: the system's own)."""
    out = []
    sh = Sharding.of(impl)
    for N in (1, 2, 4):
        k = max(1.0, N / cal.cores)
        c = cal.systems[impl]
        loads = rank_loads(W, sh, N, 64, 4096.0)
        per_rank = []
        for r, load in enumerate(loads):
            comp = k * (c.a_ms_per_lookup * load.lookups + c.u_ms_per_distinct * load.distinct + c.e_ms_per_byte * load.bytes)
            comm = k * cal.beta_ms_per_byte * load.bytes
            per_rank.append({"rank": r, "total_ms_median": comp + comm, "comm_blocked_ms": {"x": comm},
                             "comm_bytes_per_step": {"x": load.bytes}})
        point = {"impl": impl, "data": "uniform", "batch_size": 64, "world_size": N, "threads": 1, "label": "",
                 "data_options": {"num_tables": 4, "rows": 5000, "dim": 8, "hotness": 3, "alpha": 1.05}}
        placement = None
        if sh.kind == "table-wise" and N > 1:
            from impls.sharding.plan import place_tables

            owned = place_tables([W.distinct(t, 64 * N) for t in range(4)], N, sh.placement)
            placement = {"owned": [[W.tables[t].name for t in mine] for mine in owned]}
        total = max(p["total_ms_median"] for p in per_rank)
        out.append(Record.from_dict({"point": point, "point_id": f"{impl}-{N}", "repeat": 0, "status": "ok",
                                     "schema": SCHEMA_VERSION,
                                     "env": {"cpu": "test", "cpu_count": cal.cores}, "param_bytes": 4096.0,
                                     "timing_ms": {"total": {"median": total}},
                                     "dist": {"per_rank": per_rank, "placement": placement} if N > 1 else None}))
    return out


def test_fit_recovers_the_coefficients_of_model_made_records():
    truth = Fit("test", 2, 1, 2e-6, {"ttrec": Coefficients(3e-3, 0.0, 5e-6, 0),
                                              "elrec": Coefficients(1e-3, 2e-3, 1e-6, 0)}, "truth")
    recs = _records(truth, "ttrec") + _records(truth, "elrec")
    fitted = fit(recs, "synthetic")
    assert fitted.beta_ms_per_byte == pytest.approx(truth.beta_ms_per_byte, rel=1e-6)
    for impl in ("ttrec", "elrec"):
        got, want = fitted.systems[impl], truth.systems[impl]
        assert got.e_ms_per_byte == pytest.approx(want.e_ms_per_byte, rel=1e-5, abs=1e-12)
        if impl == "ttrec":  # table-wise: every rank's lookups and distinct ids differ, so a and u are identified
            assert got.a_ms_per_lookup == pytest.approx(want.a_ms_per_lookup, rel=1e-5, abs=1e-12)
            assert got.u_ms_per_distinct == pytest.approx(want.u_ms_per_distinct, rel=1e-5, abs=1e-12)
        else:  # data-parallel at one local batch: only the rank's lookup cost as a whole is
            load = rank_loads(W, Sharding("data-parallel"), 1, 64, 0.0)[0]
            cost = lambda c: c.a_ms_per_lookup * load.lookups + c.u_ms_per_distinct * load.distinct  # noqa: E731
            assert cost(got) == pytest.approx(cost(want), rel=1e-6)
    assert validate(fitted, recs)["error"].abs().max() < 1e-6
    assert Fit.from_json(fitted.to_json()) == fitted
    held = validate_out_of_sample(recs, "synthetic")  # each world size predicted by a fit on the others
    assert (held["held_out"] == held["world_size"]).all() and len(held) == 6
    assert held["error"].abs().max() < 1e-3 and held["in_sample_error"].abs().max() < 1e-6


def test_projection_marks_table_wise_beyond_the_table_count():
    cal = Fit("test", 2, 1, 1e-6, {i: Coefficients(1e-3, 1e-3, 1e-6, 0) for i in ("ttrec", "elrec", "ecorec")},
                      "test")
    df = project(cal, [("w", W)], 64, {i: {"ranks": 4} for i in cal.systems}, worlds=(1, 4, 8))
    tw8 = df[(df["impl"] == "ttrec") & (df["world_size"] == 8)].iloc[0]
    assert not tw8["feasible"] and "cannot use 8 ranks" in tw8["reason"] and math.isnan(tw8["step_ms"])
    assert df[(df["impl"] == "elrec") & (df["world_size"] == 8)]["feasible"].all()  # data-parallel scales on
    assert df["modeled"].all()
    eco = df[(df["impl"] == "ecorec") & (df["world_size"] == 4)].iloc[0]
    el = df[(df["impl"] == "elrec") & (df["world_size"] == 4)].iloc[0]
    assert eco["ecorec_speedup_over_elrec"] == pytest.approx(el["step_ms"] / eco["step_ms"])
    # a pipelined system hides (g - 1) / g of what its compute can cover
    one = step_ms(cal, "ecorec", W, 4, 64, 0.0, cores=None)
    assert one["step_ms"] == pytest.approx(one["compute_ms"] + one["comm_ms"]
                                           - min(one["compute_ms"], one["comm_ms"]) * 3 / 4)
