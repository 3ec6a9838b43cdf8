"""A run's fingerprint is the code it executed (reproduce/harness/fingerprint.py): the project modules loaded by the
end of its timed loop minus a bookkeeping set that runs no frame between the start of the build and the end of the
timed loop (proven here with sys.setprofile for every system, on one device and over two gloo ranks), the native
source groups of the ops its code calls with the build, and the digests of its on-disk inputs. So: editing the file
lock or the Criteo parser leaves sc24 fresh; editing a kernel sc24 never calls leaves it fresh, one it calls does
not; editing the generator of a `data synth` dataset stales the runs that trained on it."""
import json
import shutil
from pathlib import Path

import pytest

from impls.api import get_impl, registered_names
from reproduce.analysis.freshness import record_set_state
from reproduce.harness import code, fingerprint
from reproduce.harness.point import RunPoint
from reproduce.harness.record_store import write_record
from reproduce.harness.records import Record
from tests.reproduce.window_runs import run_fresh

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = {"ttrec": {"ranks": 8, "tt_min_rows": 0}, "elrec": {"ranks": 8, "tt_min_rows": 0},
           "ecorec": {"ranks": 8, "tt_min_rows": 0, "micro_batches": 2},
           # the planner plans on a calibration profile: the committed one (an input of the run)
           "embark": {"calibration": str(next((ROOT / "results" / "calibration").glob("*/gloo.json")))}}


def _point(impl: str, world_size: int = 1, data: str = "criteo-kaggle", **kw) -> RunPoint:
    opts = {} if data != "criteo-kaggle" else {"max_rows": 2000, "dim": 8}
    return RunPoint(impl=impl, data=data, batch_size=16, iters=2, warmup=1, num_batches=2, mode="embedding-only",
                    world_size=world_size, data_options=opts, impl_options=OPTIONS.get(impl, {}), dist_timeout_s=60.0,
                    **kw)


def _available(name: str) -> bool:
    try:
        get_impl(name)
    except ImportError:
        return False
    return True


SYSTEMS = [n for n in registered_names() if _available(n)]


_RUNS: dict[tuple[str, int], tuple[dict, set[str]]] = {}


def _runs(keys, tmp_path_factory) -> dict[tuple[str, int], tuple[dict, set[str]]]:
    """{(impl, world size): (record dict, modules that ran in the window)} of each key, each point run once in this
    process's tests (in fresh processes, ``run_fresh``) and kept for the tests after it."""
    todo = [k for k in dict.fromkeys(keys) if k not in _RUNS]
    points = [_point(impl, world) for impl, world in todo]
    if points:
        _RUNS.update(zip(todo, run_fresh(points, tmp_path_factory.mktemp("runs"))))
    return {k: _RUNS[k] for k in keys}


def _keys(impl: str) -> list[tuple[str, int]]:
    """A system's points here: on one device (unless it runs over ranks only) and over two gloo ranks."""
    return [*([] if get_impl(impl).distributed_only else [(impl, 1)]), (impl, 2)]


def test_every_native_source_is_in_exactly_one_group():
    csrc = ROOT / fingerprint.CSRC
    files = sorted(p.relative_to(csrc).as_posix() for p in csrc.rglob("*") if p.is_file())
    grouped = [f for group in fingerprint.NATIVE_GROUPS.values() for f in group]
    assert sorted(grouped) == files, (f"ungrouped: {sorted(set(files) - set(grouped))}; "
                                      f"gone: {sorted(set(grouped) - set(files))}; twice: "
                                      f"{sorted(f for f in grouped if grouped.count(f) > 1)}")
    import torch

    import impls.core.ops  # noqa: F401
    ops = {n.split("::", 1)[1] for n in torch._C._dispatch_get_all_op_names() if n.startswith("dlrmbench::")}
    assert ops == set(fingerprint.OP_GROUPS), f"ops without a group: {sorted(ops - set(fingerprint.OP_GROUPS))}"


