"""Expand an experiment grid and run each point ``repeats`` times, each run in its own process and the repeats
interleaved across points (A B C, then C B A: ``interleaved``): resumable (a run with a record in this machine's folder is not run again),
isolated (a crash, an OOM kill, a time limit or a launcher error becomes that point's record and the sweep
goes on), with an ETA from the points timed so far."""
from __future__ import annotations

import functools
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from impls.api import registered_names
from reproduce.harness.resolve import Sweep
from reproduce.harness.point import RunPoint
from reproduce.harness.launch import RecordedElsewhere, launch_point
from reproduce.harness.noise import record_probe
from reproduce.harness.records import (DiskFull, Record, RunLocked, Status, adopt_older_records, lock_run,
                                       older_records, read_record, record_path, release_lock, write_record)


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
    if rec.point.get("data") != point.data and Path(str(point.data)).is_absolute() and Path(
            str(rec.point.get("data"))).is_absolute() and Path(str(rec.point.get("data"))).exists():
        # an id names a dataset outside the project by its folder name: another folder of that name here is
        # another dataset, whose record must not pass for this one's (nor be overwritten by it)
        raise ValueError(f"{path} is a run on {rec.point.get('data')}, and this sweep's data {point.data} has the "
                         f"same folder name: give this one another result set (--root) or rename a folder")
    return not (rec.status is Status.SKIPPED and point.impl in registered_names())


def unreadable(exp: Sweep) -> list[str]:
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


def _wanted(exp: Sweep) -> set[str]:
    return {p.point_id for p in exp.points}


def todo(exp: Sweep, force: bool = False) -> list[tuple[RunPoint, int]]:
    """The (point, repeat) pairs still to run on this machine, interleaved (repeat-major); records written under an
    older point id are adopted (renamed) first."""
    adopt_older_records(exp.out_dir, _wanted(exp))
    return [(p, r) for p, r in exp.tasks() if force or not is_done(p, exp.out_dir, r)]


def plan(exp: Sweep, force: bool = False) -> list[tuple[RunPoint, int, bool]]:
    """Every (point, repeat) with whether a sweep would run it, without writing anything (records under an older
    point id count as done, as a sweep would adopt them): what ``--dry-run`` lists."""
    older = older_records(exp.out_dir, _wanted(exp))
    return [(p, r, force or not (is_done(p, exp.out_dir, r) or record_path(exp.out_dir, p, r) in older))
            for p, r in exp.tasks()]


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


@dataclass(frozen=True)
class Outcome:
    """What became of one run of a sweep: its record (``ran`` now, or ``earlier``), or no record here because
    another live sweep runs it (``locked``) or rank 0 wrote it on another node (``elsewhere``); ``note`` says
    which."""

    kind: str
    record: Record | None = None
    note: str = ""

    @property
    def finished(self) -> bool:
        """False when the run did not run through here: failed, diverged, or left to another process."""
        if self.kind == "locked":
            return False
        return self.record is None or self.record.status not in (Status.FAILED, Status.DIVERGED)


def run_point_isolated(point: RunPoint, out_dir: Path, timeout_s: float | None, repeat: int = 0,
                       on_progress: Callable[[dict[str, Any]], None] | None = None) -> Record:
    """Launch one repeat; a launcher error (e.g. an unreachable rendezvous) is recorded as its failure. A run that
    another live process is running raises RunLocked, one recorded on another node RecordedElsewhere (nothing is
    written here). ``on_progress``: launch_point's."""
    try:
        return launch_point(point, out_dir, timeout_s, repeat, on_progress)
    except (RunLocked, RecordedElsewhere, DiskFull):
        raise  # a full disk cannot take the failure's record either: the command says so and stops
    except (OSError, ValueError, RuntimeError) as exc:
        record = Record.failed(point.to_dict(), f"launcher: {type(exc).__name__}: {exc}", point_id_=point.point_id,
                               repeat=repeat)
        write_record(record_path(out_dir, point, repeat), record)
        return record


