"""Fault suite, record ids: a `--data` path (nested, relative with `..`, with spaces) never becomes folders or a
path outside the result set; plain preset names keep their ids, so committed records stay found."""
import os
from pathlib import Path

from impls.data.export import write_synthetic
from impls.data.presets import get_preset
from reproduce.harness.resolve import load_experiment
from reproduce.harness.point import RunPoint
from reproduce.harness.point import dataset_name, slug
from reproduce.harness.record_store import record_path
from reproduce.harness.machine import reference_machine
from reproduce.harness.sweep import plan

ROOT = Path(__file__).resolve().parents[2]


def test_a_data_path_becomes_a_slug_inside_the_result_set(tmp_path):
    data = tmp_path / "a b" / "my log"
    write_synthetic("u", get_preset("uniform", num_tables=2, rows=50, dim=4), data, 16)
    rel = os.path.relpath(data)  # from the working directory: climbs with ../
    ids = set()
    for given in (str(data), rel):
        p = RunPoint(impl="dense-torch", data=given, batch_size=8, mode="embedding-only")
        pid = p.point_id
        assert "/" not in pid and ".." not in pid and " " not in pid and pid.startswith("dense-torch__my-log__")
        out = tmp_path / "results"
        assert record_path(out, p, 2).parent == out and record_path(out, p, 2).name == f"{pid}.r2.json"
        ids.add(pid)
    assert len(ids) == 1  # the same folder, however it is named: no machine-local path in the id
    assert dataset_name(str(data)) == "my log" and slug("..") != ".." and "/" not in slug("../../etc")


def test_an_id_is_the_measured_configuration_not_its_label_or_where_inputs_live():
    base = RunPoint(impl="embark", data="uniform", batch_size=8, world_size=2)
    assert RunPoint(**{**base.to_dict(), "label": "planner"}).point_id == base.point_id
    with_profile = {**base.to_dict(), "impl_options": {"calibration": "/somewhere/results/calibration/m/gloo.json"}}
    assert RunPoint.from_dict(with_profile).point_id == base.point_id
    assert RunPoint(**{**base.to_dict(), "seed": 1}).point_id != base.point_id
    inside = str(ROOT / "datasets" / "synth" / "x")  # in this checkout or any other: no machine-local path
    assert dataset_name(inside) == "x" == dataset_name("/elsewhere/datasets/synth/x") == dataset_name("datasets/synth/x")


def test_plain_names_keep_their_ids():
    assert slug("criteo-kaggle") == "criteo-kaggle" and slug("dense-fbgemm") == "dense-fbgemm"
    ref = reference_machine(ROOT / "results")
    exp = load_experiment(ROOT / "reproduce" / "experiments" / "sc24.toml", root=ROOT, machine=ref)
    assert not any(to_run for *_, to_run in plan(exp))  # every committed record is still found under its id


def test_a_record_of_another_dataset_with_the_same_folder_name_is_refused_not_taken(tmp_path):
    """Ids name a dataset by its folder's name: a sweep over b/clicks finding the record of a/clicks at that id refuses,
    naming both, before anything runs (it neither counts it as done nor overwrites it)."""
    from click.testing import CliRunner

    from reproduce.cli import cli
    from reproduce.harness.record_store import write_record
    from reproduce.harness.records import Record

    for side in ("a", "b"):
        write_synthetic("u", get_preset("uniform", num_tables=2, rows=50, dim=4), tmp_path / side / "clicks", 64)
    toml = tmp_path / "e.toml"
    toml.write_text('[grid]\nimpl = ["dense-torch"]\ndata = ["$DATA"]\nbatch_size = [8]\n[defaults]\nepochs = 1\n')
    first = load_experiment(toml, root=tmp_path, machine="m", data=str(tmp_path / "a" / "clicks"))
    (point,) = first.points
    write_record(record_path(first.out_dir, point), Record.failed(point.to_dict(), "x", point_id_=point.point_id))
    res = CliRunner().invoke(cli, ["sweep", str(toml), "--root", str(tmp_path), "--machine", "m", "--dry-run",
                                   "--data", str(tmp_path / "b" / "clicks")])
    assert res.exit_code == 2 and "has the same folder name" in " ".join(res.output.split()), res.output
