"""The record body is typed (records.Body): a record is built by its factories only, an unknown body field is
refused by name, and readers go through the accessors; every committed record reads back into it unchanged."""
import json
from pathlib import Path

import pytest

from reproduce.harness.record_store import read_record, write_record
from reproduce.harness.records import Body, Record, Status

ROOT = Path(__file__).resolve().parents[2]
POINT = {"impl": "dense-torch", "data": "uniform", "batch_size": 8}


def test_factories_give_the_status_and_nothing_measured_for_a_failure():
    ok = Record.measured(POINT, "p", Body(timing_ms={"total": {"median": 2.5}}, samples_per_s=10.0))
    assert ok.ok and ok.total_ms == 2.5 and ok.phase_ms("fwd") is None and ok.reason is None
    bad = Record.measured(POINT, "p", Body(loss=[float("nan")]), diverged="loss nan at step 3")
    assert bad.status is Status.DIVERGED and bad.reason == "loss nan at step 3"
    failed = Record.failed(POINT, "worker exited with code 3", point_id_="p", repeat=2)
    assert failed.status is Status.FAILED and failed.body == Body() and failed.total_ms is None and failed.repeat == 2
    assert Record.failed(POINT, "killed", "oom", "p").status is Status.OOM
    with pytest.raises(ValueError, match="failed or oom"):
        Record.failed(POINT, "why", Status.OK, "p")
    assert Record.skipped(POINT, "not registered", "p").status is Status.SKIPPED


def test_an_unknown_body_field_is_refused_by_name(tmp_path):
    path = tmp_path / "p.r0.json"
    write_record(path, Record.measured(POINT, "p", Body(samples_per_s=1.0)))
    d = json.loads(path.read_text())
    d["timings"] = {}
    path.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=r"not part of a record.*'timings'"):
        read_record(path)


def test_every_committed_record_reads_back_into_the_typed_body_unchanged():
    files = sorted((ROOT / "results").glob("*/*/*.r*.json"))
    assert files
    for f in files:
        rec = read_record(f)
        assert rec.to_dict() == json.loads(f.read_text()), f
        if rec.ok:
            assert rec.total_ms is not None and rec.env.get("machine_slug"), f


def test_a_launched_run_says_where_its_wall_time_went(tmp_path):
    """setup_s splits a run's wall time: start-up (from the launcher's clock to the worker's main), data, prepare,
    build, warm-up, timed steps, the loop's rest and finishing; together they stay within the launcher's wall_s."""
    from reproduce.harness.launch import launch_point
    from reproduce.harness.point import RunPoint

    point = RunPoint(impl="dense-torch", data="uniform", batch_size=8, iters=3, warmup=2, num_batches=1,
                     data_options={"num_tables": 1, "rows": 20, "dim": 4})
    rec = launch_point(point, tmp_path)
    split = rec.body.setup_s
    assert rec.ok and set(split) == {"startup", "data", "prepare", "build", "warmup", "timed", "loop_other", "finish"}
    assert all(v is not None and v >= 0 for v in split.values()) and split["startup"] > 0
    assert split["timed"] == pytest.approx(sum(rec.body.iterations_ms["total"]) / 1e3)
    assert sum(split.values()) <= rec.wall_s


def test_the_split_reaches_repeats_csv_and_the_sweeps_plan(tmp_path):
    import pandas as pd

    from reproduce.analysis.aggregate import flatten
    from reproduce.analysis.durations import run_split

    split = {"startup": 2.4, "data": 0.3, "prepare": 0.3, "build": 0.1, "warmup": 1.2, "timed": 3.0,
             "loop_other": 0.0, "finish": 0.1}
    rec = Record.measured(POINT, "p", Body(setup_s=split))
    rec.wall_s = 7.6
    row = flatten(rec)
    assert row["startup_s"] == 2.4 and row["timed_s"] == 3.0
    pd.DataFrame([row, {**row, "startup_s": 2.6, "wall_s": 7.8}]).to_csv(tmp_path / "repeats.csv", index=False)
    said = run_split(tmp_path)
    assert said.startswith("startup 2.5 s, data 0.3 s, prepare 0.3 s, build 0.1 s, warmup 1.2 s, timed 3.0 s")
    assert said.endswith("launch and exit 0.2 s (medians)")
    assert run_split(tmp_path / "none") is None
