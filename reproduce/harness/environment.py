"""What a record keeps of the process that ran it: the commit and whether the code had uncommitted edits, library
versions, the machine's fingerprint and slug, threads, cores and allocator (``environment``)."""
from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(
            ["git", *args], capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parent
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


# what a record's ``git_dirty`` does not count: results, figures and prose are not code
NOT_CODE = (":(exclude)results", ":(exclude)figures", ":(exclude)*.md", ":(exclude)datasets/*.md")


def code_dirty() -> bool | None:
    """Whether tracked code differs from the commit (edits to results/, figures/ or Markdown do not count); None
    outside a git checkout."""
    out = _git("status", "--porcelain", "--untracked-files=no", "--", ".", *NOT_CODE)
    return None if out is None else bool(out)


def git_sha() -> str | None:
    """The commit checked out here (None outside a git checkout)."""
    return _git("rev-parse", "HEAD")


def _installed(dist: str) -> str | None:
    """The installed version of a distribution, read without importing it (None when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


LAUNCHED_ENV = "DLRMBENCH_LAUNCHED_AT"  # the launcher's clock (time.time()) when it started the run's process
SCHEDULE_ENV = "DLRMBENCH_SCHEDULE"  # set by the launcher for a co-scheduled (duet) run: "duet"
LAUNCH_ENV = "DLRMBENCH_LAUNCH"  # how the run's processes started: "fork" (forked_run.py), else a fresh interpreter


def environment() -> dict[str, Any]:
    """Versions and hardware of this process (torch is imported here, never at CLI start-up): the machine's
    fingerprint and slug, git state, thread count."""
    import torch

    from reproduce.harness import allocator
    from reproduce.harness.machine import fingerprint, slug_of

    fp = fingerprint()
    return {
        "git_sha": git_sha(),
        "git_dirty": code_dirty(),
        "python": fp["python"],
        "torch": fp["torch"],
        "fbgemm_gpu": fp["fbgemm_gpu"],
        "torchrec": _installed("torchrec"),
        "cuda": fp["cuda"],
        "cuda_device": fp["gpu"],
        "cpu": fp["cpu"],
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        # the cores this process may run on, and whether a sweep ran it beside another run (duet: evidence.py)
        "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "schedule": os.environ.get(SCHEDULE_ENV, "solo"),
        "launch": os.environ.get(LAUNCH_ENV, "exec"),  # forked from the launcher's preloaded server, or exec'd
        "malloc": {k: v for k, v in sorted(os.environ.items()) if k.startswith(("MALLOC_", "THP_"))},
        "allocator": allocator.state(),
        "hostname": platform.node(),
        "platform": platform.platform(),
        "machine": fp,
        "machine_slug": slug_of(fp),
    }

