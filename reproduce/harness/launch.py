"""Launch one run point in a fresh process and always come back with exactly one record."""
from __future__ import annotations

import errno
import functools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from impls.registry import registered_names
from reproduce.harness.point import RunPoint
from reproduce.harness.progress import progress_path, read_progress
from reproduce.harness.lifeline import die_with_parent
from reproduce.harness.machine import MACHINE_CORES_ENV, cores as machine_cores
from reproduce.harness.rank import rank_files
from reproduce.harness.systems import launch_module
from reproduce.harness import forked_run
from impls.data.safe_write import open_for_write
from reproduce.harness.environment import LAUNCHED_ENV, SCHEDULE_ENV
from reproduce.harness.record_store import (DiskFull, check_overwritable, check_writable, lock_run, log_path,
                                            pending_files, pending_path, promote_log, read_record, record_path,
                                            release_lock, says_disk_full, write_record)
from reproduce.harness.records import Record, Status


class RecordedElsewhere(Exception):
    """A multi-node run that ended well here while global rank 0, on another node, wrote its record there."""


def skip_unregistered(point: RunPoint, out_dir: Path, repeat: int = 0) -> Record | None:
    """The `skipped` record of a point whose implementation is not registered (written), else None."""
    if point.impl in registered_names():
        return None
    record = Record.skipped(point.to_dict(), f"not implemented: {point.impl!r} is not registered yet", point.point_id,
                            repeat)
    write_record(record_path(out_dir, point, repeat), record)
    return record


def launch_point(point: RunPoint, out_dir: Path, timeout_s: float | None = None, repeat: int = 0,
                 on_progress: Callable[[dict[str, Any]], None] | None = None,
                 cores: tuple[int, ...] | None = None, keep: Sequence[str] = ()) -> Record:
    """Run repeat ``repeat`` of ``point`` in reproduce.harness.worker (an outside system's: in
    reproduce.harness.outside_worker, which loads it first); its output goes to ``out_dir/logs``. On one node its
    processes (each rank's) are forked from the preloaded server (forked_run.py); over nodes torchrun starts them.
    A point whose implementation is not registered yet is recorded as `skipped` without launching anything. Raises
    RunLocked when another live process runs it, RecordedElsewhere when rank 0 wrote the record on another node.
    ``on_progress`` hears each new progress note of a training run (progress.py) while it runs. ``cores``: the run
    and every rank it starts are held to these cores (a duet: another run holds the others; the record says so).
    ``keep``: the worker's --save DIR / --resume DIR arguments (a training run's kept model, kept_model.py)."""
    out_dir = Path(out_dir)
    rec_path = record_path(out_dir, point, repeat)
    skipped = skip_unregistered(point, out_dir, repeat)
    if skipped:
        return skipped
    if point.world_size > 1:
        check_rendezvous(point)
    log = log_path(rec_path)
    log.parent.mkdir(parents=True, exist_ok=True)
    lock = lock_run(rec_path)  # RunLocked when a live process runs it already
    try:
        check_writable(rec_path)  # a symbolic link where the record or log would go is refused
        check_overwritable(rec_path)  # so is a file that is not a record
        pending, pending_log = pending_path(rec_path), pending_path(log)
        clear_pending(rec_path)  # what a launcher killed part-way left (we hold the lock)
        module, *system = launch_module(point.impl)[1:]
        args = [*system, "--point-json", json.dumps(point.to_dict()), "--out", str(pending), *keep]
        env = {**os.environ, **worker_env(point),
               **({SCHEDULE_ENV: "duet", MACHINE_CORES_ENV: str(machine_cores())} if cores else {})}
        t0 = time.monotonic()
        kills = oom_kills()
        env[LAUNCHED_ENV] = repr(time.time())  # the worker's start-up is measured from here (worker.py)
        poll, root_cause = _progress_poll(pending, on_progress), None
        if point.nnodes == 1:  # its processes forked from the preloaded server (forked_run.py)
            open_for_write(pending_log, "w", "the run's log").close()
            procs = (forked_run.start_ranks(module, args, env, pending_log, point.world_size, cores)
                     if point.world_size > 1 else [forked_run.start(module, args, env, pending_log, cores)])
            watch = forked_run.RankWatch(procs, pending_log)
            code = watch.wait(timeout_s, poll)
            root_cause = watch.first_failure
        else:  # over nodes: torchrun's rendezvous, with a short grace when it stops a failed run's ranks
            cmd = [sys.executable, "-m", "reproduce.harness.torchrun", *torchrun_args(point), "-m", module, *args]
            with open_for_write(pending_log, "w", "the run's log") as f:
                code = run_in_group(cmd, f, timeout_s, env, poll=poll, cores=cores)
        oom = kills is not None and (oom_kills() or 0) > kills
        return finish_point(point, rec_path, log, code, timeout_s, time.monotonic() - t0, repeat, oom, pending=True,
                            root_cause=root_cause)
    finally:
        release_lock(lock)


