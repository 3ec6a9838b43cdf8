"""What `train` says per system beside its table: held-out AUC / log loss at the last and the best evaluation (which
epoch) with the base-rate log loss, and a warning when the held-out log loss rose at the last 2 evaluations or ends
worse than predicting the base rate."""
from reproduce.analysis.run_output import quality_lines
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


def _note(epoch, step, held=None):
    return {"epoch": epoch, "epochs": 2, "step": step, "steps": 4, "eval": held}


def test_a_bar_per_epoch_with_the_evaluation_that_ended_it(capsys):
    from reproduce.cli.epoch_bars import EpochBars

    e1 = {"auc": 0.71, "logloss": 0.52, "base_logloss": 0.6}
    e2 = {"auc": 0.73, "logloss": 0.5, "base_logloss": 0.6}
    bars = EpochBars("ecorec")
    # the poll missed epoch 1's evaluation note: epoch 2's first note carries it, and it goes beside epoch 1
    for note in (_note(1, 2), _note(1, 4), _note(2, 1, e1), _note(2, 4, e1), _note(2, 4, e2)):
        bars(note)
    bars.close()
    err = capsys.readouterr().err
    lines = [seg.strip() for seg in err.replace("\r", "\n").splitlines() if seg.strip()]
    ends = {}
    for line in lines:  # the last drawing of each epoch's bar
        for e in (1, 2):
            if line.startswith(f"ecorec epoch {e}/2"):
                ends[e] = line
    assert "4/4" in ends[1] and "held-out AUC 0.7100, log loss 0.5200 (base rate 0.6000)" in ends[1]
    assert "4/4" in ends[2] and "held-out AUC 0.7300, log loss 0.5000" in ends[2]
    assert not any(line.startswith("ecorec epoch 2/2") and "0.7100" in line for line in lines)  # no stale evaluation