def probe_threads(exp: Sweep) -> int | None:
    """The thread count the experiment's runs use per process (the most common; None: all cores)."""
    counts = statistics.multimode([p.threads for p in exp.points]) if exp.points else [None]
    return counts[0]


def run_experiment(
    exp: Sweep,
    force: bool = False,
    timeout_s: float | None = None,
    on_point: Callable[[int, int, RunPoint, int, Outcome], None] | None = None,
    on_start: Callable[[RunPoint, int, Progress], None] | None = None,
    probe: bool = True,
) -> list[Outcome]:
    """Run every (point, repeat) not yet recorded on this machine (all with ``force``), repeat-major so the
    implementations and points interleave, and return each run's outcome. With ``probe``, a noise probe (at the
    runs' thread count) is recorded before the first run, before every later round of repeats and after the last.
    ``on_start`` sees each run about to start with the sweep's progress; ``on_point`` each run's outcome."""
    tasks = exp.tasks()
    pending = set((p.point_id, r) for p, r in todo(exp, force))
    progress = Progress(todo=len(pending))
    threads = probe_threads(exp)
    outcomes: list[Outcome] = []
    probed_round = None
    for i, (point, repeat) in enumerate(tasks):
        if (point.point_id, repeat) not in pending:
            progress.finished += 1
            outcomes.append(Outcome("earlier"))
            if on_point:
                on_point(i, len(tasks), point, repeat, outcomes[-1])
            continue
        if probe and probed_round != repeat:
            record_probe(exp.out_dir, "before" if probed_round is None else f"round {repeat}", threads=threads)
            probed_round = repeat
        t0 = time.monotonic()
        starting = functools.partial(on_start, point, repeat, progress) if on_start else None
        outcome = _claim_and_run(exp, point, repeat, force, timeout_s, starting)
        outcomes.append(outcome)
        if outcome.kind in ("ran", "elsewhere"):  # ran here (over nodes: this node's ranks)
            progress.walls.append(time.monotonic() - t0)
        else:  # left to another process, or recorded by one meanwhile: not a run of this sweep
            progress.todo -= 1
        progress.finished += 1
        if on_point:
            on_point(i, len(tasks), point, repeat, outcomes[-1])
    if probe and probed_round is not None:
        record_probe(exp.out_dir, "after", threads=threads)
    return outcomes


def _claim_and_run(exp: Sweep, point: RunPoint, repeat: int, force: bool, timeout_s: float | None,
                   starting: Callable[[], object] | None) -> Outcome:
    """Take the run's lock, then decide: a sweep's list of runs to do is made when it starts, so another sweep on the
    same folder may have recorded this run since; under the lock that is seen (``earlier``, not run twice) unless
    ``force``. A run another live process holds is ``locked``."""
    try:
        lock = lock_run(record_path(exp.out_dir, point, repeat))
    except RunLocked as exc:  # another sweep runs it now: leave it to that one
        return Outcome("locked", note=str(exc))
    try:
        if not force and is_done(point, exp.out_dir, repeat):
            return Outcome("earlier", read_record(record_path(exp.out_dir, point, repeat)),
                           note="recorded meanwhile by another process")
        if starting:
            starting()
        return Outcome("ran", run_point_isolated(point, exp.out_dir, timeout_s, repeat))
    except RunLocked as exc:
        return Outcome("locked", note=str(exc))
    except RecordedElsewhere as exc:
        return Outcome("elsewhere", note=str(exc))
    finally:
        release_lock(lock)


def experiment_records(exp: Sweep) -> set[str]:
    """The file names of every recorded repeat of the experiment's own points (records of other profiles' points in
    the folder are left out), after adopting records written under an older point id."""
    adopt_older_records(exp.out_dir, _wanted(exp))
    return {f.name for p in exp.points for f in Path(exp.out_dir).glob(f"{p.point_id}.r*.json")}
