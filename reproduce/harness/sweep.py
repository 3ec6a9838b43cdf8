"""Expand an experiment grid and run each point ``repeats`` times, each run in its own process and the repeats
interleaved across points (A B C A B C): resumable (a run with a record in this machine's folder is not run again),
isolated (a crash, an OOM kill, a time limit or a launcher error becomes that point's record and the sweep
goes on), with an ETA from the points timed so far."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from impls.api import registered_names
from reproduce.analysis.aggregate import write_summary
from reproduce.harness.config import Experiment, RunPoint
from reproduce.harness.launch import launch_point
from reproduce.harness.lifeline import RunLocked
from reproduce.harness.noise import record_probe
from reproduce.harness.records import base_record, read_record, record_path, write_record


def is_done(point: RunPoint, out_dir: Path, repeat: int = 0) -> bool:
    """A repeat is done when its record exists in this machine's folder, unless it was skipped for an impl that
    now exists."""
    path = record_path(out_dir, point, repeat)
    if not path.exists():
        return False
    try:
        rec = read_record(path)
    except ValueError:
        return False  # unreadable (a truncated write): run again, which replaces it; `unreadable` names it
    return not (rec.get("status") == "skipped" and point.impl in registered_names())


def unreadable(exp: Experiment) -> list[str]:
    """What is wrong with each record of the experiment's runs that cannot be read (they will be run again)."""
    bad = []
    for p, r in exp.tasks():
        path = record_path(exp.out_dir, p, r)
        if path.exists():
            try:
                read_record(path)
            except ValueError as exc:
                bad.append(str(exc))
    return bad


def adopt_older_records(exp: Experiment) -> int:
    """Rename records written under an older point id (before a RunPoint field existed, so their id hashed fewer
    fields) or before repeats (``<id>.json``, which becomes repeat 0) to the name their point and repeat have now,
    when that is one of the experiment's points and has no record yet; returns how many."""
    wanted = {p.point_id for p in exp.points}
    moved = 0
    for f in sorted(Path(exp.out_dir).glob("*.json")):
        stem, dot, rep = f.stem.rpartition(".r")
        if dot and rep.isdigit() and stem in wanted:
            continue
        try:
            rec = read_record(f)
            pid = RunPoint.from_dict(rec["point"]).point_id
        except (ValueError, KeyError, TypeError):
            continue  # not a record of a point this code can read: left alone
        repeat = int(rec.get("repeat", rep if dot and rep.isdigit() else 0))
        target = f.with_name(f"{pid}.r{repeat}.json")
        if pid in wanted and not target.exists():
            rec.update(point_id=pid, repeat=repeat)
            write_record(target, rec)
            f.unlink()
            moved += 1
    return moved


def todo(exp: Experiment, force: bool = False) -> list[tuple[RunPoint, int]]:
    """The (point, repeat) pairs still to run on this machine, interleaved (repeat-major)."""
    adopt_older_records(exp)
    return [(p, r) for p, r in exp.tasks() if force or not is_done(p, exp.out_dir, r)]


@dataclass
class Progress:
    """Where a sweep stands: runs finished (now or earlier), and the wall time of the ones run now."""
    todo: int
    finished: int = 0
    walls: list[float] = field(default_factory=list)

    @property
    def left(self) -> int:
        return self.todo - len(self.walls)

    def eta_s(self) -> float | None:
        """Seconds left: the median run's wall time so far times the runs left (None before the first)."""
        return statistics.median(self.walls) * self.left if self.walls else None


def run_point_isolated(point: RunPoint, out_dir: Path, timeout_s: float | None, repeat: int = 0) -> dict:
    """Launch one repeat; a launcher error (e.g. an unreachable rendezvous) is recorded as its failure. A run that
    another live process is running raises RunLocked (nothing is written)."""
    try:
        return launch_point(point, out_dir, timeout_s, repeat)
    except RunLocked:
        raise
    except (OSError, ValueError, RuntimeError) as exc:
        record = base_record(point.to_dict(), "failed", f"launcher: {type(exc).__name__}: {exc}")
        record.update(point_id=point.point_id, repeat=repeat)
        write_record(record_path(out_dir, point, repeat), record)
        return record


def run_experiment(
    exp: Experiment,
    force: bool = False,
    timeout_s: float | None = None,
    on_point: Callable[[int, int, RunPoint, int, dict | None], None] | None = None,
    on_start: Callable[[RunPoint, int, Progress], None] | None = None,
    probe: bool = True,
) -> Path:
    """Run every (point, repeat) not yet recorded on this machine (all with ``force``), repeat-major so the
    implementations and points interleave; return the summary.csv path. A noise probe is recorded before and after
    (``probe``). ``on_start`` sees each run about to start with the sweep's progress; ``on_point`` sees each run's
    record (None: recorded earlier)."""
    tasks = exp.tasks()
    pending = set((p.point_id, r) for p, r in todo(exp, force))
    progress = Progress(todo=len(pending))
    if pending and probe:
        record_probe(exp.out_dir, "before")
    for i, (point, repeat) in enumerate(tasks):
        if (point.point_id, repeat) not in pending:
            progress.finished += 1
            if on_point:
                on_point(i, len(tasks), point, repeat, None)
            continue
        if on_start:
            on_start(point, repeat, progress)
        t0 = time.monotonic()
        try:
            record = run_point_isolated(point, exp.out_dir, timeout_s, repeat)
        except RunLocked as exc:  # another sweep runs it now: leave it to that one
            record = {"status": "locked", "reason": str(exc)}
        progress.walls.append(time.monotonic() - t0)
        progress.finished += 1
        if on_point:
            on_point(i, len(tasks), point, repeat, record)
    if pending and probe:
        record_probe(exp.out_dir, "after")
    return summarize_experiment(exp)


def summarize_experiment(exp: Experiment) -> Path:
    """summary.csv over every recorded repeat of the experiment's own points (records of other profiles' points in
    the folder are left out)."""
    adopt_older_records(exp)
    order = list(dict.fromkeys(p.impl for p in exp.points))
    keep = {f.name for p in exp.points for f in Path(exp.out_dir).glob(f"{p.point_id}.r*.json")}
    return write_summary(exp.out_dir, baseline=order[0], order=order, only=keep)
