"""`dlrmbench report`: claim values aggregated as the papers phrase them, intervals paired by round, two-sided
verdicts, `not comparable` and modeled values without verdicts, growth per doubling, the noise warning; and the
committed REPORT.md and README blocks equal what the report generates from the committed records."""
import shutil
from pathlib import Path

import pandas as pd
import pytest

from reproduce.analysis.claims import evaluate_claim, how
from reproduce.harness.machine import reference_machine
from reproduce.analysis.report import build_report
from reproduce.harness.fingerprint import of_run
from reproduce.harness.record_store import write_record
from reproduce.harness.records import Record

ROOT = Path(__file__).resolve().parents[2]
M = "test-box"


def _runs(tmp_path: Path, exp: str, rows: list[dict]) -> None:
    d = tmp_path / "results" / exp / M
    d.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(d / "repeats.csv", index=False)


def _rows(label: str, world: int, totals: list[float], **extra) -> list[dict]:
    return [{"point_id": f"{label}{world}", "repeat": k, "impl": label, "label": label, "data": "d",
             "world_size": world, "status": "ok", "total_ms": t, **extra} for k, t in enumerate(totals)]


BASE = {"id": "x", "paper": "P", "text": "t", "experiment": "e", "group": ["data", "world_size"], "kind": "ratio",
        "metric": "total_ms", "numerator": "a", "denominator": "b", "comparable": True}


def test_aggregate_follows_the_wording():
    assert how({"phrase": "up to"}) == "max" and how({"phrase": "Up To "}) == "max"
    assert how({"phrase": ""}) == "median" and how({}) == "median"


def test_ratio_interval_and_two_sided_verdicts(tmp_path):
    _runs(tmp_path, "e", _rows("a", 1, [300, 310, 290]) + _rows("b", 1, [100, 101, 99])
          + _rows("a", 2, [200, 210, 190]) + _rows("b", 2, [100, 102, 98]) + _rows("a", 4, [100, 101, 99]))
    up_to = evaluate_claim({**BASE, "paper_value": 3.0, "phrase": "up to"}, tmp_path, M)
    # the Hodges-Lehmann estimate of the round ratios 3.0, 3.07, 2.93 (geometric: on their logs)
    assert up_to["aggregate"] == "max" and up_to["value"] == pytest.approx(3.0, rel=1e-3)
    assert up_to["lo"] < 3.0 < up_to["hi"] and up_to["runs"] == 3 and len(up_to["groups"]) == 2  # world 4: no b
    assert up_to["verdict"] == "reproduced"
    med = evaluate_claim({**BASE, "paper_value": 3.0}, tmp_path, M)
    assert med["aggregate"] == "median" and med["value"] == pytest.approx(2.5, rel=1e-3)
    assert med["verdict"] == "reproduced"  # 2.5 in [2.4, 3.75]
    assert evaluate_claim({**BASE, "paper_value": 1.0}, tmp_path, M)["verdict"] == "exceeds"
    below = evaluate_claim({**BASE, "paper_value": 10.0}, tmp_path, M)
    assert below["verdict"] == "below" and "under [8, 12.5]" in below["why"]
    other = evaluate_claim({**BASE, "paper_value": 10.0, "comparable": False, "not_comparable": "32 GPUs"},
                           tmp_path, M)
    assert other["verdict"] == "not comparable" and other["why"] == "32 GPUs" and other["value"] == pytest.approx(2.5, rel=1e-3)
    red = evaluate_claim({**BASE, "kind": "reduction", "numerator": "b", "denominator": "a", "paper_value": 0.6},
                         tmp_path, M)
    assert red["value"] == pytest.approx(1 - (1 / 3 + 1 / 2) / 2, rel=1e-3) and red["verdict"] == "reproduced"


def test_growth_is_per_doubling(tmp_path):
    rows = [{"point_id": f"t{b}", "repeat": 0, "impl": "t", "label": "t", "data": "d", "world_size": 1,
             "batch_size": b, "status": "ok", "mem": m} for b, m in ((2048, 100.0), (8192, 400.0))]
    _runs(tmp_path, "e", rows)
    c = {**BASE, "kind": "growth", "metric": "mem", "numerator": "t", "growth": "batch_size", "group": ["data"],
         "paper_value": 2.0}
    r = evaluate_claim(c, tmp_path, M)
    assert r["value"] == pytest.approx(2.0)  # 4x over two doublings
    assert r["verdict"] == "reproduced" and "one run per point" in r["why"]


