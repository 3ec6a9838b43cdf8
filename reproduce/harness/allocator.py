"""The host allocator measured processes run under: freed memory stays in the process while steps are timed, and
goes back at once while memory is measured.

glibc's default malloc serves every block above its mmap threshold (128 KiB, raised dynamically to at most 32 MiB)
with a fresh mmap and hands it back with munmap when freed, and trims the heap's top above 128 KiB. A training step
allocates and frees its large buffers (pooled outputs, gradients, all-to-all payloads: tens of MiB) every step, so on
that policy every step faults every page of them in again: on this project's 2-core reference machine
`dlrmbench calibrate` spent 5 min 51 s of its 7 min 16 s in the kernel, two 67 MB elementwise ops took 73 ms instead
of 16, and EMBark's T510 step at 2 ranks 470-520 ms instead of 205-225. That time measures the kernel's page-fault
path, not the system under test, and it swings with the other tenants of a shared machine. GPU runs never see it
(PyTorch's CUDA caching allocator keeps freed blocks); CPU DLRM benchmarks commonly preload jemalloc / tcmalloc
configured never to return memory for the same reason.

Two policies, both glibc's own, set with mallopt (nothing is installed):
- ``retain`` (timed steps): blocks up to 2 GiB from the heap (M_MMAP_THRESHOLD), the heap never trimmed
  (M_TRIM_THRESHOLD), grown 1 GiB at a time (M_TOP_PAD; untouched pages cost no memory).
- ``eager`` (the memory window: the build and the first step): every block of 128 KiB or more its own mapping,
  unmapped when freed, the heap trimmed above 128 KiB, thresholds fixed (not raised dynamically), so the resident
  set follows the bytes in use, as `max_memory_allocated` does on a GPU; under ``retain`` it would count the heap's
  holes too.
Every system runs under the same policies. A user who sets glibc's malloc variables (MALLOC_*_, GLIBC_TUNABLES) or
preloads an allocator keeps them: the harness then sets nothing, and the record says so. Where there is no glibc
(macOS, musl), the platform's allocator runs unchanged and the record says that too."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from functools import lru_cache
from typing import Any, Mapping

# mallopt parameters (malloc.h)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
POLICIES = {
    "retain": {"mmap_threshold": (M_MMAP_THRESHOLD, 2**31 - 1), "trim_threshold": (M_TRIM_THRESHOLD, 2**31 - 1),
               "top_pad": (M_TOP_PAD, 2**30)},
    "eager": {"mmap_threshold": (M_MMAP_THRESHOLD, 2**17), "trim_threshold": (M_TRIM_THRESHOLD, 2**17),
              "top_pad": (M_TOP_PAD, 0)},
}
USER_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_",
                  "MALLOC_ARENA_MAX", "GLIBC_TUNABLES", "LD_PRELOAD")


@lru_cache(maxsize=1)
def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 - glibc only (musl has mallopt as a stub)
        libc.mallopt, libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    libc.gnu_get_libc_version.restype = ctypes.c_char_p
    return libc


_state: dict[str, Any] = {}


def apply(policy: str, phase: str, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Run this process under ``policy`` ("retain" or "eager") from now on, for ``phase`` (what the record calls the
    part of the run it covers); what runs, as the record's `env.allocator` says it."""
    environ = os.environ if environ is None else environ
    libc = _glibc()
    user = {k: environ[k] for k in USER_VARIABLES if environ.get(k)}
    if libc is None:
        _state.update(policy="system", why=f"no glibc mallopt on {sys.platform}: the platform's allocator runs")
    elif user:
        _state.update(policy="user", why="malloc variables set by the user are kept", variables=user,
                      glibc=libc.gnu_get_libc_version().decode())
    else:
        failed = [name for name, (param, value) in POLICIES[policy].items()
                  if libc.mallopt(ctypes.c_int(param), ctypes.c_int(value)) != 1]
        if failed:
            raise RuntimeError(f"glibc mallopt refused {failed} of the {policy!r} allocator policy "
                               f"(reproduce/harness/allocator.py)")
        _state.setdefault("phases", {})[phase] = {"policy": policy, **{n: v for n, (_, v) in POLICIES[policy].items()}}
        _state.update(policy="harness", glibc=libc.gnu_get_libc_version().decode())
    return state()


def retain_freed_memory(phase: str = "timed steps") -> dict[str, Any]:
    return apply("retain", phase)


def state() -> dict[str, Any]:
    """What this process ran under: the harness's policies by phase, the user's malloc variables, or the platform's
    allocator; glibc's defaults where nothing was applied."""
    if not _state:
        return {"policy": "default", "why": "this process did not apply the harness's allocator policies"}
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in _state.items()}


def release_free_memory() -> bool:
    """Hand the heap's free pages back to the kernel (malloc_trim(0)); False where there is no glibc."""
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(ctypes.c_size_t(0))
    return True
