"""The work model's validation against the EcoRec artifact's published results: Table 1's memory from the FBTT and
dense-bag models (nothing fitted), Figure 11's times fitted on the calibration batches only (a published number of
a validation batch moves no constant), and the report quoting no value outside a model's validated range."""
from __future__ import annotations

import json

import pytest

from reproduce.analysis import fig11_artifact, work_model


def test_table1_memory_models_are_within_five_percent_of_the_artifact():
    memory = work_model.table1_validation()
    assert set(memory["system"]) == {"fbtt", "pytorch"} and len(memory) == 4
    assert (memory["error"].abs() <= work_model.MEMORY_TARGET).all(), memory


def test_the_fit_sees_only_the_calibration_batches(monkeypatch):
    _, _, before = work_model.fig11_validation()
    bigger = {b: dict(t) for b, t in fig11_artifact.TOTAL_MS.items()}
    for b in bigger:
        if b > work_model.CALIBRATION_MAX:
            bigger[b] = {s: 10 * v for s, v in bigger[b].items()}
    monkeypatch.setattr(work_model, "TOTAL_MS", bigger)
    points, ratios, after = work_model.fig11_validation()
    assert after == before
    assert set(points.loc[points["use"] == "calibration", "batch"]) == {2048, 4096, 8192}
    assert len(ratios) == 2 * len(bigger)


def test_the_published_facts_are_read_from_their_data_file():
    f = fig11_artifact.facts()
    assert f["source"]["commit"] == "d5a071e" and fig11_artifact.TOTAL_MS[131072]["ttrec"] == pytest.approx(23565.312)
    assert len(f["figure4"]["point"]) == 35 and {p["system"] for p in f["table1"]["point"]} == {"fbtt", "pytorch"}


def test_the_report_block_says_which_targets_fail_and_then_quotes_no_gpu_value(tmp_path):
    work_model.write(tmp_path)
    lines = work_model.table(tmp_path)
    v = json.loads((tmp_path / "fit.json").read_text())["verdict"]
    text = "\n".join(lines)
    assert text.count("| validation |") == 4 and "Table 1" in text
    quoted = v["gpu_points_within"] and v["gpu_ratios_within"] and v["gpu_order_right"]
    assert ("no modeled GPU time or speedup is quoted" in text) == (not quoted)


def test_a_scale_model_value_beyond_two_measured_world_sizes_is_not_quoted(tmp_path):
    from reproduce.analysis.report import model_error

    d = tmp_path / "results" / "scale_model" / "m"
    d.mkdir(parents=True)
    (d / "validation.csv").write_text("impl,world_size,error\necorec,1,0.1\necorec,2,-0.2\n")
    ok, why = model_error("scale_model", tmp_path, "m", 32)
    assert not ok and "at least 3 measured world sizes" in why
    assert model_error("scale_model", tmp_path, "m", 2)[0]
    (d / "validation.csv").write_text("impl,world_size,error\necorec,1,0.1\necorec,2,-0.2\necorec,4,0.1\n")
    assert model_error("scale_model", tmp_path, "m", 32)[0]