def test_modeled_values_never_give_a_verdict_and_noise_warns(tmp_path):
    (tmp_path / "m.csv").write_text("speedup\n1.4\n1.6\n")
    modeled = [{"label": "cost model", "csv": "m.csv", "column": "speedup", "aggregate": "mean"}]
    missing = evaluate_claim({**BASE, "paper_value": 1.5, "modeled": modeled}, tmp_path, M)
    assert missing["verdict"] == "not measured yet" and missing["modeled"] == [("cost model", pytest.approx(1.5))]
    none = evaluate_claim({**BASE, "kind": "none", "paper_value": 0.5, "reason": "needs GPUs", "modeled": modeled},
                          tmp_path, M)
    assert none["verdict"] == "not measurable here" and none["why"] == "needs GPUs"
    # the set's A/A control (b's twin, paired by round) reaches 1.08: a 5 % difference is inside it
    twin = [{**r, "label": "b (A/A twin)", "point_id": "b1-twin", "twin": 1}
            for r in _rows("b", 1, [108, 93, 100])]
    _runs(tmp_path, "e", _rows("a", 1, [105, 104, 106]) + _rows("b", 1, [100, 101, 99]) + twin)
    r = evaluate_claim({**BASE, "paper_value": 1.05}, tmp_path, M)
    assert r["value"] == pytest.approx(1.05, rel=1e-4) and "overlaps the set's A/A control [0.921, 1.080]" in r["noise"]
    shutil.rmtree(tmp_path / "results" / "e")
    _runs(tmp_path, "e", _rows("a", 1, [105, 104, 106]) + _rows("b", 1, [100, 101, 99]))
    assert evaluate_claim({**BASE, "paper_value": 1.05}, tmp_path, M)["noise"] == ""  # no control: the interval only


def test_committed_report_and_readme_are_generated(tmp_path):
    ref = reference_machine(ROOT / "results")
    assert ref, "results/REFERENCE_MACHINE names the committed reference set"
    out = tmp_path / "REPORT.md"
    readme = tmp_path / "README.md"
    shutil.copy(ROOT / "README.md", readme)
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    written = build_report(ROOT, machines=[ref], out=out, pages_root=tmp_path)
    assert (ROOT / "results" / "REPORT.md").read_text() == out.read_text(), "run `dlrmbench report` and commit"
    assert (ROOT / "results" / "claims.csv").read_text() == (tmp_path / "claims.csv").read_text()
    assert readme not in written, "README's generated blocks are stale: run `dlrmbench report`"
    assert not [p for p in written if "docs" in p.parts], "docs/' generated blocks are stale: run `dlrmbench report`"
    assert "<!-- report:claims -->" in readme.read_text()


def test_machines_side_by_side(tmp_path):
    claims = tmp_path / "claims.toml"
    claims.write_text('[[claim]]\nid = "x"\npaper = "P"\ntext = "t"\npaper_value = 2.0\nkind = "ratio"\n'
                      'experiment = "e"\nmetric = "total_ms"\nnumerator = "a"\ndenominator = "b"\n'
                      'group = ["data", "world_size"]\ncomparable = true\n')
    for m, slow in (("box-one", 200.0), ("box-two", 300.0)):
        d = tmp_path / "results" / "e" / m
        d.mkdir(parents=True)
        rows = _rows("a", 1, [slow, slow + 1, slow - 1]) + _rows("b", 1, [100.0, 101.0, 99.0])
        pd.DataFrame(rows).to_csv(d / "repeats.csv", index=False)
        point = {"impl": "dense-torch", "data": "uniform", "batch_size": 8, "world_size": 1}  # measured on this code
        rec = Record(point, "ok", body={"code": of_run(["impls.dense.torch_bag"], point)})  # the set is fresh
        write_record(d / f"{rec.point_id}.r0.json", rec)
    (tmp_path / "results" / "REFERENCE_MACHINE").write_text("box-one\n")
    build_report(tmp_path, claims="claims.toml", machines=["box-one", "box-two"], readme=False)
    text = (tmp_path / "results" / "REPORT.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| P |")]
    assert len(rows) == 2 and "box-one" in rows[0] and "box-two" in rows[1]
    assert "| 2 [" in rows[0] and "reproduced" in rows[0] and "| 3 [" in rows[1] and "exceeds" in rows[1]
    with pytest.raises(ValueError, match="no records of machine 'nope'"):
        build_report(tmp_path, claims="claims.toml", machines=["nope"], readme=False)
