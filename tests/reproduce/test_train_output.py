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


def test_with_the_best_weights_put_back_the_best_evaluation_is_the_result_and_the_last_is_said_beside():
    rec = _record([0.55, 0.5, 0.52, 0.6])
    rec.body.train["restored"] = 20
    rec.body.eval = rec.body.train["best"]
    (line,) = quality_lines([rec])  # no "rose" warning: the weights that rose were not kept
    assert "held-out AUC 0.7000, log loss 0.5000 at the best evaluation (epoch 2.00), whose weights --early-stop put " \
           "back; the last evaluation: log loss 0.6000 (AUC 0.7000) at epoch 4.00" in line


def test_a_rising_held_out_loss_and_one_worse_than_the_base_rate_are_warned():
    lines = quality_lines([_record([0.5, 0.55, 0.65])])
    assert any("rose at the last 2 evaluations" in x for x in lines)
    assert any("worse than predicting the base rate" in x for x in lines)


def test_the_base_rate_log_loss_is_the_constant_predictors():
    """It predicts the scored (held-out) split's own click rate, and docs/data.md says so."""
    import math
    from pathlib import Path

    m = metrics([0.9, 0.1, 0.8, 0.3], [1, 0, 1, 1])
    assert math.isclose(m["base_logloss"], -(0.75 * math.log(0.75) + 0.25 * math.log(0.25)), rel_tol=1e-9)
    doc = " ".join((Path(__file__).parents[2] / "docs" / "data.md").read_text().split())
    assert "base-rate log loss (predicting the held-out split's own click rate" in doc
    assert "training split's click rate" not in doc


def _note(epoch, step, evals=None, epochs=2, steps=4):
    return {"epoch": epoch, "epochs": epochs, "step": step, "steps": steps, "evals": evals or {}}


def _bar_ends(err, label, epochs):
    """The last drawing of each epoch's bar, and every drawing."""
    lines = [seg.strip() for seg in err.replace("\r", "\n").splitlines() if seg.strip()]
    ends = {}
    for line in lines:
        for e in range(1, epochs + 1):
            if line.startswith(f"{label} epoch {e}/{epochs}"):
                ends[e] = line
    return ends, lines


def test_a_bar_per_epoch_with_the_evaluation_that_ended_it(capsys):
    from reproduce.cli.epoch_bars import EpochBars

    e1 = {"epoch": 1, "auc": 0.71, "logloss": 0.52, "base_logloss": 0.6}
    e2 = {"epoch": 2, "auc": 0.73, "logloss": 0.5, "base_logloss": 0.6}
    bars = EpochBars("ecorec")
    # the poll missed epoch 1's evaluation note: epoch 2's first note carries it, and it goes beside epoch 1
    for note in (_note(1, 2), _note(1, 4), _note(2, 1, {"1": e1}), _note(2, 4, {"1": e1}),
                 _note(2, 4, {"1": e1, "2": e2})):
        bars(note)
    bars.close()
    ends, lines = _bar_ends(capsys.readouterr().err, "ecorec", 2)
    assert "4/4" in ends[1] and "held-out AUC 0.7100, log loss 0.5200 (base rate 0.6000)" in ends[1]
    assert "4/4" in ends[2] and "held-out AUC 0.7300, log loss 0.5000" in ends[2]
    assert not any(line.startswith("ecorec epoch 2/2") and "0.7100" in line for line in lines)  # no stale evaluation


def test_each_bar_shows_its_own_epochs_evaluation_when_the_poll_misses_notes(capsys):
    """Small data (18 steps an epoch): the poll sees epoch 2 part-way, then epoch 4's first note, by which time
    epochs 2 and 3 ended and were scored. Epoch 2's bar shows epoch 2's evaluation (not 3's), epoch 3 (no note
    seen) still gets a full bar with its own, and epoch 4's bar none yet."""
    from reproduce.cli.epoch_bars import EpochBars

    ev = {e: {"epoch": e, "auc": 0.70 + e / 100, "logloss": 0.5 - e / 100, "base_logloss": 0.6} for e in (1, 2, 3)}
    bars = EpochBars("dense")
    for note in (_note(1, 18, {"1": ev[1]}, 4, 18), _note(2, 7, {"1": ev[1]}, 4, 18),
                 _note(4, 1, {str(e): ev[e] for e in (1, 2, 3)}, 4, 18)):
        bars(note)
    bars.close()
    ends, lines = _bar_ends(capsys.readouterr().err, "dense", 4)
    for e in (1, 2, 3):
        assert "18/18" in ends[e] and f"held-out AUC {0.70 + e / 100:.4f}" in ends[e], ends[e]
    assert "1/18" in ends[4] and "held-out" not in ends[4]
    assert not any(line.startswith("dense epoch 2/4") and "0.7300" in line for line in lines)


def _budget_record(impl, budget, params, dense=1 << 20):
    return Record.measured({"impl": impl, "data": "d", "batch_size": 8, "impl_options": {"budget": budget}}, impl,
                           Body(tables={"dense_bytes": dense}, memory={"analytic": {"params": params}}))


def test_systems_that_size_one_budget_by_different_rules_are_named():
    """-o budget=0.1: hash held twice what the shared-array system held; the run says each one's bytes and share."""
    from reproduce.analysis.run_output import budget_lines

    recs = [_budget_record("hash", 0.1, 209_715), _budget_record("robe", 0.1, 104_857)]
    (line,) = budget_lines(recs)
    assert "budget 0.1 is sized by each system's own rule" in line
    assert "hash 205 KiB (0.2 of the dense bytes)" in line and "robe 102 KiB (0.1 of the dense bytes)" in line
    assert budget_lines([_budget_record("hash", 0.1, 104_000), _budget_record("qr", 0.1, 104_857)]) == []
    assert budget_lines([_budget_record("hash", 0.1, 209_715), _budget_record("robe", 0.2, 104_857)]) == []
