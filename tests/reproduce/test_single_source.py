"""Each default, list and registration is stated once and everything else derives from it: RunPoint's fields are the
defaults of point ids and of the flat tables; the experiments folder is the list of experiments (make targets, the
report's sets); a system of ours registers where its class is (@register), with its check-system options on the
class as an outside system's."""
import shutil
import subprocess
from dataclasses import fields
from pathlib import Path

import pytest

from impls.api import get_impl, registered_names
from impls.our_systems import modules as our_systems
from reproduce.analysis.aggregate import flatten
from reproduce.conformance.cases import structure_options
from reproduce.harness import experiment as experiments
from reproduce.harness.point import RunPoint, point_defaults
from reproduce.harness.point import point_id
from reproduce.harness.records import Record

ROOT = Path(__file__).resolve().parents[2]
POINT = {"impl": "dense-torch", "data": "uniform", "batch_size": 8}


def _field(name: str):
    return next(f for f in fields(RunPoint) if f.name == name)


def test_an_id_states_every_field_at_runpoints_defaults_and_the_flat_tables_read_them(monkeypatch):
    full = RunPoint.from_dict(POINT).to_dict()
    # a field a point leaves out is at RunPoint's default (the one place it is stated), and every field is in the id
    assert point_id(POINT) == point_id(full) == point_id({**point_defaults(), **POINT})
    for name in ("max_iters", "warmup_max", "world_size", "seed", "twin"):
        other = {"world_size": 2, "twin": 1}.get(name, (full[name] or 0) + 1)
        assert point_id({**full, name: other}) != point_id(full), name
    monkeypatch.setattr(_field("seed"), "default", 7)  # a record that lacks a field: read at RunPoint's default
    row = flatten(Record.failed(dict(POINT), "ran", point_id_="x"))
    assert row["seed"] == 7 and row["world_size"] == point_defaults()["world_size"]


def test_point_id_and_the_flat_tables_state_no_default_of_their_own():
    import inspect

    from reproduce.harness import point

    for fn in (point.measured, point.point_id, flatten):
        text = inspect.getsource(fn)
        assert "[512, 256]" not in text and "300.0" not in text and '", 1)' not in text, fn.__name__


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A copy of the experiments folder with one more experiment, the folder the harness reads."""
    exps = tmp_path / "experiments"
    shutil.copytree(experiments.experiments_folder(), exps)
    (exps / "new_study.toml").write_text('name = "new_study"\ndescription = "a study added by one file"\n'
                                         'report = ["new-study"]\nreference = ["cpu"]\n'
                                         '[grid]\nimpl = ["dense-torch"]\ndata = ["uniform"]\nbatch_size = [8]\n')
    monkeypatch.setattr(experiments, "experiments_folder", lambda: exps)
    return exps


def test_a_new_experiment_file_gets_a_report_entry_and_a_name_with_no_other_edit(folder):
    assert "new_study" in experiments.experiment_names()
    assert "new_study" in experiments.reference_sets()  # the report's sets and `report --check`
    assert ("new-study", "new_study") in experiments.report_blocks()
    assert experiments.experiment_name("new-study") == "new_study"  # `make reproduce-new-study`
    assert experiments.profiles_to_reproduce("new_study") == ["cpu"]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_every_experiment_has_a_make_target_from_one_pattern_rule():
    names = experiments.experiment_names()
    out = subprocess.run(["make", "-n", "-o", "install", *(f"reproduce-{n.replace('_', '-')}" for n in names),
                          "reproduce-new-study"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for n in [*names, "new_study"]:
        assert f"dlrmbench reproduce --launcher local --root . {n.replace('_', '-')}" in out, (n, out)
    listed = subprocess.run(["make", "help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert all(f"make reproduce-{n.replace('_', '-')} " in listed for n in names), listed
    makefile = (ROOT / "Makefile").read_text()
    assert not [n for n in names if f"reproduce {n}" in makefile or f"reproduce-{n}:" in makefile]


def test_a_system_of_ours_registers_where_its_class_is(tmp_path):
    table = our_systems()
    assert set(table) <= set(registered_names())
    for name, module in table.items():
        try:
            assert get_impl(name).__module__ == module
        except ImportError:  # an optional dependency missing here: known by name all the same
            continue
    registry = (ROOT / "impls" / "registry.py").read_text()
    assert not [n for n in table if f'"{n}"' in registry]  # no second list of names
    new = tmp_path / "impls" / "newsys"
    new.mkdir(parents=True)
    (new / "collection.py").write_text('from impls.api import register\n\n\n@register\nclass New:\n'
                                       '    name = "newsys"\n')
    assert our_systems(tmp_path / "impls") == {"newsys": "impls.newsys.collection"}
    (new / "twice.py").write_text('from impls.api import register\n\n\n@register\nclass Again:\n'
                                  '    name = "newsys"\n')
    with pytest.raises(ValueError, match="registered twice"):
        our_systems(tmp_path / "impls")


@pytest.mark.parametrize("name", ["hash", "qr", "md", "embark"])
def test_check_options_of_ours_are_on_the_class_as_for_an_outside_system(name):
    cls = get_impl(name)
    assert structure_options(cls) == cls.check_options
    assert f'"{name}"' not in (ROOT / "reproduce" / "conformance" / "cases.py").read_text()


def test_reproduce_runs_each_experiments_reference_profiles_from_its_toml():
    assert experiments.profiles_to_reproduce("aa-schedule") == ["cpu", "duet"]  # both schedules, one command
    assert "real" not in experiments.profiles_to_reproduce("accuracy")  # `real` needs --data
    assert "real" in experiments.profiles_to_reproduce("accuracy", with_data=True)
    assert experiments.profiles_to_reproduce("compression", with_data=True) == ["real"]
    assert experiments.profiles_to_reproduce("sc24") == ["cpu"]
    assert experiments.default_slot(experiments.experiments_folder() / "compression.toml")[0].endswith(
        "examples/lowrank.py:LowRankEmbedding")
