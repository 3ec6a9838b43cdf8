"""Evidence that describes today's code: a record's code fingerprint ignores docstrings and comments but not code;
`report --check` passes while every reference set was measured on the code here, fails after a code change in what
a set measures (naming the file), not after a docstring edit; a STALE set gives no verdict."""
import json
import shutil
from pathlib import Path

import pytest

from reproduce.analysis.claims import evaluate_claim
from reproduce.analysis.freshness import REFERENCE_SETS, RECORD_SETS, SetState, bench_fingerprint
from reproduce.analysis.model_code import fit_inputs, model_fingerprint, scale_model_fingerprint
from reproduce.analysis.report import check_reference
from reproduce.harness import code, fingerprint
from reproduce.harness.record_store import write_json, write_record
from reproduce.harness.records import Record, point_id

ROOT = Path(__file__).resolve().parents[2]
M = "test-box"


def test_a_docstring_or_comment_edit_keeps_the_hash_a_code_edit_changes_it(tmp_path):
    py = tmp_path / "m.py"
    py.write_text('"""Module."""\n\ndef f(x):\n    """Double."""\n    return 2 * x  # twice\n')
    h = code.file_hash(py)
    py.write_text('"""Module, reworded."""\n\n\ndef f(x):\n    """Twice x."""\n    # a comment\n    return 2 * x\n')
    assert code.file_hash(py) == h
    py.write_text('"""Module."""\n\ndef f(x):\n    """Double."""\n    return 3 * x\n')
    assert code.file_hash(py) != h
    cpp = tmp_path / "k.cpp"
    cpp.write_text('// kernel\nint f(int x) { /* twice */ return 2 * x; }\nconst char* s = "a // b";\n')
    h = code.file_hash(cpp)
    cpp.write_text('/* the kernel */\nint f(int x) {\n  return 2 * x;  // twice\n}\nconst char* s = "a // b";\n')
    assert code.file_hash(cpp) == h
    cpp.write_text('int f(int x) { return 2 * x; }\nconst char* s = "a // c";\n')  # a string is code
    assert code.file_hash(cpp) != h


def test_a_system_built_by_name_is_part_of_what_a_benchmark_measures():
    """The benchmarks' fingerprint is what their code imports (they are not run records): a system they build by
    registry name is in it."""
    assert "impls/ttrec/collection.py" in bench_fingerprint()["files"]  # the TT step benchmarks build TT-Rec by name


# what a dense-torch run loads (a stand-in for a worker's sys.modules: test_fingerprint.py runs real ones)
DENSE_RUN = ("impls.dense.torch_bag", "impls.data.sources", "impls.data.loader", "impls.model.train",
             "reproduce.harness.worker", "reproduce.harness.training")


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.o")
    for pkg in ("impls", "reproduce", "benchmarks"):
        shutil.copytree(ROOT / pkg, root / pkg, ignore=ignore)
    code.modules.cache_clear()
    return root


REC = f"{point_id({'impl': 'dense-torch', 'data': 'uniform', 'batch_size': 8})}.r0.json"  # its record's name


def _fresh_sets(root: Path) -> None:
    """One record per reference set measured on the code under ``root``, a fresh bench and scale-model fit."""
    results = root / "results"
    (results).mkdir(parents=True, exist_ok=True)
    (results / "REFERENCE_MACHINE").write_text(M + "\n")
    point = {"impl": "dense-torch", "data": "uniform", "batch_size": 8, "world_size": 1, "device": "cpu"}
    ran = code.closure(DENSE_RUN, root, follow=DENSE_RUN[-2:])
    for name in RECORD_SETS:
        rec = Record(point, "ok", body={
            "env": {"git_sha": "f" * 40, "git_dirty": False}, "code": fingerprint.of_run(ran, point, root)})
        write_record(results / name / M / REC, rec)
    write_json(results / "bench" / M / "benchmarks.json", {"benchmarks": [{}], "dlrmbench": {
        "git_sha": "f" * 40, "git_dirty": False, "code": bench_fingerprint(root)}})
    write_json(results / "scale_model" / M / "fit.json", {
        "git_sha": "f" * 40, "code": scale_model_fingerprint(root), "inputs": fit_inputs(results / "sc24" / M)})
    (results / "recsys24_model").mkdir()
    (results / "recsys24_model" / "modeled.csv").write_text("workload,gpus,speedup\nT180,8,1.5\n")
    write_json(results / "recsys24_model" / "model.json", {
        "git_sha": "f" * 40, "code": model_fingerprint("reproduce.analysis.recsys24_model", root)})


