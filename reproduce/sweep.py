"""Expand an experiment grid and run each point in its own process, resuming from existing records."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from impls.api import registered_names
from reproduce.aggregate import write_summary
from reproduce.config import Experiment, RunPoint
from reproduce.launch import launch_point, record_path
from reproduce.records import read_record


def is_done(point: RunPoint, out_dir: Path) -> bool:
    """A point is done when its record exists, unless it was skipped for an impl that now exists."""
    path = record_path(out_dir, point)
    if not path.exists():
        return False
    rec = read_record(path)
    return not (rec["status"] == "skipped" and point.impl in registered_names())


def run_experiment(
    exp: Experiment,
    force: bool = False,
    timeout_s: float | None = None,
    on_point: Callable[[int, int, RunPoint, dict | None], None] | None = None,
) -> Path:
    """Run every point not yet recorded (all with ``force``); return the summary.csv path."""
    n = len(exp.points)
    for i, point in enumerate(exp.points):
        if not force and is_done(point, exp.out_dir):
            if on_point:
                on_point(i, n, point, None)
            continue
        record = launch_point(point, exp.out_dir, timeout_s)
        if on_point:
            on_point(i, n, point, record)
    order = list(dict.fromkeys(p.impl for p in exp.points))
    keep = {record_path(exp.out_dir, p).name for p in exp.points}
    return write_summary(exp.out_dir, baseline=order[0], order=order, only=keep)
