"""Expand an experiment grid and run each point in its own process: resumable (a point with a record is not run
again), isolated (a crash, an OOM kill, a time limit or a launcher error becomes that point's record and the sweep
goes on), with an ETA from the points timed so far."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from impls.api import registered_names
from reproduce.aggregate import write_summary
from reproduce.config import Experiment, RunPoint
from reproduce.launch import launch_point, record_path
from reproduce.records import base_record, read_record, write_record


def is_done(point: RunPoint, out_dir: Path) -> bool:
    """A point is done when its record exists, unless it was skipped for an impl that now exists."""
    path = record_path(out_dir, point)
    if not path.exists():
        return False
    rec = read_record(path)
    return not (rec["status"] == "skipped" and point.impl in registered_names())


def adopt_older_records(exp: Experiment) -> int:
    """Rename records written before a RunPoint field existed (their id hashed fewer fields) to the id their
    point has now, when it is one of the experiment's points and has no record yet; returns how many."""
    wanted = {p.point_id for p in exp.points}
    moved = 0
    for f in sorted(Path(exp.out_dir).glob("*.json")):
        if f.stem in wanted:
            continue
        try:
            pid = RunPoint.from_dict(read_record(f)["point"]).point_id
        except (ValueError, KeyError, TypeError):
            continue  # not a record of a point this code can read: left alone
        target = f.with_name(f"{pid}.json")
        if pid in wanted and not target.exists():
            f.rename(target)
            moved += 1
    return moved


def todo(exp: Experiment, force: bool = False) -> list[RunPoint]:
    adopt_older_records(exp)
    return [p for p in exp.points if force or not is_done(p, exp.out_dir)]


@dataclass
class Progress:
    """Where a sweep stands: points finished (run now or earlier), and the wall time of the ones run now."""
    todo: int
    finished: int = 0
    walls: list[float] = field(default_factory=list)

    @property
    def left(self) -> int:
        return self.todo - len(self.walls)

    def eta_s(self) -> float | None:
        """Seconds left: the median point's wall time so far times the points left (None before the first)."""
        return statistics.median(self.walls) * self.left if self.walls else None


def run_point_isolated(point: RunPoint, out_dir: Path, timeout_s: float | None) -> dict:
    """Launch one point; a launcher error (e.g. an unreachable rendezvous) is recorded as that point's failure."""
    try:
        return launch_point(point, out_dir, timeout_s)
    except (OSError, ValueError, RuntimeError) as exc:
        record = base_record(point.to_dict(), "failed", f"launcher: {type(exc).__name__}: {exc}")
        write_record(record_path(out_dir, point), record)
        return record


def run_experiment(
    exp: Experiment,
    force: bool = False,
    timeout_s: float | None = None,
    on_point: Callable[[int, int, RunPoint, dict | None], None] | None = None,
    on_start: Callable[[RunPoint, Progress], None] | None = None,
) -> Path:
    """Run every point not yet recorded (all with ``force``); return the summary.csv path. ``on_start`` sees each
    point about to run with the sweep's progress; ``on_point`` sees each point's record (None: recorded earlier)."""
    n = len(exp.points)
    pending = {p.point_id for p in todo(exp, force)}
    progress = Progress(todo=len(pending))
    for i, point in enumerate(exp.points):
        if point.point_id not in pending:
            progress.finished += 1
            if on_point:
                on_point(i, n, point, None)
            continue
        if on_start:
            on_start(point, progress)
        t0 = time.monotonic()
        record = run_point_isolated(point, exp.out_dir, timeout_s)
        progress.walls.append(time.monotonic() - t0)
        progress.finished += 1
        if on_point:
            on_point(i, n, point, record)
    return summarize_experiment(exp)


def summarize_experiment(exp: Experiment) -> Path:
    """summary.csv over the experiment's own points (records of other profiles in the folder are left out)."""
    adopt_older_records(exp)
    order = list(dict.fromkeys(p.impl for p in exp.points))
    keep = {record_path(exp.out_dir, p).name for p in exp.points}
    return write_summary(exp.out_dir, baseline=order[0], order=order, only=keep)
