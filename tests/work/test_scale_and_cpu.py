"""The work model at scale and on this machine: a world's ranks hold every table once (table-wise) or whole
(data-parallel) with their exchanges balanced; the memory model's constants come from its calibration set alone;
the CPU time model reads no step time of the point it predicts; the claims' "modelled at the paper's scale" quotes
no time unless the GPU time model met its targets."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from impls.data.presets import get_preset
from reproduce.analysis import at_scale, work_cpu, work_memory, work_scale

ROOT = Path(__file__).resolve().parents[2]
MACHINE = (ROOT / "results" / "REFERENCE_MACHINE").read_text().strip()


def test_a_worlds_ranks_hold_every_table_once_or_whole():
    from impls.registry import get_impl

    spec = get_preset("meta-2022", num_tables=24, dim=32)
    tables = list(spec.tables)
    G = 4
    counts = work_scale.world_counts(spec, G)
    for s, (ranks, ex) in counts.items():
        total = sum(get_impl(s).table_param_bytes(tables, work_scale.OPTIONS))
        params = [r["params"] for r in ranks]
        if s == "elrec":  # data-parallel: a replica each, one all-reduce of all of it
            assert params == [total] * G and set(ex.sent) == {"emb.dp"}
            assert ex.sent["emb.dp"][0] == 2 * (G - 1) * total // G
        else:  # table-wise: each table on one rank; what one rank sends, another receives
            assert sum(params) == total
            assert np.isclose(ex.total_sent().sum(), ex.total_received().sum())


def _calibration_root(tmp_path: Path, constants: dict[str, float]) -> Path:
    rows = []
    for nnz, unique, params in ((5e4, 6e3, 3e5), (8e5, 1e4, 3e5), (5e4, 2e4, 4e6), (8e5, 2e5, 4e6), (3e6, 7e5, 5e7)):
        counted = 1e6 + 3 * params
        extra = (constants["constant"] + constants["per_lookup"] * nnz + constants["per_unique"] * unique
                 + constants["per_param_byte"] * params)
        rows.append({"impl": "ecorec", "status": "ok", "nnz": nnz, "unique": unique, "param_bytes": params,
                     "analytic_bytes": counted, "peak_rss_delta_bytes": counted + extra})
    d = tmp_path / "results" / work_memory.CALIBRATION_SET / "m"
    d.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(d / "repeats.csv", index=False)
    return tmp_path


def test_the_memory_constants_come_from_the_calibration_set_alone(tmp_path):
    want = {"constant": 1.5e7, "per_lookup": 27.0, "per_unique": 70.0, "per_param_byte": 0.2}
    root = _calibration_root(tmp_path, want)
    got = work_memory.fit(root, "m")["ecorec"]
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-6), k
    v = work_memory.validate(root, "m")  # no validation set under this root: nothing predicted, nothing fitted on it
    assert v.empty


def test_the_cpu_model_reads_no_step_time_of_the_point_it_predicts():
    from impls.embark.calibrated import Profile

    name = "table_size"
    summary = ROOT / "results" / name / MACHINE / "summary.csv"
    if not summary.exists():
        pytest.skip("no committed table_size set")
    row = pd.read_csv(summary).query("impl == 'ecorec' and status == 'ok'").iloc[0]
    rec = json.loads((ROOT / "results" / name / MACHINE / f"{row['point_id']}.r0.json").read_text())
    prof = work_cpu.profile(ROOT, MACHINE)
    calib = Profile.load(ROOT / "results" / "calibration" / MACHINE / "gloo.json")
    fixed = work_cpu.dispatch(ROOT, MACHINE)["ecorec"]
    a = work_cpu.predict_point(rec, row, prof, calib, fixed)
    for key in ("timing_ms", "iterations_ms"):
        rec[key] = {}
    row = row.copy()
    row["total_ms"] = 1e9
    b = work_cpu.predict_point(rec, row, prof, calib, fixed)
    assert a == b and a["predicted_ms"] > 0
    # stage 2's rate at the two measured shapes is the measured rate
    assert prof.stage2_rate("fwd", prof.ecorec_items_per_prefix) == pytest.approx(prof.stage_rates["fwd.stage2@ecorec"])
    assert prof.stage2_rate("bwd", 4.0) == pytest.approx(prof.stage_rates["bwd.stage2@4"])


def test_a_time_at_the_papers_scale_is_quoted_only_when_the_gpu_model_met_its_targets(tmp_path):
    out = tmp_path / "results" / "work_model"
    out.mkdir(parents=True)
    verdict = {"gpu_points_within": False, "gpu_ratios_within": True, "gpu_order_right": True,
               "gpu_worst_point": 0.48, "gpu_worst_ratio": 0.2, "memory_within": True, "memory_worst": 0.002}
    (out / "fit.json").write_text(json.dumps({"verdict": verdict}))
    pd.DataFrame([{"ratio": "elrec / ecorec", "batch": 65536, "predicted": 3.0}]).to_csv(out / "fig11_ratios.csv")
    claim = {"id": "x", "at_scale": {"kind": "time", "ratio": "elrec / ecorec", "batch": 65536}}
    assert at_scale.at_scale(claim, tmp_path).startswith("not validated")
    verdict["gpu_points_within"] = True
    (out / "fit.json").write_text(json.dumps({"verdict": verdict}))
    assert at_scale.at_scale(claim, tmp_path).startswith("3.00")
    assert at_scale.at_scale({"id": "y"}, tmp_path) == "–"
    with pytest.raises(ValueError, match="unknown at_scale kind"):
        at_scale.at_scale({"id": "z", "at_scale": {"kind": "guess"}}, tmp_path)


def test_the_memory_claim_at_scale_cites_the_memory_model_of_our_own_systems(tmp_path):
    out = tmp_path / "results" / "work_model"
    (out / "m1").mkdir(parents=True)
    (tmp_path / "results" / "REFERENCE_MACHINE").write_text("m1\n")
    (out / "fit.json").write_text(json.dumps({"verdict": {"memory_worst": 0.002}}))
    pd.DataFrame([{"world_size": 32, "ecorec_memory_saving_vs_elrec": 0.5}]).to_csv(out / "scale_ratios.csv")
    claim = {"id": "m", "at_scale": {"kind": "memory", "world_size": 32, "column": "ecorec_memory_saving_vs_elrec",
                                     "workload": "w"}}
    assert "not validated" in at_scale.at_scale(claim, tmp_path)
    (out / "m1" / "memory_fit.json").write_text(json.dumps({"worst": 0.091, "target": 0.05, "within": False}))
    text = at_scale.at_scale(claim, tmp_path)
    assert text.startswith("50.0% at 32 GPUs on w") and "9.1%" in text and "not met" in text and "0.2%" not in text
