"""Fault suite, record ids: a `--data` path (nested, relative with `..`, with spaces) never becomes folders or a
path outside the result set; plain preset names keep their ids, so committed records stay found."""
import os
from pathlib import Path

from impls.data.export import write_synthetic
from impls.data.presets import get_preset
from reproduce.harness.config import load_experiment
from reproduce.harness.point import RunPoint
from reproduce.harness.point_id import name_slug
from reproduce.harness.records import record_path
from reproduce.harness.machine import reference_machine
from reproduce.harness.sweep import plan, todo

ROOT = Path(__file__).resolve().parents[2]


def test_a_data_path_becomes_a_slug_inside_the_result_set(tmp_path):
    data = tmp_path / "a b" / "my log"
    write_synthetic("u", get_preset("uniform", num_tables=2, rows=50, dim=4), data, 16)
    rel = os.path.relpath(data)  # from the working directory: climbs with ../
    for given in (str(data), rel):
        p = RunPoint(impl="dense-torch", data=given, batch_size=8, mode="embedding-only")
        pid = p.point_id
        assert "/" not in pid and ".." not in pid and " " not in pid and pid.startswith("dense-torch__my-log-")
        out = tmp_path / "results"
        assert record_path(out, p, 2).parent == out and record_path(out, p, 2).name == f"{pid}.r2.json"
    assert name_slug(str(data)) == name_slug(rel)  # the same folder, however it is named
    other = tmp_path / "elsewhere" / "my log"
    assert name_slug(str(other)) != name_slug(str(data))  # same last part, another folder
    assert name_slug("..") != ".." and "/" not in name_slug("../../etc")


def test_plain_names_keep_their_ids():
    assert name_slug("criteo-kaggle") == "criteo-kaggle" and name_slug("dense-fbgemm") == "dense-fbgemm"
    ref = reference_machine(ROOT / "results")
    exp = load_experiment(ROOT / "reproduce" / "experiments" / "sc24.toml", root=ROOT, machine=ref)
    assert not any(to_run for *_, to_run in plan(exp))  # every committed record is still found under its id
