"""Experiments parse without I/O (experiment.py): a TOML becomes plain point specs without opening a dataset, asking
the registry or looking for a calibration profile, so an experiment whose data does not exist parses, and `plot`
redraws a set's figures from its records alone, writing nothing outside figures/. Every committed record is a point
of its experiment, under the id point.point_id gives it."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from reproduce.cli import cli
from reproduce.harness.experiment import DATA_PLACEHOLDER, experiment_names, experiments_folder, parse, read_toml
from reproduce.harness.machine import reference_machine
from reproduce.harness.record_store import records_in
from reproduce.harness.records import point_id
from reproduce.harness.resolve import load_experiment

ROOT = Path(__file__).resolve().parents[2]


def _profiles(name: str) -> list[str]:
    return ["cpu", *(p for p in read_toml(experiments_folder() / f"{name}.toml").get("profiles", {}) if p != "cpu")]


def test_parsing_every_experiment_imports_no_implementation_and_opens_only_its_toml():
    script = f"""
import builtins, io, json, os, sys
from reproduce.harness.experiment import experiment_names, experiments_folder, parse, read_toml
todo = [(path, profile) for path in (experiments_folder() / (n + ".toml") for n in experiment_names())
        for profile in ["cpu", *read_toml(path).get("profiles", {{}})]]
opened = []
real_open, real_stat = builtins.open, os.stat
builtins.open = io.open = lambda f, *a, **k: (opened.append(str(f)), real_open(f, *a, **k))[1]
os.stat = lambda p, *a, **k: (opened.append(str(p)), real_stat(p, *a, **k))[1]
for path, profile in todo:
    parse(path, profile)
builtins.open, io.open, os.stat = real_open, real_open, real_stat
print(json.dumps({{"opened": sorted(set(opened)), "impls": sorted(m for m in sys.modules if m.startswith("impls"))}}))
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["impls"] == [], got["impls"]  # no registry, no data source, no system
    assert got["opened"] and all(p.endswith(".toml") for p in got["opened"]), got["opened"]


def test_an_experiment_whose_data_does_not_exist_parses_and_is_refused_when_resolved(tmp_path):
    path = tmp_path / "e.toml"
    path.write_text('[grid]\nimpl = ["dense-torch", "hash"]\ndata = ["/no/such/folder", "$DATA"]\n'
                    'batch_size = [64]\nbudget = [0.1]\n[defaults]\nepochs = 1\neval_every = 2\n')
    exp = parse(path)
    assert len(exp.specs) == 4 and exp.reads_data and exp.impls == ["dense-torch", "hash"]
    assert {s.fields["data"] for s in exp.specs} == {"/no/such/folder", DATA_PLACEHOLDER}
    with pytest.raises(ValueError, match="give --data DIR"):
        load_experiment(path, root=tmp_path)


def _committed_sets():
    ref = reference_machine(ROOT / "results")
    for name in experiment_names():
        for profile in _profiles(name):
            exp = parse(experiments_folder() / f"{name}.toml", profile)
            out = exp.out_dir(ROOT, ref)
            if any(out.glob("*.json")):
                yield exp, out


def test_every_committed_record_is_a_point_of_its_experiment_under_its_id():
    sets = list(_committed_sets())
    assert len(sets) >= 9, [str(o) for _, o in sets]
    for exp, out in sets:
        # systems from outside (a record's fingerprint names their spec) were raced in the $IMPL slot by --impl
        outside = tuple(sorted({r.point["impl"] for r in records_in(out) if (r.body.code or {}).get("system")}))
        exp = parse(exp.path, exp.profile, impls=outside) if outside else exp
        for rec in records_in(out):
            assert rec.point_id == point_id(rec.point), (out, rec.point_id)
            assert any(s.matches(rec.point) for s in exp.specs), (str(out), rec.point_id)


def test_plot_on_a_fresh_clone_writes_nothing_outside_figures(tmp_path):
    ref = reference_machine(ROOT / "results")
    for name in ("compression", "sc24"):  # one trains on its own [synth] dataset, one on presets
        shutil.copytree(ROOT / "results" / name / ref, tmp_path / "results" / name / ref)
    (tmp_path / "results" / "REFERENCE_MACHINE").write_text(ref + "\n")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    for name in ("compression", "sc24"):
        res = CliRunner().invoke(cli, ["plot", str(experiments_folder() / f"{name}.toml"), "--root", str(tmp_path)])
        assert res.exit_code == 0, res.output
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    outside = {p for p in set(after) | set(before) if not p.relative_to(tmp_path).parts[0] == "figures"}
    assert {p for p in outside if before.get(p) != after.get(p)} == set()
    assert any(p.suffix == ".png" for p in after if p not in before)