def clear_pending(rec_path: Path) -> None:
    """Remove what a run of ``rec_path`` killed part-way left (records.pending_files; we hold its lock)."""
    for f in pending_files(rec_path):
        f.unlink(missing_ok=True)


def worker_env(point: RunPoint) -> dict[str, str]:
    """The environment a run's processes get on top of the launcher's: over ranks one OpenMP thread per rank unless
    the point says how many. (Allocator settings - glibc's mmap / trim thresholds, PyTorch's THP_MEM_ALLOC_ENABLE -
    were tried here and left out: on the shared reference VM they moved the systems' step times by different
    amounts without narrowing the run-to-run spread; the record keeps whatever the caller set: env.malloc.)"""
    env: dict[str, str] = {}
    if point.world_size > 1:
        env["OMP_NUM_THREADS"] = str(point.threads or 1)
    return env


OOM_COUNTERS = (Path("/sys/fs/cgroup/memory.events"), Path("/sys/fs/cgroup/memory/memory.oom_control"))


def oom_kills() -> int | None:
    """How many processes the kernel's OOM killer has killed in this cgroup (v2 memory.events or v1
    memory.oom_control), or None where no counter is readable."""
    for path in OOM_COUNTERS:
        try:
            for line in path.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            continue
    return None


def _progress_poll(rec_path: Path, on_progress: Callable[[dict[str, Any]], None] | None) -> Callable[[], None] | None:
    """A poll that hands ``on_progress`` each new note of the run recording to ``rec_path``."""
    if on_progress is None:
        return None
    path, last = progress_path(rec_path), [None]

    def poll() -> None:
        note = read_progress(path)
        if note is not None and note != last[0]:
            last[0] = note
            on_progress(note)
    return poll


def run_in_group(cmd: list[str], log, timeout_s: float | None, env: dict | None = None,
                 poll: Callable[[], None] | None = None, poll_s: float = 0.25,
                 cores: tuple[int, ...] | None = None) -> int | None:
    """Run ``cmd`` in its own process group; its exit code, or None when it ran past ``timeout_s``. On the time
    limit, or when this process is interrupted (Ctrl-C, SIGTERM raised as an exception), the whole group (torchrun
    and every rank) is terminated, then killed, so no rank outlives the launcher; a launcher killed outright (kill -9)
    takes them with it (each dies with its parent). ``poll`` is called every ``poll_s`` while it runs; ``cores``: the
    command and its children may run on these cores only (sched_setaffinity before exec)."""
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                            preexec_fn=die_with_parent if not cores else functools.partial(_pinned, tuple(cores)))
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        while poll is not None:
            left = None if deadline is None else deadline - time.monotonic()
            try:
                code = proc.wait(timeout=poll_s if left is None else max(0.0, min(poll_s, left)))
            except subprocess.TimeoutExpired:
                if left is not None and left <= poll_s:
                    raise
                poll()
                continue
            poll()
            return code
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop_group(proc)
        return None
    except BaseException:
        _stop_group(proc)
        raise


def _pinned(cores: tuple[int, ...]) -> None:
    """In the child before exec: die with the parent, and run on ``cores`` only."""
    die_with_parent()
    os.sched_setaffinity(0, cores)


