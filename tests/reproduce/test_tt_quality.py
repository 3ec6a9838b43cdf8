"""The TT quality study's table and finding (reproduce/analysis/tt_quality.py): gaps are paired by seed against the
dense model, the best epoch is read from the curve, and the finding follows the numbers."""
import json

import pandas as pd

from reproduce.analysis.tt_quality import finding, quality_lines, quality_table


def _runs(label, aucs, best_extra, fraction, impl=None):
    rows = []
    for seed, auc in enumerate(aucs):
        curve = [{"step": 1, "auc": auc + best_extra, "logloss": 0.5}, {"step": 2, "auc": auc, "logloss": 0.52}]
        rows.append({"status": "ok", "label": label, "impl": impl or ("dense-torch" if fraction == 1 else "ecorec"), "data": "/x/teacher", "seed": seed, "budget": 0.0,
                     "auc": auc, "logloss": 0.52, "eval_curve": json.dumps(curve), "dense_bytes": 1000,
                     "weight_bytes": 1000 * fraction, "point_id": f"{label}{seed}", "repeat": 0})
    return rows


def test_gaps_are_paired_by_seed_and_the_best_epoch_counts():
    reps = pd.DataFrame(_runs("dense", [0.80, 0.70, 0.75], 0.01, 1.0) + _runs("TT r8", [0.79, 0.69, 0.74], 0.0, 0.2)
                        + _runs("TT r64", [0.81, 0.69, 0.75], 0.01, 2.5))
    table = quality_table(reps).set_index("label")
    assert list(table.index) == ["dense", "TT r64", "TT r8"]  # TT from the best AUC at its best epoch
    r8 = table.loc["TT r8"]  # -0.01 at every seed: paired, although its AUCs overlap the dense model's range
    assert abs(r8["gap"] + 0.01) < 1e-9 and abs(r8["gap_max"] + 0.01) < 1e-9
    assert abs(r8["best_gap"] + 0.02) < 1e-9  # dense's best epoch is 0.01 above its last
    r64 = table.loc["TT r64"]
    assert abs(r64["best_gap_min"] + 0.01) < 1e-9 and abs(r64["best_gap_max"] - 0.01) < 1e-9
    said = " ".join(finding(quality_table(reps)))
    assert "Matches the dense model at its best epoch at some seed: TT r64." in said
    assert "TT r64 holds 2.5x the dense tables' bytes and reaches the dense model at some seed" in said
    lines = quality_lines(reps)
    assert lines[0].startswith("Data `teacher`: median [min, max] over 3 seed(s)")
    assert "| TT r8 | 0.2 | 0.7400 [0.6900, 0.7900] | -0.0100 [-0.0100, -0.0100] |" in "\n".join(lines)


def test_a_variant_with_the_dense_bytes_that_still_loses_is_said_to_lose_by_training():
    reps = pd.DataFrame(_runs("dense", [0.80, 0.70], 0.0, 1.0) + _runs("TT r64", [0.78, 0.68], 0.0, 2.0))
    said = " ".join(finding(quality_table(reps)))
    assert "No TT variant matches the dense model at any seed" in said
    assert "TT r64 holds 2x the dense tables' bytes and still loses at every seed (-0.0200)" in said


def test_a_variant_that_diverged_is_listed_under_the_table():
    bad = [dict(r, status="diverged", reason="the loss exploded: above 6.93 nats", auc=float("nan"))
           for r in _runs("TT approx-normal", [0.5, 0.5], 0.0, 0.7)]
    reps = pd.DataFrame(_runs("dense", [0.80, 0.70], 0.0, 1.0) + _runs("TT r8", [0.79, 0.69], 0.0, 0.2) + bad)
    lines = quality_lines(reps)
    assert "- TT approx-normal: diverged at 2 of 2 seed(s), not in the table: the loss exploded: above 6.93 nats." in lines
    assert not any(line.startswith("| TT approx-normal") for line in lines)


def test_the_dense_model_at_other_learning_rates_is_a_row_not_the_reference():
    reps = pd.DataFrame(_runs("dense", [0.80, 0.70], 0.0, 1.0) + _runs("dense, lr 0.01", [0.82, 0.72], 0.0, 1.0)
                        + _runs("TT r8", [0.81, 0.71], 0.0, 0.2))
    table = quality_table(reps).set_index("label")
    assert table.loc["dense", "reference"] and abs(table.loc["dense, lr 0.01", "gap"] - 0.02) < 1e-9
    said = " ".join(finding(quality_table(reps)))
    assert "Matches the dense model at its best epoch at some seed: TT r8." in said
    assert "The dense model's best learning rate here: dense, lr 0.01 (AUC at its best epoch 0.7700); against it the " \
           "closest TT variant is -0.0100 (medians over seeds)." in said