@pytest.mark.parametrize("impl", SYSTEMS)
def test_bookkeeping_modules_run_no_frame_between_the_build_and_the_end_of_the_timed_loop(impl, tmp_path_factory):
    runs = _runs(_keys(impl), tmp_path_factory)
    assert (impl, 2) in runs
    for (impl, world), (record, ran) in runs.items():
        assert record["status"] == "ok", (impl, world, record.get("reason"))
        assert ran, (impl, world)  # the window opened
        assert not ran & fingerprint.BOOKKEEPING, (impl, world, sorted(ran & fingerprint.BOOKKEEPING))
        files = record["code"]["files"]
        missing = sorted(m for m in ran if str(code.modules()[m].relative_to(ROOT)) not in files)
        assert not missing, (impl, world, missing)  # everything that ran is in the fingerprint


def test_a_run_fingerprints_what_it_loaded_not_what_it_could_import(tmp_path_factory):
    runs = _runs([("ecorec", 1), ("dense-torch", 1), ("embark", 2)], tmp_path_factory)
    ecorec = runs[("ecorec", 1)][0]["code"]
    assert "impls/ecorec/collection.py" in ecorec["files"] and "impls/core/csrc/cpu/tt_forward.cpp" in ecorec["files"]
    assert not any(f.startswith(("impls/ttrec", "impls/elrec", "impls/embark", "impls/sharding")) for f in
                   ecorec["files"])
    assert "impls/core/csrc/cuda/tt.cu" not in ecorec["files"]  # a CPU run: no CUDA kernel
    assert {"tt_stages", "tt_stages_backward", "bounds_check"} <= set(ecorec["ops"])
    assert "route_keys" not in ecorec["ops"] and "setup.py" in ecorec["files"]
    assert ecorec["build"]["isa"] in ecorec["build"]["isas"]
    dense = runs[("dense-torch", 1)][0]["code"]["files"]
    assert "impls/core/csrc/cpu/tt_forward.cpp" not in dense and "impls/data/criteo.py" not in dense
    embark = runs[("embark", 2)][0]["code"]
    assert "route_keys" in embark["ops"] and "impls/sharding/comm.py" in embark["files"]
    assert "impls/dense/fbgemm_tbe.py" in embark["files"] or "impls/dense/torch_bag.py" in embark["files"]


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.o")
    for pkg in ("impls", "reproduce", "benchmarks"):
        shutil.copytree(ROOT / pkg, root / pkg, ignore=ignore)
    shutil.copy(ROOT / "setup.py", root / "setup.py")
    return root


def _edit(root: Path, rel: str) -> None:
    path = root / rel
    text = path.read_text()
    path.write_text(text + ("\nEDITED = 1\n" if rel.endswith(".py") else "\nstatic int edited = 1;\n"))


def _set(root: Path, name: str, records: list[dict]) -> Path:
    out = root / "results" / name / "m"
    for d in records:
        rec = Record.from_dict(d)
        write_record(out / f"{rec.point_id}.r{rec.repeat}.json", rec)
    return out


def test_editing_the_file_lock_the_criteo_parser_or_an_uncalled_kernel_leaves_sc24_fresh(tmp_path, tmp_path_factory):
    runs = _runs([("ecorec", 1), ("ecorec", 2), ("dense-torch", 1)], tmp_path_factory)  # sc24's TT and dense sides
    root = _tree(tmp_path)
    out = _set(root, "sc24", [run for run, _ in runs.values()])
    assert not record_set_state(out, "sc24", "m", root).is_stale
    for rel in ("impls/data/lockfile.py", "impls/data/criteo.py", "impls/core/csrc/cpu/route_keys.cpp",
                "impls/core/csrc/cuda/tt.cu", "impls/compress/md.py"):
        _edit(root, rel)
        assert not record_set_state(out, "sc24", "m", root).is_stale, rel
    _edit(root, "impls/core/csrc/cpu/tt_forward.cpp")
    st = record_set_state(out, "sc24", "m", root)
    assert st.is_stale and "impls/core/csrc/cpu/tt_forward.cpp" in st.state()


