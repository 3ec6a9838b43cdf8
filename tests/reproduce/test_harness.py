import os

import pytest
from click.testing import CliRunner

from reproduce.analysis.aggregate import summarize
from reproduce.cli import cli
from reproduce.harness.resolve import load_experiment
from reproduce.harness.options import check_point
from reproduce.harness.point import RunPoint
from reproduce.harness.launch import launch_point
from reproduce.harness.record_store import record_path
from reproduce.harness.record_store import read_record
from reproduce.harness.records import SCHEMA_VERSION
from reproduce.analysis.aggregate import summarize_experiment
from reproduce.harness.sweep import run_experiment

TINY = dict(data="uniform", batch_size=64, iters=2, warmup=1, num_batches=2,
            data_options={"num_tables": 2, "rows": 1000, "dim": 8})


def test_run_point_validation():
    with pytest.raises(ValueError, match="batch size must be > 0"):
        RunPoint(impl="dense-torch", data="uniform", batch_size=0)
    nope = RunPoint(impl="dense-torch", data="nope", batch_size=1)  # values only: the data is checked where points
    with pytest.raises(ValueError, match="data .nope. is no preset"):  # are made (resolve, `run`), not by a reader
        check_point(nope)
    with pytest.raises(ValueError, match="unknown run-point keys"):
        RunPoint.from_dict({"impl": "x", "data": "uniform", "batch_size": 1, "colour": 1})


def test_worker_writes_an_ok_record_with_measurements(tmp_path):
    p = RunPoint(impl="dense-torch", mode="dlrm", eval_batches=2, **TINY)
    rec = launch_point(p, tmp_path)
    assert rec.status == "ok", rec
    on_disk = read_record(record_path(tmp_path, p))
    assert on_disk.status == "ok"
    assert len(on_disk.body.iterations_ms["total"]) == 2
    assert on_disk.body.memory["peak_rss_delta_bytes"] > 0
    assert on_disk.body.memory["analytic"]["params"] == 2 * 1000 * 8 * 4
    assert on_disk.body.work["nnz"] == 2 * 64
    assert 0.0 <= on_disk.body.eval["auc"] <= 1.0
    assert on_disk.body.env["torch"]
    from reproduce.harness import allocator

    expected = "system" if allocator._glibc() is None else \
        "user" if any(os.environ.get(k) for k in allocator.USER_VARIABLES) else "harness"
    used = on_disk.body.env["allocator"]
    assert used["policy"] == expected
    if expected == "harness":  # memory measured over the build and the first step, the timed steps retain
        assert [p["policy"] for p in used["phases"].values()] == ["eager", "retain"]
        assert "after the build and the first step" in on_disk.body.memory["peak_rss_method"]
    assert not list(tmp_path.glob(".*.tmp"))


def test_failed_point_writes_only_a_failed_record(tmp_path):
    with pytest.raises(ValueError, match="dim must be > 0"):  # bad data options fail before any launch
        check_point(RunPoint(impl="dense-torch", **{**TINY, "data_options": {"dim": 0}}))
    with pytest.raises(ValueError, match=r"takes no option\(s\) \['bogus'\]"):  # an unknown key: before launch too
        check_point(RunPoint(impl="dense-torch", impl_options={"bogus": 1}, **TINY))
    p = RunPoint(impl="ttrec", impl_options={"chunk": 0}, **TINY)  # a bad value fails inside the worker
    rec = launch_point(p, tmp_path)
    assert rec.status == "failed" and "chunk must be >= 1" in rec.reason
    files = sorted(x.name for x in tmp_path.glob("*.json"))
    assert files == [record_path(tmp_path, p).name]
    assert read_record(record_path(tmp_path, p)).status == "failed"


def test_unregistered_impl_is_skipped_not_faked(tmp_path):
    rec = launch_point(RunPoint(impl="ecorec-someday", **TINY), tmp_path)
    assert rec.status == "skipped" and "not implemented" in rec.reason
    assert rec.body.timing_ms is None


def test_summary_speedup_against_baseline():
    def rec(impl, total):
        return {"status": "ok", "point_id": impl, "repeat": 0, "schema": SCHEMA_VERSION,
                "point": {"impl": impl, "data": "d", "batch_size": 8, "mode": "m", "optimizer": "sgd"},
                "timing_ms": {"total": {"median": total, "iqr": 0.0}}, "samples_per_s": 1.0,
                "memory": {"analytic": {"total": 1}}, "param_bytes": 1, "tables": {"dense_bytes": 1},
                "work": {"nnz": 1}, "env": {}}
    df = summarize([rec("a", 10.0), rec("b", 5.0), {"status": "skipped", "reason": "x", "point_id": "c", "repeat": 0,
                    "schema": SCHEMA_VERSION, "point": {"impl": "c", "data": "d", "batch_size": 8}}], baseline="a")
    assert df.set_index("impl")["speedup"].to_dict()["b"] == pytest.approx(2.0)
    assert df.set_index("impl")["status"]["c"] == "skipped"


