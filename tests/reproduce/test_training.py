"""The training loop (`dlrmbench train`): epochs read every training sample once in shuffled whole batches, the
whole held-out split is scored once per evaluation, early stop acts on the held-out log loss, and a training run
is refused where it cannot work."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from impls.data.export import write_synthetic
from impls.data.loader import Epoch
from impls.data.prepared_source import PreparedSource
from impls.data.presets import get_preset
from reproduce.harness.options import check_point
from reproduce.harness.point import RunPoint
from reproduce.harness.progress import ProgressNote, progress_path, read_progress
from reproduce.harness.training import Clock, train_loop


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("train") / "data"
    write_synthetic("uniform", get_preset("uniform", num_tables=2, rows=50, dim=4), out, 100, 30)
    return out


def test_an_epoch_reads_every_sample_once_in_shuffled_whole_batches(data):
    src = PreparedSource(data)
    seen = []
    for epoch in range(2):
        ep = Epoch(src, seed=1, epoch=epoch)
        assert ep.batches(32) == 3  # 100 samples: the last 4 are left for the next epoch's shuffle
        rows = np.concatenate([ep.order[k * 32 : (k + 1) * 32] for k in range(3)])
        assert len(set(rows.tolist())) == 96
        seen.append(rows)
        b = ep.batch(1, 32)
        want = src.take(np.sort(ep.order[32:64]))
        assert torch.equal(b.labels, want.labels) and torch.equal(b.sparse.values, want.sparse.values)
    assert not np.array_equal(seen[0], seen[1])  # a new order per epoch
    assert np.array_equal(Epoch(src, 1, 0).order, Epoch(src, 1, 0).order)  # seeded
    assert np.array_equal(Epoch(src, 1, 0, shuffle=False).order, np.arange(100))
    with pytest.raises(IndexError):
        Epoch(src, 1, 0).batch(3, 32)


class WorseEveryStep:
    """A stand-in step whose held-out predictions get worse after every update (log loss rises); its weights are
    the count of updates."""

    def __init__(self) -> None:
        self.updates = 0

    def weights(self) -> dict:
        return {"updates": self.updates}

    def restore(self, weights: dict) -> None:
        self.updates = weights["updates"]

    def prefetch(self, batch) -> None:
        pass

    def forward(self, batch):
        return torch.tensor(0.5)

    def backward(self, loss) -> None:
        pass

    def update(self) -> None:
        self.updates += 1

    def predict(self, batch):
        good = torch.where(batch.labels > 0, 0.9, 0.1)
        return (good + (0.5 - good) * min(self.updates / 20, 1.0)).float()


def test_early_stop_on_held_out_log_loss_and_whole_split_scoring(data):
    point = RunPoint(impl="dense-torch", data=str(data), batch_size=10, epochs=3, eval_every=2, early_stop=2,
                     warmup=0)
    step = WorseEveryStep()
    res = train_loop(point, step, PreparedSource(data), PreparedSource(data, "val"), None,
                     Clock(lambda: None), None, 0, 1, torch.device("cpu"))
    assert res.info["stop"] == "early stop" and res.info["steps"] == 6  # best at step 2, worse at 4 and 6
    assert [c["step"] for c in res.curve] == [2, 4, 6] and res.info["best"]["step"] == 2
    assert res.info["restored"] == 2 and step.updates == 2  # the best weights put back, not the last
    assert all(c["samples"] == 30 for c in res.curve)  # every held-out sample once (the last batch padded)
    assert len(res.phases["total"]) == 6 and res.diverged is None


def test_early_stop_counts_the_evaluations_after_every_epoch_without_a_step_interval(data):
    """`train --epochs 5 --early-stop 1` (no --eval-every): the held-out split is scored after every epoch and the run
    stops at the first epoch whose held-out log loss is not lower than the best."""
    point = RunPoint(impl="dense-torch", data=str(data), batch_size=10, epochs=5, early_stop=1, warmup=0)
    res = train_loop(point, WorseEveryStep(), PreparedSource(data), PreparedSource(data, "val"), None,
                     Clock(lambda: None), None, 0, 1, torch.device("cpu"))
    per_epoch = res.info["steps_per_epoch"]
    assert res.info["stop"] == "early stop" and [c["step"] for c in res.curve] == [per_epoch, 2 * per_epoch]
    assert res.info["best"]["step"] == per_epoch


def test_a_training_run_notes_its_progress_per_epoch_for_the_launchers_bar(data, tmp_path):
    """train_loop hears of every step and evaluation; the note file keeps the last, throttled between them."""
    point = RunPoint(impl="dense-torch", data=str(data), batch_size=10, epochs=2, warmup=0)
    heard = []
    res = train_loop(point, WorseEveryStep(), PreparedSource(data), PreparedSource(data, "val"), None,
                     Clock(lambda: None), None, 0, 1, torch.device("cpu"), note=lambda *a: heard.append(a))
    per_epoch = res.info["steps_per_epoch"]
    steps = [(e, s) for e, s, *ev in heard if not ev]
    assert steps == [(e, s) for e in (1, 2) for s in range(1, per_epoch + 1)]
    evals = [(e, s, ev[0]) for e, s, *ev in heard if ev]
    assert [(e, s) for e, s, _ in evals] == [(1, per_epoch), (2, per_epoch)]
    assert evals[-1][2]["logloss"] == res.curve[-1]["logloss"] and "base_logloss" in evals[-1][2]

    note = ProgressNote(tmp_path / "r.json", epochs=2, steps=5, min_interval_s=60)
    note(1, 1)
    note(1, 2)  # within the interval: not written
    assert read_progress(progress_path(tmp_path / "r.json"))["step"] == 1
    note(1, 5)  # an epoch's end is always written
    note(1, 5, {"auc": 0.6, "logloss": 0.55, "base_logloss": 0.6})  # so is an evaluation, kept under its epoch
    note(2, 1, {"auc": 0.7, "logloss": 0.5, "base_logloss": 0.6})
    assert read_progress(progress_path(tmp_path / "r.json")) == {
        "epoch": 2, "epochs": 2, "step": 1, "steps": 5,
        "evals": {"1": {"auc": 0.6, "logloss": 0.55, "base_logloss": 0.6, "epoch": 1},
                  "2": {"auc": 0.7, "logloss": 0.5, "base_logloss": 0.6, "epoch": 2}}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json.progress"]  # no temporary left, no *.json


@pytest.mark.parametrize("kw,match", [
    (dict(data="uniform", epochs=1), "a training run reads a dataset on disk"),
    (dict(epochs=1, mode="embedding-only"), "needs mode='dlrm'"),
    (dict(early_stop=2), "early_stop needs a training run"),
    (dict(mlp_optimizer="rmsprop"), "mlp_optimizer must be one of"),
    (dict(bottom=[0]), "positive integers"),
    (dict(interaction="cross"), "interaction must be one of"),
])
def test_training_fields_are_checked(data, kw, match):
    with pytest.raises(ValueError, match=match):
        check_point(RunPoint(**{"impl": "dense-torch", "data": str(data), "batch_size": 8, **kw}))


def test_run_ids_of_benchmark_points_do_not_move():
    """The new fields at their defaults leave a point's id as it was (committed records keep matching)."""
    p = RunPoint(impl="dense-torch", data="uniform", batch_size=8)
    assert p.point_id == RunPoint(impl="dense-torch", data="uniform", batch_size=8, bottom=(512, 256)).point_id
    assert p.point_id != RunPoint(impl="dense-torch", data="uniform", batch_size=8, mlp_lr=0.2).point_id


def test_the_launcher_polls_while_a_run_lasts_and_still_keeps_its_time_limit(tmp_path):
    import sys

    from reproduce.harness.launch import run_in_group

    calls = []
    with open(tmp_path / "log", "w") as log:
        code = run_in_group([sys.executable, "-c", "import time; time.sleep(0.6)"], log, None,
                            poll=lambda: calls.append(1), poll_s=0.1)
        assert code == 0 and len(calls) >= 3  # while it ran, and once more after it ended
        calls.clear()
        assert run_in_group([sys.executable, "-c", "import time; time.sleep(30)"], log, 0.5,
                            poll=lambda: calls.append(1), poll_s=0.1) is None  # past its limit: stopped
        assert calls
