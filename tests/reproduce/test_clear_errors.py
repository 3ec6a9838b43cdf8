"""Bad input to the reproduce commands gets an error naming what is wrong, never a traceback or a write elsewhere: an
experiment name or results folder that would leave --root, `report` run outside the checkout, a truncated record at
`plot` (and at `report`)."""
import json

import pytest
from click.testing import CliRunner

from reproduce.analysis.report import build_report, check_reference
from reproduce.cli import cli
from reproduce.harness.resolve import load_experiment

EXPERIMENT = """
name = {name}
{results}
[defaults]
mode = "embedding-only"
iters = 1
warmup = 0
num_batches = 1
threads = 1
[grid]
impl = ["dense-torch"]
data = ["uniform"]
batch_size = [32]
[data_options]
num_tables = 1
rows = 100
dim = 4
"""


def _experiment(tmp_path, name='"tiny"', results=""):
    f = tmp_path / "x.toml"
    f.write_text(EXPERIMENT.format(name=name, results=results))
    return f


@pytest.mark.parametrize("name,results", [('"../../escape"', ""), ('"/abs"', ""), ('".hidden"', ""), ("3", ""),
                                          ('"tiny"', 'results = "a/b"'), ('"tiny"', 'results = ".."')])
def test_an_experiment_never_names_a_folder_outside_root(tmp_path, name, results):
    with pytest.raises(ValueError, match="must name one folder"):
        load_experiment(_experiment(tmp_path, name, results), root=tmp_path / "root")
    res = CliRunner().invoke(cli, ["sweep", str(_experiment(tmp_path, name, results)), "--root", str(tmp_path / "r"),
                                   "--dry-run"])
    assert res.exit_code == 2 and "must name one folder" in res.output and not (tmp_path / "r").exists()
    assert not list(tmp_path.parent.glob("escape*"))


def test_report_outside_the_checkout_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for args in (["report"], ["report", "--check"]):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 2 and f"no results/ folder under {tmp_path}" in res.output
        assert "Traceback" not in res.output
    with pytest.raises(ValueError, match="no results/ folder"):
        check_reference(tmp_path)


def test_report_reads_the_packages_claims_from_any_folder(tmp_path):
    (tmp_path / "results").mkdir()
    paths = build_report(tmp_path, readme=False)  # no claims.toml here: the package's
    assert (tmp_path / "results" / "REPORT.md") in paths
    with pytest.raises(ValueError, match="cannot read the claims file"):
        build_report(tmp_path, claims="missing.toml", readme=False)
    (tmp_path / "bad.toml").write_text("[claim\n")
    with pytest.raises(ValueError, match="bad.toml is not valid TOML"):
        build_report(tmp_path, claims="bad.toml", readme=False)


def test_a_truncated_record_is_named_at_plot_and_report(tmp_path, monkeypatch):
    f = _experiment(tmp_path)
    exp = load_experiment(f, root=tmp_path)
    exp.out_dir.mkdir(parents=True)
    good = {"point": exp.points[0].to_dict(), "status": "ok", "point_id": exp.points[0].point_id, "repeat": 0}
    text = json.dumps(good)
    bad = exp.out_dir / f"{exp.points[0].point_id}.r0.json"
    bad.write_text(text[: len(text) // 2])
    res = CliRunner().invoke(cli, ["plot", str(f), "--root", str(tmp_path), "--machine", exp.machine])
    assert res.exit_code == 2 and bad.name in res.output and "not a readable record" in res.output
    assert bad.read_text() == text[: len(text) // 2]  # left as it was for the user to look at
    sc24 = tmp_path / "results" / "sc24" / exp.machine
    sc24.mkdir(parents=True)
    (sc24 / bad.name).write_text(bad.read_text())
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["report", "--machine", exp.machine, "--no-readme"])
    assert res.exit_code == 2 and bad.name in res.output and "not a readable record" in res.output


def test_a_folder_that_cannot_be_written_is_refused_up_front_naming_it(tmp_path, monkeypatch):
    """As root a read-only mode does not stop writes, so the cases are a path under /proc (no such parent, not
    writable) and a path under a file; every command that writes a folder refuses before running or reading."""
    f = _experiment(tmp_path)
    (tmp_path / "afile").write_text("mine\n")
    monkeypatch.chdir(tmp_path)
    cases = [
        (["sweep", str(f), "--root", "/proc/dlrmbench-nope"], "--root: the result folder /proc/dlrmbench-nope/"),
        (["run", "--impl", "dense-torch", "--data", "uniform", "--rows", "10", "--iters", "1", "--out",
          "afile/sub"], "--out afile/sub cannot be written: Not a directory"),
        (["data", "synth", "uniform", "--out", "afile/sub", "--samples", "10"], "its folder afile is a file"),
        (["data", "prepare", "tabular", "--raw", str(f), "--label", "a", "--out", "/proc/dlrmbench-nope/x"],
         "its folder /proc/dlrmbench-nope cannot be written"),
    ]
    for args, said in cases:
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 2 and said in res.output, (args, res.output)
    assert (tmp_path / "afile").read_text() == "mine\n"


def _synth(tmp_path):
    out = tmp_path / "d"
    res = CliRunner().invoke(cli, ["data", "synth", "uniform", "--out", str(out), "--samples", "64",
                                   "--num-tables", "2", "--rows", "50", "--dim", "4"])
    assert res.exit_code == 0, res.output
    return out


@pytest.mark.parametrize("damage,match", [
    (lambda d: (d / "meta.json").write_text('{"name": "x", "rows": {"tr'), r"meta.json is not readable JSON"),
    (lambda d: (d / "meta.json").write_text('[1, 2]'), r"meta.json is not a dlrmbench dataset's metadata"),
    (lambda d: (d / "meta.json").unlink(), r"meta.json is missing"),
    (lambda d: (d / "train" / "lengths.npy").write_bytes((d / "train" / "lengths.npy").read_bytes()[:100]),
     r"train/lengths.npy is not a readable array"),
    (lambda d: (d / "val" / "labels.npy").unlink(), r"val/labels.npy is missing"),
    (lambda d: (d / "train" / "values.bin").write_bytes(b"\0" * 8), r"train/values.bin: 8 bytes, row_offsets.npy says"),
])
@pytest.mark.parametrize("command", ["run", "train"])
def test_a_damaged_dataset_is_named_before_anything_runs(tmp_path, damage, match, command):
    data = _synth(tmp_path)
    damage(data)
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, [command, "--impl", "dense-torch", "--data", str(data), "--out", str(out)])
    assert res.exit_code == 2 and match in " ".join(res.output.split()).replace(str(data) + "/", ""), res.output
    assert not out.exists()


def test_a_record_is_never_written_over_a_users_file(tmp_path):
    from reproduce.harness.point import RunPoint
    from reproduce.harness.launch import launch_point
    from reproduce.harness.record_store import record_path

    point = RunPoint(impl="dense-torch", data="uniform", batch_size=8, iters=1, warmup=0, num_batches=1,
                     data_options={"num_tables": 1, "rows": 20, "dim": 4})
    path = record_path(tmp_path, point)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("my notes, which happen to have this name")
    with pytest.raises(ValueError, match="is not a dlrmbench run record: refusing to overwrite it"):
        launch_point(point, tmp_path)
    assert path.read_text() == "my notes, which happen to have this name"
    path.unlink()
    assert launch_point(point, tmp_path).status == "ok"
    assert launch_point(point, tmp_path).status == "ok"  # a record of ours is rerun over
