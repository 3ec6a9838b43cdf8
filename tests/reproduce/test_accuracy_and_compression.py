"""TT-Rec's compression arithmetic against its published ratios; eval curves, [[points]] variants and the
AUC-vs-step figure."""
import json

import pytest

from reproduce.analysis.aggregate import summarize
from reproduce.analysis.compression import compression_table, model_ratio
from reproduce.harness.resolve import load_experiment
from reproduce.harness.point import RunPoint
from tests.reproduce.window_runs import run_forked
from reproduce.analysis.plots import draw


def test_compression_reproduces_tt_recs_published_ratios():
    df = compression_table().set_index(["dataset", "tt_tables", "rank"])["ratio"]
    assert df["criteo-kaggle", 7, 32] == pytest.approx(117, rel=0.01)  # arXiv abstract: 117x
    assert df["criteo-kaggle", 7, 8] == pytest.approx(221, rel=0.01)  # MLSys abstract: up to 221x
    assert df["criteo-kaggle", 3, 64] == pytest.approx(4, rel=0.05)  # ... from 4x
    assert df["criteo-terabyte", 7, 8] == pytest.approx(112, rel=0.01)  # Terabyte: 112x
    assert model_ratio([1000, 10], 4, 0, 8) == 1.0


def test_eval_curve_points_and_figure(tmp_path):
    exp_file = tmp_path / "acc.toml"
    exp_file.write_text("""
name = "acc"
plots = ["auc-vs-step"]
[defaults]
iters = 4
warmup = 0
num_batches = 4
eval_batches = 2
eval_every = 2
[grid]
impl = ["dense-torch"]
data = ["uniform"]
batch_size = [64]
[data_options]
num_tables = 2
rows = 500
dim = 8
[[points]]
impl = "ttrec"
label = "ttrec normal-init"
data = "uniform"
batch_size = 64
impl_options = { weight_dist = "normal", ranks = 4 }
""")
    exp = load_experiment(exp_file, root=tmp_path)
    assert [p.label for p in exp.points] == ["", "ttrec normal-init"]
    assert exp.points[1].impl_options == {"weight_dist": "normal", "ranks": 4}
    records = run_forked(exp.points, tmp_path)  # each in a process of its own (how it starts is not tested here)
    assert all(r["status"] == "ok" for r in records), records
    assert [c["step"] for c in records[0]["eval_curve"]] == [2, 4]
    assert 0.0 <= records[0]["eval_curve"][-1]["auc"] <= 1.0
    df = summarize(records)
    assert list(df["label"]) == ["dense-torch", "ttrec normal-init"]
    csv = tmp_path / "summary.csv"
    df.to_csv(csv, index=False)
    out = draw(["auc-vs-step"], csv, tmp_path / "fig")
    assert out and all(p.exists() for p in out)
    assert json.loads(df["eval_curve"].iloc[1])[0]["step"] == 2
    with pytest.raises(ValueError, match="eval_every needs eval_batches"):
        RunPoint(impl="dense-torch", data="uniform", batch_size=8, eval_every=2)
    bad = tmp_path / "bad.toml"
    bad.write_text('[grid]\nimpl=["dense-torch"]\ndata=["uniform"]\nbatch_size=[8]\n[[points]]\nimpl="ttrec"\n')
    with pytest.raises(ValueError, match="bad \\[\\[points\\]\\] entry"):
        load_experiment(bad)