def test_report_check_fails_after_a_code_change_not_after_a_docstring_edit(tmp_path):
    root = _tree(tmp_path)
    _fresh_sets(root)
    assert check_reference(root) == []
    bag = root / "impls" / "dense" / "torch_bag.py"
    text = bag.read_text()
    head, sep, rest = text.partition('"""')
    bag.write_text(head + sep + "Reworded: " + rest)  # the module docstring
    assert check_reference(root) == []
    loop = root / "reproduce" / "harness" / "training.py"
    loop.write_text(loop.read_text().replace("SETTLE = 0.10", "SETTLE = 0.20"))  # the harness loop's rule
    stale = check_reference(root)
    # every record set, and the fit on sc24 (not EMBark's cost model: it runs no harness loop)
    assert {st.name for st in stale} == set(REFERENCE_SETS) - {"bench", "recsys24_model"}
    assert all("reproduce/harness/training.py" in st.state() for st in stale if st.name in RECORD_SETS)
    scale = next(st for st in stale if st.name == "scale_model")
    assert "fitted on a STALE sc24 set" in scale.state()


def test_a_change_in_another_system_leaves_a_set_fresh_and_a_missing_set_fails(tmp_path):
    root = _tree(tmp_path)
    _fresh_sets(root)
    md = root / "impls" / "compress" / "md.py"
    md.write_text(md.read_text() + "\nUNUSED = 1\n")  # neither dense-torch nor a benchmark runs MD tables
    assert check_reference(root) == []
    shutil.rmtree(root / "results" / "accuracy" / M)
    assert [st.name for st in check_reference(root)] == ["accuracy"]


def test_registering_a_new_system_leaves_every_set_fresh_an_edit_of_the_interface_does_not(tmp_path):
    root = _tree(tmp_path)
    _fresh_sets(root)
    newcomer = root / "impls" / "dense" / "newcomer.py"  # a system of ours registers where its class is
    newcomer.write_text('from impls.api import register\nfrom impls.dense.base import DenseCollection\n\n\n'
                        '@register\nclass Newcomer(DenseCollection):\n    name = "newcomer"\n')
    assert code.registry_table(root)["newcomer"] == "impls.dense.newcomer" and check_reference(root) == []
    newcomer.write_text(newcomer.read_text().replace('"newcomer"', '"dense-torch"'))
    bag = root / "impls" / "dense" / "torch_bag.py"
    text = bag.read_text()
    bag.write_text(text.replace("@register\n", ""))  # dense-torch is now the newcomer's class
    assert code.registry_table(root)["dense-torch"] == "impls.dense.newcomer"
    assert {st.name for st in check_reference(root)} >= {"table_size"}  # its own entry moved: its module changed
    bag.write_text(text)
    newcomer.unlink()
    interface = root / "impls" / "interface.py"
    interface.write_text(interface.read_text() + "\nINTERFACE_CHANGE = 1\n")
    assert {st.name for st in check_reference(root)} >= set(RECORD_SETS)


def test_a_record_without_a_fingerprint_is_stale(tmp_path):
    root = _tree(tmp_path)
    _fresh_sets(root)
    rec = root / "results" / "table_size" / M / REC
    d = json.loads(rec.read_text())
    del d["code"]
    rec.write_text(json.dumps(d))
    (stale,) = check_reference(root)
    assert stale.name == "table_size" and "measured before code fingerprints" in stale.state()


