"""Harness pieces the TT systems need: per-implementation options, TT runs end to end with work counts in
the record and the summary, the redundancy command."""
import pandas as pd
import pytest
from click.testing import CliRunner

from reproduce.analysis.aggregate import summarize
from reproduce.cli import cli
from reproduce.harness.resolve import load_experiment
from reproduce.harness.options import options_for
from reproduce.cli.options import parse_impl_options
from reproduce.analysis.redundancy import measure


def test_impl_options_shared_and_per_impl():
    opts = {"ranks": 8, "ecorec": {"micro_batches": 2, "ranks": 4}}
    assert options_for("ecorec", opts) == {"ranks": 4, "micro_batches": 2}
    assert options_for("ttrec", opts) == {"ranks": 8}
    with pytest.raises(ValueError, match="must be a table"):
        options_for("ecorec", {"ecorec": 3})
    assert parse_impl_options(["ranks=16", "ecorec.micro_batches=4", "ttrec.p=[2,3,4]", "weight_dist=normal"]) == {
        "ranks": 16, "ecorec": {"micro_batches": 4}, "ttrec": {"p": [2, 3, 4]}, "weight_dist": "normal"}
    with pytest.raises(ValueError, match="not KEY=VALUE"):
        parse_impl_options(["ranks"])


def test_experiment_resolves_options_per_point(tmp_path):
    f = tmp_path / "e.toml"
    f.write_text("""
[grid]
impl = ["dense-torch", "ecorec"]
data = ["uniform"]
batch_size = [8]
[impl_options.ecorec]
ranks = 4
micro_batches = 2
""")
    pts = {p.impl: p for p in load_experiment(f, root=tmp_path).points}
    assert pts["dense-torch"].impl_options == {}
    assert pts["ecorec"].impl_options == {"ranks": 4, "micro_batches": 2}


def test_cli_run_tt_systems_record_work(tmp_path):
    args = ["run", "--impl", "ttrec", "--impl", "elrec", "--impl", "ecorec", "--data", "uniform", "--num-tables", "2",
            "--rows", "3000", "--dim", "8", "--alpha", "1.1", "--hotness", "3", "-b", "64", "--iters", "2",
            "--warmup", "0", "--mode", "embedding-only", "-o", "ranks=4", "-o", "tt_min_rows=0", "-o", "ecorec.min_chunk=10",
            "--out", str(tmp_path)]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    import json

    recs = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("*.json"))]
    df = summarize(recs, baseline="ttrec").set_index("impl")
    assert (df["status"] == "ok").all()
    nnz = df.loc["ttrec", "nnz"]
    assert df.loc["ecorec", "unique"] <= nnz and df.loc["ecorec", "e1"] <= df.loc["ecorec", "unique"] + 1
    assert df.loc["ecorec", "flops"] < df.loc["elrec", "flops"] < df.loc["ttrec", "flops"]
    res = CliRunner().invoke(cli, args[:3] + ["-o", "ranks=0", "-o", "tt_min_rows=0", "--data", "uniform", "--rows", "100", "--dim", "8",
                                              "-b", "8", "--iters", "1", "--warmup", "0", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "ranks must be >= 1" in res.output and not (tmp_path / "x").exists()  # no run


def test_redundancy_counts_and_command(tmp_path):
    df = measure(["uniform"], [16, 64], batches=1, num_tables=2, rows=500, dim=8, hotness=2, alpha=1.2)
    tot = df[df["table"] == "*"].set_index("batch_size")
    assert list(tot["nnz"]) == [16 * 2 * 2, 64 * 2 * 2]
    assert (tot["e1"] <= tot["unique"]).all() and (tot["unique"] <= tot["nnz"]).all()
    per = df[df["table"] != "*"]
    assert per.groupby("batch_size")["nnz"].sum().tolist() == tot["nnz"].tolist()
    out = tmp_path / "r.csv"
    res = CliRunner().invoke(cli, ["redundancy", "--data", "criteo-kaggle", "-b", "32", "--batches", "1",
                                   "--out", str(out), "--figures", str(tmp_path / "fig")])
    assert res.exit_code == 0, res.output
    assert "criteo-kaggle" in res.output and out.exists() and (tmp_path / "fig" / "redundancy.png").exists()
    assert len(pd.read_csv(out)) == 27  # 26 tables + total
    res = CliRunner().invoke(cli, ["redundancy", "--data", "nope", "-b", "8"])
    assert res.exit_code != 0 and "unknown data preset" in res.output


def test_cli_run_eval_reports_auc(tmp_path):
    import json
    import math

    args = ["run", "--impl", "dense-torch", "--data", "uniform", "--num-tables", "2", "--rows", "500", "--dim", "8",
            "-b", "64", "--iters", "3", "--warmup", "0", "--eval", "--out", str(tmp_path)]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert "AUC" in res.output
    (rec,) = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    assert rec["point"]["eval_batches"] == 8 and math.isfinite(rec["eval"]["auc"])
