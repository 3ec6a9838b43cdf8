"""No orphans: every process a sweep starts (the worker, torchrun, each rank) dies when its parent dies, even by
`kill -9` (Linux PR_SET_PDEATHSIG). (No twins: the per-run lock is the record store's, records.lock_run.)"""
from __future__ import annotations

import ctypes
import os
import signal
import sys

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
