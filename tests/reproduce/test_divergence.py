"""Fault suite, absurd numbers: NaN / inf options are refused by name before anything runs; a run whose loss
becomes non-finite is recorded as `diverged` with the step, not `ok`; records are strict JSON (null, never NaN)."""
import json
import math

import pytest
from click.testing import CliRunner

from reproduce.cli import cli
from reproduce.harness.point import RunPoint
from reproduce.harness.launch import launch_point
from reproduce.harness.record_store import read_record, write_record
from reproduce.harness.records import Record
from tests.reproduce.window_runs import run_forked

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
    assert rec.status == "diverged", rec
    assert "the loss became" in rec.reason and "at step" in rec.reason


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
    from reproduce.analysis.run_output import comparison_table

    data = tmp_path / "data"
    write_synthetic("uniform", get_preset("uniform", num_tables=2, rows=200, dim=4), data, 256, 64)
    point = RunPoint(impl="dense-torch", data=str(data), batch_size=32, epochs=2, warmup=0, eval_every=1,
                     mlp_optimizer="sgd", mlp_lr=1000.0, bottom=[8], top=[8])
    (rec,) = run_forked([point], tmp_path)
    assert rec["status"] == "diverged", rec
    # the loss, or the held-out predictions scored after the step, is the first to go bad
    assert ("the loss became nan at step" in rec["reason"] or "predictions are NaN / inf" in rec["reason"] or
            "the held-out log loss exploded" in rec["reason"]) and "(epoch 1)" in rec["reason"], rec["reason"]
    steps, curve = rec["train"]["steps"], rec.get("eval_curve", [])
    assert rec["train"]["stop"] == "diverged" and 1 <= steps < 16
    assert len(rec["iterations_ms"]["total"]) == steps and rec["timing_ms"]["total"]["median"] > 0
    assert [c["step"] for c in curve] == list(range(1, len(curve) + 1)) and len(curve) >= steps - 1
    df = summarize([rec])
    assert df["status"].iloc[0] == "diverged" and df["total_ms"].iloc[0] > 0
    assert comparison_table(df).row_count == 1


def test_the_rule_for_a_finite_explosion():
    """20 training losses in a row above 10 x ln 2 are divergence; one below resets the count; the embedding-only
    loss is no log loss and never counts."""
    from reproduce.harness.training import EXPLODED, EXPLODED_STEPS, Explosion, held_out_exploded

    boom = Explosion("dlrm")
    assert [boom.step(1e16, i) for i in range(EXPLODED_STEPS - 1)] == [None] * (EXPLODED_STEPS - 1)
    assert boom.step(0.5, 19) is None  # recovered
    said = [boom.step(EXPLODED * 1.01, 20 + i) for i in range(EXPLODED_STEPS)]
    assert said[:-1] == [None] * (EXPLODED_STEPS - 1) and "steps 21-40" in said[-1] and "exploded" in said[-1]
    quiet = Explosion("embedding-only")
    assert all(quiet.step(1e16, i) is None for i in range(3 * EXPLODED_STEPS))
    assert held_out_exploded(EXPLODED + 0.1) and not held_out_exploded(0.69)


def test_a_loss_that_explodes_while_finite_ends_diverged(tmp_path):
    """`train --lr 1e9` (Adagrad on the tables): the losses stay finite but explode; the run is `diverged`."""
    data = tmp_path / "d"
    res = CliRunner().invoke(cli, ["data", "synth", "uniform", "--out", str(data), "--samples", "256",
                                   "--num-tables", "2", "--rows", "50", "--dim", "4"])
    assert res.exit_code == 0, res.output
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["train", "--impl", "dense-torch", "--data", str(data), "--out", str(out),
                                   "--lr", "1e9", "-b", "8", "--epochs", "2"])
    rec = read_record(next(out.glob("*.json")))
    assert rec.status == "diverged" and "exploded" in rec.reason, rec.reason


def test_the_benchmark_loop_stops_at_a_finite_explosion():
    """The benchmark's loop applies the same rule: its losses (finite, 1e16 from step 5 on) stop it at the 20th."""
    import torch

    from reproduce.harness.training import EXPLODED_STEPS, bench_loop

    class Losses:  # a clock whose steps return these losses
        def step(self, step, batch, next_batch):
            self.it = getattr(self, "it", -1) + 1
            return torch.tensor(0.7 if self.it < 5 else 1e16), (1.0, 1.0, 1.0, 3.0, 3.0)

    point = RunPoint(impl="dense-torch", mode="dlrm", **{**TINY, "iters": 60})
    res = bench_loop(point, None, [None], None, None, Losses(), None, 0)
    assert "exploded" in res.diverged and f"steps 6-{5 + EXPLODED_STEPS}" in res.diverged, res.diverged
    assert len(res.phases["total"]) == 5 + EXPLODED_STEPS - 1 - point.warmup  # the steps before the bad one