def test_editing_the_generator_of_a_synth_dataset_stales_its_runs_and_so_does_rewriting_its_bytes(tmp_path):
    from reproduce.harness.synth_data import write_synth

    data = write_synth({"name": "tiny", "preset": "criteo-kaggle", "samples": 256, "teacher": "vector",
                        "options": {"max_rows": 500, "dim": 8}}, tmp_path)
    point = RunPoint(impl="hash", data=str(data), batch_size=16, iters=2, warmup=1, num_batches=2,
                     impl_options={"min_rows": 100})
    ((rec, _),) = run_fresh([point], tmp_path)
    assert rec["status"] == "ok" and set(rec["code"]["inputs"]) == {"data"}
    assert "impls/data/teachers.py" in rec["code"]["files"]
    root = _tree(tmp_path)
    out = _set(root, "compression", [rec])
    assert not record_set_state(out, "compression", "m", root).is_stale
    _edit(root, "impls/data/teachers.py")
    st = record_set_state(out, "compression", "m", root)
    assert st.is_stale and "impls/data/teachers.py" in st.state()
    root2 = _tree(tmp_path / "again")
    out2 = _set(root2, "compression", [rec])
    labels = data / "train" / "labels.npy"
    raw = labels.read_bytes()
    labels.write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))
    st = record_set_state(out2, "compression", "m", root2)
    assert st.is_stale and "input data" in st.state()


def test_a_platform_change_is_said_beside_the_state_not_as_stale(tmp_path, tmp_path_factory):
    runs = _runs([("dense-torch", 1)], tmp_path_factory)
    root = _tree(tmp_path)
    rec = json.loads(json.dumps(runs[("dense-torch", 1)][0]))
    rec["env"]["torch"] = "1.0.0"
    st = record_set_state(_set(root, "sc24", [rec]), "sc24", "m", root)
    assert not st.is_stale and "platform: torch 1.0.0 -> " in st.state()


def test_a_large_dataset_is_digested_by_its_identity_not_read_again(tmp_path, monkeypatch):
    """Over FULL_DIGEST_BYTES a dataset this tool wrote is digested by its marker, meta.json and file sizes: a
    rewritten dataset (another marker or meta, another size) changes the digest, reading its arrays is spared."""
    from impls.data.export import write_synthetic
    from impls.data.presets import get_preset

    data = tmp_path / "d"
    write_synthetic("u", get_preset("uniform", num_tables=2, rows=50, dim=4), data, 64)
    full = fingerprint.content_digest(data)
    monkeypatch.setattr(fingerprint, "FULL_DIGEST_BYTES", 0)
    ident = fingerprint.content_digest(data)
    assert ident != full
    labels = data / "train" / "labels.npy"
    raw = labels.read_bytes()
    labels.write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))  # same size: the identity does not see it (documented)
    assert fingerprint.content_digest(data) == ident
    labels.write_bytes(raw + b"\0")  # another size does
    assert fingerprint.content_digest(data) != ident
    labels.write_bytes(raw)
    meta = data / "meta.json"
    meta.write_text(meta.read_text().replace('"name": "u"', '"name": "v"'))
    assert fingerprint.content_digest(data) != ident


def test_a_point_that_names_no_dataset_reads_no_input(tmp_path, monkeypatch):
    """A point without data (or with an empty one) digests nothing: not the current folder, whose files change."""
    from reproduce.harness.fingerprint import input_paths

    monkeypatch.chdir(tmp_path)
    assert input_paths({"impl": "dense-torch"}) == {} and input_paths({"impl": "dense-torch", "data": ""}) == {}
    (tmp_path / "d").mkdir()
    assert input_paths({"impl": "dense-torch", "data": "d"})["data"].resolve() == (tmp_path / "d").resolve()
