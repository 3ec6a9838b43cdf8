"""What `train` says per system beside its table: held-out AUC / log loss at the last and the best evaluation (which
epoch) with the base-rate log loss, and a warning when the held-out log loss rose at the last 2 evaluations or ends
worse than predicting the base rate."""
from reproduce.cli.run import quality_lines
from reproduce.harness.records import Body, Record
from reproduce.harness.training import metrics


def _record(losses):
    curve = [{"step": 10 * (i + 1), "epoch": float(i + 1), "train_loss": 0.5, "logloss": x, "auc": 0.7,
              "samples": 100, "base_logloss": 0.6} for i, x in enumerate(losses)]
    best = min(curve, key=lambda c: c["logloss"])
    return Record.measured({"impl": "ecorec", "data": "d", "batch_size": 8}, "p",
                           Body(eval=curve[-1], eval_curve=curve, train={"best": best}))


def test_the_last_and_best_evaluations_and_the_base_rate_are_said():
    (line,) = quality_lines([_record([0.55, 0.5, 0.52])])
    assert "held-out AUC 0.7000, log loss 0.5200 at the last evaluation (epoch 3.00)" in line
    assert "best log loss 0.5000 (AUC 0.7000) at epoch 2.00" in line and "base-rate log loss 0.6000" in line


def test_a_rising_held_out_loss_and_one_worse_than_the_base_rate_are_warned():
    lines = quality_lines([_record([0.5, 0.55, 0.65])])
    assert any("rose at the last 2 evaluations" in x for x in lines)
    assert any("worse than predicting the base rate" in x for x in lines)


def test_the_base_rate_log_loss_is_the_constant_predictors():
    import math

    m = metrics([0.9, 0.1, 0.8, 0.3], [1, 0, 1, 1])
    assert math.isclose(m["base_logloss"], -(0.75 * math.log(0.75) + 0.25 * math.log(0.25)), rel_tol=1e-9)
