"""`dlrmbench report`: claim values computed from records, verdicts against 80 % of the paper's value."""
from pathlib import Path

import pandas as pd

from reproduce.report import build_report, evaluate_claim

ROOT = Path(__file__).resolve().parents[2]


def test_ratio_reduction_and_verdicts(tmp_path):
    rows = [
        {"impl": "a", "label": "a", "data": "d", "world_size": w, "status": "ok", "total_ms": t, "peak": p}
        for w, t, p in ((1, 300.0, 100.0), (2, 200.0, 100.0))
    ] + [
        {"impl": "b", "label": "b", "data": "d", "world_size": w, "status": "ok", "total_ms": t, "peak": p}
        for w, t, p in ((1, 100.0, 60.0), (2, 100.0, 50.0))
    ] + [{"impl": "b", "label": "b ablation", "data": "d", "world_size": 1, "status": "ok", "total_ms": 1.0,
          "peak": 1.0}]
    (tmp_path / "r").mkdir()
    pd.DataFrame(rows).to_csv(tmp_path / "r" / "summary.csv", index=False)
    base = {"id": "x", "paper": "P", "text": "t", "csv": "r/summary.csv", "group": ["data", "world_size"]}
    speed = evaluate_claim({**base, "kind": "ratio", "paper_value": 3.0, "metric": "total_ms", "numerator": "a",
                            "denominator": "b", "aggregate": "max"}, tmp_path)
    assert speed["measured"] == 3.0 and speed["points"] == 2 and speed["verdict"] == "reproduced"
    mean = evaluate_claim({**base, "kind": "ratio", "paper_value": 3.0, "metric": "total_ms", "numerator": "a",
                           "denominator": "b", "aggregate": "mean"}, tmp_path)
    assert mean["measured"] == 2.5 and mean["verdict"] == "reproduced"  # 2.5 >= 0.8 * 3
    mem = evaluate_claim({**base, "kind": "reduction", "paper_value": 0.6, "metric": "peak", "numerator": "b",
                          "denominator": "a", "aggregate": "max"}, tmp_path)
    assert mem["measured"] == 0.5 and mem["verdict"] == "reproduced"
    far = evaluate_claim({**base, "kind": "ratio", "paper_value": 10.0, "metric": "total_ms", "numerator": "a",
                          "denominator": "b", "aggregate": "max"}, tmp_path)
    assert far["verdict"] == "not reproduced" and "< 80 %" in far["why"]
    none = evaluate_claim({**base, "kind": "none", "paper_value": 0.5, "reason": "needs GPUs"}, tmp_path)
    assert none["verdict"] == "not measurable here" and none["why"] == "needs GPUs"
    missing = evaluate_claim({**base, "csv": "nope.csv", "kind": "ratio", "paper_value": 1.0}, tmp_path)
    assert missing["verdict"] == "not measured yet"


def test_every_claim_gets_a_verdict_from_the_committed_records(tmp_path):
    import shutil

    shutil.copytree(ROOT / "results", tmp_path / "results", ignore=shutil.ignore_patterns("logs", "*.json"))
    (tmp_path / "reproduce").mkdir()
    shutil.copy(ROOT / "reproduce" / "claims.toml", tmp_path / "reproduce" / "claims.toml")
    text = build_report(tmp_path).read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| paper")]
    assert len(rows) == 9
    assert all(any(v in r for v in ("| reproduced", "| not reproduced", "| not measurable here")) for r in rows)