def _stop_group(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM to the group (torchrun forwards it to its ranks), then SIGKILL to whatever is left of it."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # the group is gone
        pass
    proc.wait()


def finish_point(point: RunPoint, rec_path: Path, log: Path, code: int | None, timeout_s: float | None,
                 wall_s: float | None = None, repeat: int = 0, oom: bool = False, pending: bool = False,
                 root_cause: tuple[int, int] | None = None) -> Record:
    """The one record of a finished launch (``code`` None: the time limit): the worker's own, its reason sharpened
    by what the ranks left behind, or a `failed` / `oom` record written here when the worker wrote none (`oom` for a
    SIGKILL only when ``oom``: the kernel's OOM-kill counter rose during the run). With ``pending`` the worker wrote
    its record and log beside the finished ones (records.pending_path), which they replace now, the log first, the
    record last: until then a finished record of the point is kept as it was. A run that ran out of disk space (its
    failure, or its log when it could write no record, says so) raises DiskFull and leaves no record, so that it is
    redone once there is space. ``root_cause``: the rank that failed first and its exit code, when the launcher
    watched the ranks itself (forked_run.RankWatch); else torchrun's log names it."""
    written = pending_path(rec_path) if pending else rec_path
    written_log = pending_path(log) if pending else log
    _raise_if_disk_full(rec_path, written, written_log, code)
    if written.exists():
        record = read_record(written)
        if not record.ok and point.world_size > 1:
            status, reason = _why(point, written, written_log, code, record.reason, root_cause)
            if reason != record.reason and not reason.startswith("worker exited"):
                record.reason = f"{reason}; rank 0 saw: {record.reason}"
    elif code == 0 and point.nnodes > 1:  # rank 0 ran on another node and wrote the record there
        _drop(rank_files(written, "step"))
        progress_path(written).unlink(missing_ok=True)
        if pending:
            promote_log(rec_path)
        raise RecordedElsewhere(f"{rec_path.name}: the record is written on the node of global rank 0 (log: {log})")
    else:
        if code is None:
            status, reason = Status.FAILED, f"time limit of {timeout_s} s exceeded"
        elif code in (-signal.SIGKILL, 128 + signal.SIGKILL) and oom:
            status, reason = Status.OOM, ("killed (signal 9) by the kernel's OOM killer (its oom_kill count rose "
                                          "during the run)")
        elif code in (-signal.SIGKILL, 128 + signal.SIGKILL):
            status, reason = Status.FAILED, ("killed (signal 9); the kernel's OOM killer did not count it (or its "
                                             "counter is not readable here)")
        else:
            status, reason = _why(point, written, written_log, code, root_cause=root_cause)
        record = Record.failed(point.to_dict(), reason, status, point.point_id)
    _drop(rank_files(written, "step"))  # the ranks' progress notes are read (by _why) or not needed: never kept
    progress_path(written).unlink(missing_ok=True)
    record.log, record.point_id, record.repeat = str(log), point.point_id, repeat
    if wall_s is not None:
        record.wall_s = wall_s
    try:
        if pending:
            promote_log(rec_path)
        write_record(rec_path, record)  # atomic: the finished record is replaced in one rename
    finally:
        if pending:
            written.unlink(missing_ok=True)
    return record


def _raise_if_disk_full(rec_path: Path, written: Path, log: Path, code: int | None) -> None:
    """DiskFull when the run failed for lack of disk space: its record's reason says so, or it wrote no record and its
    log's last lines do; what it left (its failure record, its ranks' notes) is removed, its log kept."""
    if code == 0:
        return
    if written.exists():
        try:
            rec = read_record(written)
        except ValueError:
            return
        said = rec.status is Status.FAILED and says_disk_full(rec.reason or "")
    else:
        said = log.exists() and says_disk_full(log.read_text(errors="replace")[-4000:])
    if not said:
        return
    written.unlink(missing_ok=True)
    for kind in ("step", "error"):
        _drop(rank_files(written, kind))
    progress_path(written).unlink(missing_ok=True)
    raise DiskFull(errno.ENOSPC, f"{rec_path.name}: the run ran out of disk space (its log: {log}); free some space "
                                 f"and run again (a sweep resumes where it stopped): nothing was recorded for it")


def _drop(files: dict[int, Path]) -> None:
    for f in files.values():
        f.unlink(missing_ok=True)


def torchrun_args(point: RunPoint) -> list[str]:
    """torchrun's options for a point: one node standalone, or a c10d rendezvous over ``nnodes`` nodes that
    gives up after the collective timeout instead of waiting for a node that never comes."""
    per_node = point.world_size // point.nnodes
    if point.nnodes == 1:
        return ["--standalone", f"--nproc-per-node={per_node}"]
    return [f"--nnodes={point.nnodes}", f"--nproc-per-node={per_node}", "--rdzv-backend=c10d",
            f"--rdzv-endpoint={point.rdzv_endpoint}", f"--rdzv-conf=join_timeout={int(point.dist_timeout_s)}",
            f"--rdzv-id=dlrmbench-{point.point_id}"]


def check_rendezvous(point: RunPoint, connect_s: float = 5.0) -> None:
    """Fail before launching when a multi-node rendezvous endpoint cannot be resolved or, on a node that does
    not host it, reached."""
    if point.nnodes == 1:
        return
    host, _, port = point.rdzv_endpoint.rpartition(":")
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ValueError(f"rendezvous endpoint {point.rdzv_endpoint}: cannot resolve {host!r} ({exc})") from None
    local = {"127.0.0.1", "::1", "0.0.0.0"}
    try:
        local |= {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None)}
    except socket.gaierror:
        pass
    if any(info[4][0] in local for info in infos):
        return  # this node hosts the rendezvous store
    try:
        socket.create_connection((host, int(port)), timeout=connect_s).close()
    except OSError as exc:
        raise ValueError(f"rendezvous endpoint {point.rdzv_endpoint} is unreachable from this node ({exc}); "
                         f"start the node that hosts it first, or check the address") from None


