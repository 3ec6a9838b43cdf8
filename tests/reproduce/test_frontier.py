"""The compression frontier from a summary: the uncompressed reference found by its bytes, each run's target at its
own seed, samples to target from the eval curve (never the last step when it was not reached), the spread over
seeds, the README table with what was set aside, and the two figures (whiskers exactly when drawn)."""
import json
import math

import pandas as pd
import pytest

from reproduce.analysis import frontier as fr
from reproduce.analysis.plots import draw

DENSE = 1_000_000


def run(label, budget, seed, auc, weight_bytes, curve, ms=10.0, impl=None):
    return {"status": "ok", "label": label, "impl": impl or label, "budget": budget, "seed": seed,
            "data": "/data/teacher", "batch_size": 100, "auc": auc, "logloss": 0.5 - auc / 10, "total_ms": ms,
            "peak_rss_delta_bytes": 2**20 * 50, "weight_bytes": weight_bytes, "dense_bytes": DENSE,
            "eval_curve": json.dumps([{"step": s, "auc": a, "logloss": 0.4} for s, a in curve]),
            "machine": "box", "git_sha": "abcdef0123", "repeats": 1}


def summary():
    rows = []
    for seed, ref in ((0, 0.80), (1, 0.79), (2, 0.81)):
        rows.append(run("dense", 0.0, seed, ref, DENSE, [(10, ref - 0.01), (20, ref)], ms=8.0))
        rows.append(run("fp16", 0.0, seed, ref, DENSE // 2, [(10, ref - 0.0005), (20, ref)], ms=9.0))
        # hash reaches the target (ref - 0.001) at step 20 on seeds 0 and 1, never on seed 2
        rows.append(run("hash", 0.1, seed, ref - (0.0005 if seed < 2 else 0.01),
                        DENSE // 10, [(10, ref - 0.02), (20, ref - (0.0005 if seed < 2 else 0.01))], ms=7.0 + seed))
    rows.append({**run("TT", 0.1, 0, 0.7, DENSE // 11, [(10, 0.7)]), "status": "failed", "auc": math.nan})
    return pd.DataFrame(rows)


def test_targets_samples_and_spread_over_seeds():
    assert fr.samples_to_target(json.dumps([{"step": 5, "auc": 0.7}, {"step": 9, "auc": 0.8}]), 0.75, 10) == 90
    assert math.isnan(fr.samples_to_target(json.dumps([{"step": 5, "auc": 0.7}]), 0.75, 10))  # not reached
    runs = fr.run_rows(summary())
    assert (runs[runs["label"] == "dense"]["target"].round(4).tolist() == [0.799, 0.789, 0.809])
    table = fr.frontier(summary()).set_index("method")
    assert table.loc["dense", "reference"] and not table.loc["fp16", "reference"]
    assert table.loc["fp16", "bytes_fraction"] == 0.5 and table.loc["fp16", "samples_to_target"] == 1000  # step 10
    h = table.loc["hash"]
    assert (h["seeds"], h["reached_target"], h["samples_to_target"]) == (3, 2, 2000)
    assert (h["reached_loose"], h["samples_to_loose"]) == (3, 2000)  # ref - 0.01: seed 2 too, at step 20
    assert (h["auc_min"], h["auc_max"]) == pytest.approx((0.7895, 0.80)) and h["total_ms"] == 8.0
    assert "TT" not in table.index  # a failed run has no quality to place


def test_the_reference_is_the_one_uncompressed_label():
    two = pd.concat([summary(), pd.DataFrame([run("dense2", 0.0, 0, 0.8, DENSE, [(10, 0.8)])])])
    with pytest.raises(ValueError, match=r"exactly one uncompressed reference .*\['dense', 'dense2'\]"):
        fr.frontier(two)
    with pytest.raises(ValueError, match="found none"):
        fr.frontier(summary()[lambda d: d["label"] != "dense"])


def test_table_lines_name_budgets_targets_and_what_was_set_aside():
    lines = fr.frontier_lines(summary(), [{"impl": "md", "label": "MD", "budget": 0.001, "reason": "md: too small"}])
    text = "\n".join(lines)
    assert "median [min, max] over 3 seed(s)" in text
    assert "| reference | dense | 1 | 0.8000 [0.7900, 0.8100] |" in text
    assert "| own size | fp16 | 0.5 |" in text and "| 1/10 | hash | 0.1 |" in text
    assert "| samples to ref - 0.001 | samples to ref - 0.01 |" in text
    assert "| 2,000 (2/3) | 2,000 (3/3) |" in text
    assert lines[-1] == "- MD at 1/1,000: infeasible - md: too small"


def test_figures_draw_whiskers_over_seeds_and_say_so(tmp_path):
    path = tmp_path / "summary.csv"
    summary().to_csv(path, index=False)
    paths = draw(["compression-frontier", "compression-step-time"], path, tmp_path / "fig")
    assert sorted(p.name for p in paths) == ["compression_frontier.pdf", "compression_frontier.png",
                                             "compression_step_time.pdf", "compression_step_time.png"]
    one = summary()[lambda d: d["seed"] == 0]  # one seed: no whiskers, and the caption says none are drawn
    one.to_csv(path, index=False)
    assert len(draw(["compression-frontier"], path, tmp_path / "one")) == 2


def test_verdicts_name_the_leader_the_runner_up_and_where_tt_stands():
    rows = summary()
    tt = [run("TT", 0.1, seed, auc, DENSE // 12, [(10, 0.7), (20, auc)], ms=20.0, impl="ecorec")
          for seed, auc in enumerate((0.81, 0.809, 0.795))]
    lines = fr.verdict_lines(pd.concat([rows, pd.DataFrame(tt)], ignore_index=True))
    assert lines[0] == "Data `teacher`:" and len(lines) == 2
    line = lines[1]
    # TT's AUC: median 0.809, range [0.795, 0.81]; hash's: median 0.7995, range [0.7895, 0.80]: they overlap
    assert line.startswith("- **1/10** of the dense bytes (2 methods fit): highest AUC: TT 0.8090, then hash 0.7995")
    assert "(within the spread over seeds)" in line
    assert "fastest step: hash 8.0 ms, then TT 20.0 ms (beyond the spread over seeds)" in line
    assert "fewest samples to ref - 0.001: no method reached it on every seed (4 of 6 runs did)" in line
    assert "fewest samples to ref - 0.01: hash 2,000 samples" in line  # TT misses it on seed 2
    assert line.endswith("; TT: AUC 1 of 2, step time 2 of 2.")
