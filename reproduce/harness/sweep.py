"""Expand an experiment grid and run each point ``repeats`` times, each run in its own process and the repeats
interleaved across points (A B C, then C B A: ``interleaved``): resumable (a run with a record in this machine's folder is not run again),
isolated (a crash, an OOM kill, a time limit or a launcher error becomes that point's record and the sweep
goes on), with an ETA from the points timed so far."""
from __future__ import annotations

import functools
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from impls.registry import registered_names
from reproduce.harness.resolve import Sweep
from reproduce.harness.point import RunPoint
from reproduce.harness.launch import RecordedElsewhere, launch_point
from reproduce.harness.noise import record_probe
from reproduce.harness.record_store import (DiskFull, RunLocked, SymlinkRefused, check_identity, clear_stale_locks,
                                            finished_record, lock_run, read_record, record_path, release_lock,
                                            says_disk_full, write_record)
from reproduce.harness.records import Record, Status


def is_done(point: RunPoint, out_dir: Path, repeat: int = 0) -> bool:
    """A repeat is done when its record exists in this machine's folder, unless it was skipped for an impl that
    now exists or failed for lack of disk space (not the point's failure: redone once there is space)."""
    path = record_path(out_dir, point, repeat)
    if path.is_symlink() or not path.exists():
        return False  # a link is never written through: the run is refused when its turn comes (`unreadable` says)
    try:
        rec = check_identity(path, read_record(path))
    except ValueError:
        return False  # unreadable (a truncated write) or not this point's: run again, which replaces it; `unreadable`
        # names it
    if rec.point.get("data") != point.data and Path(str(point.data)).is_absolute() and Path(
            str(rec.point.get("data"))).is_absolute() and Path(str(rec.point.get("data"))).exists():
        # an id names a dataset outside the project by its folder name: another folder of that name here is
        # another dataset, whose record must not pass for this one's (nor be overwritten by it)
        raise ValueError(f"{path} is a run on {rec.point.get('data')}, and this sweep's data {point.data} has the "
                         f"same folder name: give this one another result set (--root) or rename a folder")
    if rec.status is Status.FAILED and says_disk_full(rec.reason or ""):
        return False
    return not (rec.status is Status.SKIPPED and point.impl in registered_names())


def unreadable(exp: Sweep) -> list[str]:
    """What is wrong with each record of the experiment's runs that cannot be read, or cannot be written: a record
    that is unreadable or contradicts its name (run again, which replaces it), a symbolic link (never written
    through: that run will be recorded as failed, the link left as it is)."""
    bad = []
    for p, r in exp.tasks():
        path = record_path(exp.out_dir, p, r)
        if path.is_symlink():
            bad.append(f"{path} is a symbolic link (to {os.readlink(path)}): a sweep never writes through one, so this "
                       f"run will fail; remove the link to run it")
        elif path.exists():
            try:
                check_identity(path, read_record(path))
            except ValueError as exc:
                bad.append(str(exc))
    return bad


def tidy_set(exp: Sweep) -> None:
    """The one step of a sweep that changes what its set holds before anything runs (run_experiment's first, and
    before a Slurm script is written): the locks of killed runs are cleared with what those runs left pending. Every
    query (todo, plan, experiment_records) only reads."""
    clear_stale_locks(exp.out_dir)


def todo(exp: Sweep, force: bool = False) -> list[tuple[RunPoint, int]]:
    """The (point, repeat) pairs still to run on this machine, interleaved (repeat-major). Reads only."""
    return [(p, r) for p, r in exp.tasks() if force or not is_done(p, exp.out_dir, r)]