_ROOT_CAUSE = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)\s*exitcode\s*:\s*(-?\d+)")


def torchrun_root_cause(text: str) -> tuple[int, int] | None:
    """The rank torchrun's log names as the root cause of a failed run, and its exit code (None: it names none)."""
    m = _ROOT_CAUSE.search(text[text.find("Root Cause"):]) if "Root Cause" in text else None
    return (int(m.group(1)), int(m.group(2))) if m else None


def stalled_ranks(steps: dict[int, int], world: int) -> list[int]:
    """Ranks behind the others (or that never began a step) when at least one rank began a later step."""
    if not steps:
        return []
    last = max(steps.values())
    return [r for r in range(world) if steps.get(r, -1) < last]


def _why(point: RunPoint, rec_path: Path, log: Path, code: int | None, rank0_reason: str | None = None,
         root_cause: tuple[int, int] | None = None) -> tuple[str, str]:
    """Status and reason of a run whose ranks failed. The culprit is the rank observed failing first (by time:
    ``root_cause``, (rank, exit code) as the launcher's watch of forked ranks saw it, forked_run.RankWatch; else the
    "Root Cause" of torchrun's log): that rank's own error file when it wrote one, else its exit code or signal. The
    other ranks' errors (a peer's connection reset) only describe the aftermath. When that first failure is a
    collective's time-out, the culprit is the rank that had stopped making progress (behind its peers' last step: a
    hung or stopped process, which the launcher kills after the grace). Without a root cause: the lowest rank's error
    file. Rank 0 reports in its record, not a file: ``rank0_reason``."""
    errors = {}
    for rank, f in rank_files(rec_path, "error").items():
        status, _, reason = f.read_text().partition("\n")
        errors[rank] = (status, reason.strip())
        f.unlink()
    steps = {}
    for rank, f in rank_files(rec_path, "step").items():
        try:
            steps[rank] = int(f.read_text())
        except ValueError:
            pass  # torn mid-write by the kill: that rank's progress is unknown
        f.unlink()
    if root_cause is None and point.world_size > 1:
        root_cause = torchrun_root_cause(log.read_text(errors="replace") if log.exists() else "")
    if root_cause is not None and point.world_size > 1:
        rank, exit_code = root_cause
        stalled = stalled_ranks(steps, point.world_size)
        first = errors[rank][1] if rank in errors else (rank0_reason or "") if rank == 0 else ""
        if stalled and rank not in stalled and re.search(r"time[sd]? ?out", first, re.I):
            # the first to fail timed out waiting for a rank that had stopped
            names = ", ".join(f"rank {r} ({f'last began step {steps[r]}' if r in steps else 'began no step'})"
                              for r in stalled)
            seen = "" if rank == 0 else f": {first}"  # rank 0's own words follow in the record's reason
            return "failed", (f"{names} stopped making progress: the other ranks waited {point.dist_timeout_s:g} s in "
                              f"a collective (dist_timeout_s) and failed, first rank {rank}{seen}")
        if rank in errors:
            return errors[rank]
        how = f"exit code {exit_code}"
        if exit_code < 0:
            try:
                how = f"signal {-exit_code}, {signal.Signals(-exit_code).name}"
            except ValueError:
                how = f"signal {-exit_code}"
        return "failed", f"rank {rank} died first ({how}); the other ranks were stopped (code {code})"
    if errors:
        return errors[min(errors)]
    return "failed", f"worker exited with code {code} and wrote no record"
