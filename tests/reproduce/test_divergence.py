"""Fault suite, absurd numbers: NaN / inf options are refused by name before anything runs; a run whose loss
becomes non-finite is recorded as `diverged` with the step, not `ok`; records are strict JSON (null, never NaN)."""
import json
import math

import pytest
from click.testing import CliRunner

from reproduce.cli import cli
from reproduce.harness.config import RunPoint
from reproduce.harness.launch import launch_point
from reproduce.harness.records import Record, read_record, write_record

TINY = dict(data="uniform", batch_size=32, iters=3, warmup=1, num_batches=2,
            data_options={"num_tables": 2, "rows": 200, "dim": 4})


@pytest.mark.parametrize("bad,match", [
    (dict(lr=float("nan")), "lr must be a finite number"),
    (dict(lr=float("inf")), "lr must be a finite number"),
    (dict(lr=-1.0), "lr must be > 0"),
    (dict(dist_timeout_s=float("inf")), "dist_timeout_s must be a finite number"),
    (dict(data_options={**TINY["data_options"], "alpha": float("nan")}), "data_options.alpha must be a finite"),
    (dict(impl_options={"ecorec": {"skew": float("-inf")}}), r"impl_options.ecorec.skew must be a finite"),
])
def test_non_finite_options_are_refused_by_name(bad, match):
    with pytest.raises(ValueError, match=match):
        RunPoint(impl="dense-torch", **{**TINY, **bad})


@pytest.mark.parametrize("args,match", [(["--lr", "inf"], "must be a finite number > 0"),
                                        (["--lr", "nan"], "must be a finite number > 0"),
                                        (["--alpha", "nan"], "must be a finite number"),
                                        (["--timeout", "-5"], "must be a finite number > 0")])
def test_cli_refuses_non_finite_numbers(tmp_path, args, match):
    res = CliRunner().invoke(cli, ["run", "--impl", "dense-torch", "--data", "uniform", "--out", str(tmp_path),
                                   *args])
    assert res.exit_code == 2 and match in res.output and not list(tmp_path.glob("*.json"))


def test_a_diverging_run_is_recorded_as_diverged(tmp_path):
    rec = launch_point(RunPoint(impl="dense-torch", mode="dlrm", lr=1e30, **TINY), tmp_path)
    assert rec["status"] == "diverged", rec
    assert "the loss became" in rec["reason"] and "at step" in rec["reason"]


def test_records_are_strict_json(tmp_path):
    path = write_record(tmp_path / "r.json", Record({"impl": "dense-torch"}, "ok", point_id="p", body={
        "eval": {"auc": float("nan")}, "loss": [1.0, float("inf")]}))
    def no_constants(name):
        raise AssertionError(f"non-standard JSON constant {name}")

    rec = json.loads(path.read_text(), parse_constant=no_constants)
    assert rec["eval"]["auc"] is None and rec["loss"] == [1.0, None]
    assert read_record(path).to_dict() == rec and not math.isnan(rec["loss"][0])


def test_a_diverged_run_keeps_its_timings_step_and_curve(tmp_path):
    """A training run whose loss goes non-finite stops there as `diverged`, with the step, the timed steps before
    it and the eval curve so far; the summary table still shows it."""
    from impls.data.export import write_synthetic
    from impls.data.presets import get_preset
    from reproduce.analysis.aggregate import summarize
    from reproduce.cli.run import comparison_table

    data = tmp_path / "data"
    write_synthetic("uniform", get_preset("uniform", num_tables=2, rows=200, dim=4), data, 256, 64)
    point = RunPoint(impl="dense-torch", data=str(data), batch_size=32, epochs=2, warmup=0, eval_every=1,
                     mlp_optimizer="sgd", mlp_lr=1000.0, bottom=[8], top=[8])
    rec = launch_point(point, tmp_path / "runs")
    assert rec["status"] == "diverged", rec
    # the loss, or the held-out predictions scored after the step, is the first to go bad
    assert ("the loss became nan at step" in rec["reason"] or "predictions are NaN / inf" in rec["reason"]) \
        and "(epoch 1)" in rec["reason"], rec["reason"]
    steps, curve = rec["train"]["steps"], rec["eval_curve"]
    assert rec["train"]["stop"] == "diverged" and 2 <= steps < 16
    assert len(rec["iterations_ms"]["total"]) == steps and rec["timing_ms"]["total"]["median"] > 0
    assert [c["step"] for c in curve] == list(range(1, len(curve) + 1)) and len(curve) >= steps - 1
    df = summarize([rec])
    assert df["status"].iloc[0] == "diverged" and df["total_ms"].iloc[0] > 0
    assert comparison_table(df).row_count == 1