def _profile_in(root: Path) -> tuple[Path, dict]:
    """A calibration profile under ``root`` and what a plan made on it records (its path, its digest)."""
    from impls.embark.profile_digest import digest

    prof = root / "results" / "calibration" / M / "gloo.json"
    prof.parent.mkdir(parents=True)
    prof.write_text('{"version": 3}')
    return prof, {"profile": f"results/calibration/{M}/gloo.json", "profile_sha": digest(prof.read_bytes())}


def test_a_plan_made_on_a_rewritten_calibration_profile_is_stale(tmp_path):
    """A record keeps the digest of the calibration profile its plan was made on; rewriting (or removing) that file
    makes the set STALE, naming the profile; the same bytes keep it fresh."""
    root = _tree(tmp_path)
    _fresh_sets(root)
    prof, made_on = _profile_in(root)
    rec = root / "results" / "recsys24" / M / REC
    d = json.loads(rec.read_text())
    d["dist"] = {"plan": made_on}
    rec.write_text(json.dumps(d))
    assert check_reference(root) == []
    prof.write_text('{"version": 2, "recalibrated": true}')
    (stale,) = check_reference(root)
    assert stale.name == "recsys24" and f"calibration profile changed since: results/calibration/{M}/gloo.json" in \
        stale.state()
    prof.unlink()
    assert [st.name for st in check_reference(root)] == ["recsys24"]


def test_a_bench_planned_on_a_rewritten_calibration_profile_is_stale(tmp_path):
    root = _tree(tmp_path)
    _fresh_sets(root)
    prof, made_on = _profile_in(root)
    bench = root / "results" / "bench" / M / "benchmarks.json"
    doc = json.loads(bench.read_text())
    doc["benchmarks"] = [{"extra_info": made_on}]
    bench.write_text(json.dumps(doc))
    assert check_reference(root) == []
    prof.write_text('{"version": 3, "recalibrated": true}')
    (stale,) = check_reference(root)
    assert stale.name == "bench" and f"calibration profile changed since: results/calibration/{M}/gloo.json" in \
        stale.state()


def test_a_stale_set_gives_no_verdict(tmp_path):
    import pandas as pd

    d = tmp_path / "results" / "e" / M
    d.mkdir(parents=True)
    rows = [{"point_id": f"{lab}", "repeat": k, "impl": lab, "label": lab, "data": "d", "world_size": 1,
             "status": "ok", "total_ms": t} for lab, ts in (("a", (300, 310, 290)), ("b", (100, 101, 99)))
            for k, t in enumerate(ts)]
    pd.DataFrame(rows).to_csv(d / "repeats.csv", index=False)
    c = {"id": "x", "paper": "P", "text": "t", "experiment": "e", "group": ["data", "world_size"], "kind": "ratio",
         "metric": "total_ms", "numerator": "a", "denominator": "b", "comparable": True, "paper_value": 3.0}
    fresh = SetState("e", M)
    assert evaluate_claim(c, tmp_path, M, fresh)["verdict"] == "reproduced"
    stale = SetState("e", M, stale=["code changed since: impls/x.py"])
    r = evaluate_claim(c, tmp_path, M, stale)
    assert r["verdict"] == "STALE: no verdict" and "impls/x.py" in r["why"] and r["value"] == pytest.approx(3.0, rel=1e-3)
    assert r["interval"] == "range of the Walsh averages of 3 rounds (75 % CI)"


def test_committed_compares_a_fingerprint_with_its_commit_or_says_it_cannot_tell():
    import subprocess

    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    if not head:
        pytest.skip("not a git checkout")
    api = "impls/api.py"
    mine = code.file_hash_at(head, api)
    assert code.committed({api: mine}, head) is True
    assert code.committed({api: "0" * 16}, head) is False
    assert code.committed({api: mine}, "f" * 40) is None and code.committed({api: mine}, None) is None