def plan(exp: Sweep, force: bool = False) -> list[tuple[RunPoint, int, bool]]:
    """Every (point, repeat) with whether a sweep would run it, without writing anything: what ``--dry-run``
    lists."""
    return [(p, r, force or not is_done(p, exp.out_dir, r)) for p, r in exp.tasks()]


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
                       on_progress: Callable[[dict[str, Any]], None] | None = None,
                       cores: tuple[int, ...] | None = None, keep: Sequence[str] = ()) -> Record:
    """Launch one repeat; a launcher error (e.g. an unreachable rendezvous) is recorded as its failure. A run that
    another live process is running raises RunLocked, one recorded on another node RecordedElsewhere (nothing is
    written here). ``on_progress``: launch_point's."""
    try:
        return launch_point(point, out_dir, timeout_s, repeat, on_progress, cores, keep)
    except (RunLocked, RecordedElsewhere, DiskFull):
        raise  # a full disk cannot take the failure's record either: the command says so and stops
    except SymlinkRefused as exc:  # its record cannot be written where the link is: a failure of this run, not kept
        return Record.failed(point.to_dict(), str(exc), point_id_=point.point_id, repeat=repeat)
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
    more: Callable[[], list[RunPoint]] | None = None,
    clock: Callable[[], float] = time.monotonic,
    schedule: str | None = None,
) -> list[Outcome]:
    """Run every (point, repeat) not yet recorded on this machine (all with ``force``), round by round so the
    implementations and points interleave, and return each run's outcome. Then, with ``more`` (the points whose
    headline ratios are not yet resolved: the CLI asks the analysis), rounds of just those points until it names none,
    the experiment's ``[rounds]`` budget of seconds (``clock``) would be overrun by the next round or its
    ``max_rounds`` are reached (evidence.py); past the budget, rounds of the points below ``min_rounds`` rounds still
    run (``more(required=True)``). ``schedule`` (default the experiment's): ``duet`` runs consecutive
    points of a round that each fit in half the cores two at once, on disjoint cores, swapped every round. With
    ``probe``, a noise probe (at the runs' thread count) is recorded before the first run, before every later round
    and after the last. ``on_start`` sees each run about to start with the sweep's progress; ``on_point`` each run's
    outcome."""
    policy = exp.experiment.rounds
    schedule = schedule or policy.schedule
    tasks = exp.tasks()
    tidy_set(exp)
    pending = set((p.point_id, r) for p, r in todo(exp, force))
    progress = Progress(todo=len(pending))
    threads = probe_threads(exp)
    outcomes: list[Outcome] = []
    state = {"probed": None, "index": 0, "total": len(tasks)}

    def run_round(round_tasks: list[tuple[RunPoint, int]]) -> None:
        repeat = round_tasks[0][1]
        for unit in units(round_tasks, schedule):
            todo_now = [(p, r) for p, r in unit if (p.point_id, r) in pending]  # a duet's partner may be done
            if todo_now and probe and state["probed"] != repeat:
                record_probe(exp.out_dir, "before" if state["probed"] is None else f"round {repeat}", threads=threads,
                             window_s=policy.probe_s)
                state["probed"] = repeat
            results = _run_unit(exp, [(p, r, c) for (p, r), c in zip(todo_now, unit_cores(todo_now))], force,
                                timeout_s, on_start, progress)
            for point, r in unit:
                out = results.get((point.point_id, r), Outcome("earlier"))
                if (point.point_id, r) not in results:
                    progress.finished += 1
                outcomes.append(out)
                if on_point:
                    on_point(state["index"], state["total"], point, r, out)
                state["index"] += 1

    for round_tasks in by_rounds(tasks):
        run_round(round_tasks)
    if more is not None:
        began, repeat = clock(), exp.repeats
        per_run = statistics.median(progress.walls) if progress.walls else 0.0  # until an added round is timed
        while repeat < policy.max_rounds:
            points = more()
            if not points:
                break
            if clock() - began + per_run * len(points) > policy.budget_s:  # the next round would overrun the budget:
                points = more(required=True)  # only what has fewer than min_rounds rounds still runs
                if not points:
                    break
            start = clock()
            order = points if repeat % 2 == 0 else points[::-1]
            state["total"] += len(order)
            new = {(p.point_id, repeat) for p in order if force or not is_done(p, exp.out_dir, repeat)}
            progress.todo += len(new)
            pending.update(new)
            run_round([(p, repeat) for p in order])
            per_run = (clock() - start) / len(order)  # this round's cost per point (a duet's pairs included)
            repeat += 1
    if probe and state["probed"] is not None:
        record_probe(exp.out_dir, "after", threads=threads, window_s=policy.probe_s)
    return outcomes


def by_rounds(tasks: list[tuple[RunPoint, int]]) -> list[list[tuple[RunPoint, int]]]:
    """The tasks cut into rounds (runs of one repeat index), in order."""
    out: list[list[tuple[RunPoint, int]]] = []
    for task in tasks:
        if out and out[-1][0][1] == task[1]:
            out[-1].append(task)
        else:
            out.append([task])
    return out


def machine_cores() -> tuple[int, ...]:
    """The cores this process may run on."""
    return tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else tuple(
        range(os.cpu_count() or 1))


def cores_used(point: RunPoint, cores: int | None = None) -> int:
    """The cores a point's processes keep busy on one node: its ranks there times their threads (a point that leaves
    its threads to torch: every core, ``cores`` or this machine's)."""
    ranks = point.world_size // max(point.nnodes or 1, 1) if isinstance(point.nnodes, int) else point.world_size
    threads = int(point.threads) if point.threads else (cores or len(machine_cores()))
    return max(ranks, 1) * threads


