"""A training run's progress in the terminal: one bar per epoch (its steps), the held-out evaluation that ends it
beside it, fed the run's progress notes (reproduce/harness/progress.py) while the launcher waits."""
from __future__ import annotations

from typing import Any

from reproduce.analysis.run_output import epoch_bar_desc, held_out_postfix


class EpochBars:
    """Call with each progress note of one run; ``close`` when the run ends. A note carries the last held-out
    evaluation of every epoch so far, each naming its epoch, so each bar shows its own epoch's evaluation however
    many notes the launcher's poll missed: when a later epoch's note arrives, the open bar is filled (its epoch
    ended) and shows its evaluation before it closes, and an epoch the poll missed whole still gets its bar."""

    def __init__(self, label: str) -> None:
        self.label, self.epoch, self.bar, self.shown = label, None, None, None

    def __call__(self, note: dict[str, Any]) -> None:
        evals = note.get("evals") or {}
        epoch = note["epoch"]
        if epoch != self.epoch:
            if self.bar is not None:
                self.bar.n = self.bar.total  # a later epoch began: this one ran to its end
                self._show(evals.get(str(self.epoch)))
            self.close()
            for missed in range((self.epoch or 0) + 1, epoch):  # epochs no note arrived in
                self._open(missed, note)
                self.bar.n = self.bar.total
                self._show(evals.get(str(missed)))
                self.close()
            self._open(epoch, note)
        self._show(evals.get(str(epoch)))
        self.bar.n = note["step"]
        self.bar.refresh()

    def _open(self, epoch: int, note: dict[str, Any]) -> None:
        from tqdm import tqdm

        self.epoch, self.shown = epoch, None
        self.bar = tqdm(total=note["steps"], unit="step", leave=True,
                        desc=epoch_bar_desc(self.label, epoch, note["epochs"]))

    def _show(self, held: dict[str, Any] | None) -> None:
        if held == self.shown:
            return
        self.shown = held
        post = held_out_postfix(held)
        if post:
            self.bar.set_postfix_str(post, refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.refresh()
            self.bar.close()
            self.bar = None
