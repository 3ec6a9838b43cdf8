"""A training run's progress, for the launcher's bar per epoch: rank 0 of a run notes where it is (epoch, step in the
epoch, the last held-out evaluation of every epoch so far) in a small JSON file beside its record, at most twice a second and between steps
(outside their timed span); the launcher reads it while it waits for the run. The file is dropped with the run's
other notes when the record is written."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


def progress_path(out: str | Path) -> Path:
    return Path(f"{out}.progress")  # not *.json: a folder's records are its *.json files


class ProgressNote:
    """Writes a run's progress to ``progress_path(out)``: ``{"epoch", "epochs", "step", "steps", "evals"}`` (1-based
    epoch and step; ``evals`` the last held-out evaluation of each epoch so far, keyed by its epoch: an evaluation
    names the epoch it ended or fell in, so a reader that missed notes still puts each beside its own epoch)."""

    def __init__(self, out: str | Path, epochs: int, steps: int, min_interval_s: float = 0.5) -> None:
        self.path, self.epochs, self.steps, self.min_interval_s = progress_path(out), epochs, steps, min_interval_s
        self.evals: dict[str, dict[str, Any]] = {}
        self._written = float("-inf")

    def __call__(self, epoch: int, step: int, evaluation: dict[str, Any] | None = None) -> None:
        """At ``step`` (1-based) of ``epoch`` (1-based); written when an evaluation came (it belongs to ``epoch``),
        an epoch ended, or at least ``min_interval_s`` passed since the last note."""
        if evaluation is not None:
            self.evals[str(epoch)] = {**evaluation, "epoch": epoch}
        now = time.monotonic()
        if evaluation is None and step < self.steps and now - self._written < self.min_interval_s:
            return
        self._written = now
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"epoch": epoch, "epochs": self.epochs, "step": step, "steps": self.steps,
                                   "evals": self.evals}))
        os.replace(tmp, self.path)  # a reader never sees half a note


def read_progress(path: Path) -> dict[str, Any] | None:
    """The last note, or None when there is none (yet) or it cannot be read."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