def units(round_tasks: list[tuple[RunPoint, int]], schedule: str,
          cores: tuple[int, ...] | None = None) -> list[list[tuple[RunPoint, int]]]:
    """A round's runs as the units the sweep starts together: one run each (``sequential``), or (``duet``)
    consecutive runs that each fit in half the cores paired, the rest alone."""
    cores = cores or machine_cores()
    if schedule != "duet":
        return [[t] for t in round_tasks]
    half = len(cores) // 2
    out: list[list[tuple[RunPoint, int]]] = []
    waiting = None  # the duet unit that has its first run only
    for t in round_tasks:
        if not (half >= 1 and t[0].device == "cpu" and cores_used(t[0], len(cores)) <= half):
            out.append([t])
        elif waiting is not None:
            waiting.append(t)
            waiting = None
        else:
            waiting = [t]
            out.append(waiting)
    return out


def unit_cores(unit: list[tuple[RunPoint, int]],
               cores: tuple[int, ...] | None = None) -> list[tuple[int, ...] | None]:
    """The cores each run of a unit is held to: none for a run alone; for a duet the two halves of the machine, the
    side with the lower point id on the first half in even rounds and on the second in odd ones, so that the same
    two points swap halves every round."""
    if len(unit) < 2:
        return [None] * len(unit)
    cores = cores or machine_cores()
    half = len(cores) // 2
    halves = [cores[:half], cores[half:2 * half]]
    (a, repeat), (b, _) = unit
    flip = (a.point_id > b.point_id) != bool(repeat % 2)
    return halves[::-1] if flip else halves


def _run_unit(exp: Sweep, unit: list[tuple[RunPoint, int, tuple[int, ...] | None]], force: bool,
              timeout_s: float | None, on_start, progress: Progress) -> dict[tuple[str, int], Outcome]:
    """Run a unit's runs (two at once for a duet, each in a thread of its own) and account them in ``progress``."""
    if not unit:
        return {}
    t0 = time.monotonic()

    def one(point: RunPoint, repeat: int, cores) -> Outcome:
        starting = functools.partial(on_start, point, repeat, progress) if on_start else None
        return _claim_and_run(exp, point, repeat, force, timeout_s, starting, cores)

    if len(unit) == 1:
        results = [one(*unit[0])]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(unit)) as pool:
            results = list(pool.map(lambda u: one(*u), unit))
    wall = (time.monotonic() - t0) / len(unit)  # a duet's two runs share its wall time
    out = {}
    for (point, repeat, _), outcome in zip(unit, results):
        if outcome.kind in ("ran", "elsewhere"):  # ran here (over nodes: this node's ranks)
            progress.walls.append(wall)
        else:  # left to another process, or recorded by one meanwhile: not a run of this sweep
            progress.todo -= 1
        progress.finished += 1
        out[(point.point_id, repeat)] = outcome
    return out


def _claim_and_run(exp: Sweep, point: RunPoint, repeat: int, force: bool, timeout_s: float | None,
                   starting: Callable[[], object] | None, cores: tuple[int, ...] | None = None) -> Outcome:
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
        path = record_path(exp.out_dir, point, repeat)
        earlier = finished_record(path)  # a finished record that --force replaces once the new one is complete
        record = run_point_isolated(point, exp.out_dir, timeout_s, repeat, cores=cores)
        replaced = earlier is not None and earlier.replaced
        return Outcome("ran", record, note=f"replaced the earlier {earlier.what}" if replaced else "")
    except RunLocked as exc:
        return Outcome("locked", note=str(exc))
    except RecordedElsewhere as exc:
        return Outcome("elsewhere", note=str(exc))
    finally:
        release_lock(lock)


def experiment_records(exp: Sweep) -> set[str]:
    """The file names of every recorded repeat of the experiment's own points (records of other profiles' points in
    the folder are left out). Reads only."""
    return {f.name for p in exp.points for f in Path(exp.out_dir).glob(f"{p.point_id}.r*.json")}


def expected_s(exp: Sweep, runs: list[tuple[RunPoint, int]], reference: Path | None) -> tuple[float, int] | None:
    """Seconds the ``runs`` are expected to take, from the wall times the reference machine's set recorded for the
    same points (a point it lacks: the median of those it has), and how many of the runs it knew; None without a
    reference set of this experiment."""
    import csv

    path = None if reference is None else Path(reference) / "repeats.csv"
    if path is None or not path.exists():
        return None
    walls: dict[str, list[float]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("wall_s"):
                walls.setdefault(row["point_id"], []).append(float(row["wall_s"]))
    if not walls:
        return None
    per = {pid: statistics.median(w) for pid, w in walls.items()}
    typical = statistics.median(per.values())
    known = sum(1 for p, _ in runs if p.point_id in per)
    return sum(per.get(p.point_id, typical) for p, _ in runs), known