def test_sweep_resumes_and_draws(tmp_path, monkeypatch):
    exp_file = tmp_path / "tiny.toml"
    exp_file.write_text("""
name = "tiny"
repeats = 1
plots = ["sc24-speedup", "sc24-memory"]
[defaults]
mode = "embedding-only"
iters = 2
warmup = 1
num_batches = 2
[grid]
impl = ["ttrec", "dense-fbgemm"]
data = ["uniform"]
batch_size = [32]
[data_options]
num_tables = 2
rows = 500
dim = 8
""")
    exp = load_experiment(exp_file, root=tmp_path)
    assert len(exp.points) == 2
    seen = []
    run_experiment(exp, on_point=lambda i, n, p, k, o: seen.append(o.record.status), probe=False)
    summary = summarize_experiment(exp)
    assert seen == ["ok", "ok"]
    seen.clear()
    run_experiment(exp, on_point=lambda i, n, p, k, o: seen.append(o.kind))
    assert seen == ["earlier", "earlier"]  # both recorded: nothing relaunched
    typo = tmp_path / "typo.toml"
    typo.write_text(exp_file.read_text().replace('"dense-fbgemm"', '"dense-fbgem"'))
    with pytest.raises(ValueError, match="unknown implementation 'dense-fbgem' \\(did you mean 'dense-fbgemm'"):
        load_experiment(typo, root=tmp_path)  # refused before anything runs
    from reproduce.analysis.plots import draw

    paths = draw(list(exp.plots), summary, exp.figures_dir)
    assert {p.name for p in paths} == {"speedup.png", "speedup.pdf", "memory.png", "memory.pdf"}


# two systems whose runs import no torch._dynamo (torch.optim does: dense-torch, and the MLPs of the dlrm mode)
COMPARE = ["run", "--impl", "ttrec", "--impl", "dense-fbgemm", "--data", "uniform", "--num-tables", "2", "--rows",
           "100", "--dim", "4", "-b", "16", "--iters", "2", "--warmup", "0", "--mode", "embedding-only", "--out"]


def test_cli_run_compares(tmp_path):
    res = CliRunner().invoke(cli, COMPARE + [str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "1.00×" in res.output and "dense-fbgemm" in res.output
    assert len(list(tmp_path.glob("*.json"))) == 2


def test_cli_run_repeats_interleave_and_rejects_bad_input(tmp_path):
    runner = CliRunner()
    again = tmp_path / "again"
    res = runner.invoke(cli, COMPARE + [str(again), "--repeats", "2"])
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert "over 2 interleaved rounds" in said and "[range of the Walsh averages of 2 rounds (50 % CI)]" in said
    order = [line.split()[0] for line in res.output.splitlines() if "repeat " in line and " of 2)" in line]
    assert order == ["ttrec", "dense-fbgemm", "dense-fbgemm", "ttrec"]  # A B, then B A
    assert sorted(p.name.split(".")[-2] for p in again.glob("*.json")) == ["r0", "r0", "r1", "r1"]
    res = runner.invoke(cli, ["run", "--impl", "dense-torch", "--impl", "dense-torch"])
    assert res.exit_code != 0 and "named twice" in res.output
    res = runner.invoke(cli, ["run", "--impl", "nope"])
    assert res.exit_code != 0 and "unknown implementation" in res.output
    res = runner.invoke(cli, ["run", "--impl", "dense-torch", "-b", "0"])
    assert res.exit_code != 0 and "must be a finite number > 0" in res.output
    res = runner.invoke(cli, ["run", "--impl", "dense-torch", "--data", "imagenet"])
    assert res.exit_code != 0 and "'imagenet' is no preset" in res.output


def test_cli_env():
    res = CliRunner().invoke(cli, ["env"])
    assert res.exit_code == 0 and "torch" in res.output and "dense-torch" in res.output


def test_experiment_variants_grid(tmp_path):
    """[grid] variant = [...] expands named system setups ([variants.NAME]: impl, label, impl_options)."""
    f = tmp_path / "e.toml"
    f.write_text('''
name = "v"
[grid]
variant = ["a", "b"]
data = ["uniform"]
batch_size = [8]
world_size = [1, 2]
[impl_options.ttrec]
ranks = 4
[variants.a]
impl = "ttrec"
label = "tt a"
impl_options = { cores = 3 }
[variants.b]
impl = "dense-torch"
''')
    exp = load_experiment(f, tmp_path)
    got = sorted((p.impl, p.label, p.world_size, tuple(sorted(p.impl_options.items()))) for p in exp.points)
    assert got == [("dense-torch", "", 1, ()), ("dense-torch", "", 2, ()),
                   ("ttrec", "tt a", 1, (("cores", 3), ("ranks", 4))), ("ttrec", "tt a", 2, (("cores", 3), ("ranks", 4)))]
    f.write_text(f.read_text().replace('variant = ["a", "b"]', 'variant = ["a", "zzz"]'))
    with pytest.raises(ValueError, match="zzz"):
        load_experiment(f, tmp_path)
