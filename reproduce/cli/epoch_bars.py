"""A training run's progress in the terminal: one bar per epoch (its steps), the held-out evaluation that ends it
beside it, fed the run's progress notes (reproduce/harness/progress.py) while the launcher waits."""
from __future__ import annotations

from typing import Any

from reproduce.analysis.run_output import epoch_bar_desc, held_out_postfix


class EpochBars:
    """Call with each progress note of one run; ``close`` when the run ends. A note carries the last evaluation: one
    that is new when the next epoch's first note arrives (the poll missed the note of the evaluation itself) is put
    beside the epoch it ended before that bar closes."""

    def __init__(self, label: str) -> None:
        self.label, self.epoch, self.bar, self.shown = label, None, None, None

    def __call__(self, note: dict[str, Any]) -> None:
        from tqdm import tqdm

        held = note.get("eval")
        if note["epoch"] != self.epoch:
            if self.bar is not None and held != self.shown:
                self._show(held)
            self.close()
            self.epoch = note["epoch"]
            self.bar = tqdm(total=note["steps"], unit="step", leave=True,
                            desc=epoch_bar_desc(self.label, note["epoch"], note["epochs"]))
        elif held != self.shown:
            self._show(held)
        self.bar.n = note["step"]
        self.bar.refresh()

    def _show(self, held: dict[str, Any] | None) -> None:
        self.shown = held
        post = held_out_postfix(held)
        if post:
            self.bar.set_postfix_str(post, refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.refresh()
            self.bar.close()
            self.bar = None
