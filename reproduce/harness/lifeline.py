"""No orphans, no twins: every process a sweep starts (the worker, torchrun, each rank) dies when its parent dies,
even by `kill -9` (Linux PR_SET_PDEATHSIG), and a run is launched by at most one live process at a time (a lock file
beside its record holding the launcher's pid; a lock whose process is gone is stale and taken over)."""
from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path

PR_SET_PDEATHSIG = 1


def _prctl():
    """libc's prctl, looked up once in the parent, so a forked child only calls it (no dlopen after fork)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


class RunLocked(RuntimeError):
    """Another live process is running this point's repeat."""


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent exits (Linux; elsewhere a no-op). Run it in a child
    before exec (Popen's preexec_fn: it survives exec) and again at the start of the worker. If the parent is
    already gone, exit now."""
    if _PRCTL is None:
        return
    parent = os.getppid()
    _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lock_run(record: Path) -> Path:
    """Take ``<record>.lock`` for this process; a lock held by a live process raises RunLocked naming it, a stale one
    (its process gone) is taken over."""
    lock = record.with_name(record.name + ".lock")
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                pid = int(lock.read_text().strip() or 0)
            except (OSError, ValueError):
                pid = 0
            if pid and pid != os.getpid() and _alive(pid):
                raise RunLocked(f"{record.name} is being run by process {pid} (lock {lock}); not started twice")
            lock.unlink(missing_ok=True)  # stale: its process is gone
            continue
        with os.fdopen(fd, "w") as f:
            f.write(f"{os.getpid()}\n")
        return lock
    raise RunLocked(f"{record.name}: could not take {lock}")
