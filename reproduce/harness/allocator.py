"""The host allocator every measured process runs under: freed memory stays in the process for the next step.

glibc's default malloc serves every block above its mmap threshold (128 KiB, raised dynamically to at most 32 MiB)
with a fresh mmap and hands it back with munmap when freed, and trims the heap's top above 128 KiB. A training step
allocates and frees its large buffers (pooled outputs, gradients, all-to-all payloads: tens of MiB) every step, so on
the default policy every step faults every page of them in again: on this project's 2-core reference machine
`dlrmbench calibrate` spent 5 min 51 s of its 7 min 16 s in the kernel, and two 67 MB elementwise ops took 73 ms
instead of 16. That time measures the kernel's page-fault path, not the system under test, and it swings with the
other tenants of a shared machine. GPU runs never see it (PyTorch's CUDA caching allocator keeps freed blocks);
CPU DLRM benchmarks commonly preload jemalloc / tcmalloc configured never to return memory for the same reason.

The policy here is glibc's own, set with mallopt at process start, so nothing is installed: serve blocks up to 2 GiB
from the heap (M_MMAP_THRESHOLD), never trim it (M_TRIM_THRESHOLD), grow it 1 GiB at a time (M_TOP_PAD; untouched
pages cost no memory). Every system runs under the same policy. A user who sets glibc's malloc variables
(MALLOC_*_ or GLIBC_TUNABLES) keeps them: the policy then steps aside, and the record says so. Where there is no
glibc (macOS, musl), the system's allocator runs unchanged and the record says that too.

Peak memory stays comparable: `release_free_memory` (malloc_trim) before the memory baseline hands back what setup
freed, so the record's peak RSS counts what the build and the steps hold; freed-and-reused blocks count once, as on
the default policy (the heap may fragment a little: that is the allocator's real footprint, as a CUDA caching
allocator's reserved memory is)."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from functools import lru_cache
from typing import Any

# mallopt parameters (malloc.h) and the values set
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
RETAIN = {"mmap_threshold": (M_MMAP_THRESHOLD, 2**31 - 1), "trim_threshold": (M_TRIM_THRESHOLD, 2**31 - 1),
          "top_pad": (M_TOP_PAD, 2**30)}
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


_applied: dict[str, Any] | None = None


def retain_freed_memory(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Apply the policy to this process (once; later calls return what the first did) and say what runs: the
    record's `env.allocator`."""
    global _applied
    if _applied is not None:
        return _applied
    environ = os.environ if environ is None else environ
    libc = _glibc()
    user = {k: environ[k] for k in USER_VARIABLES if environ.get(k)}
    if libc is None:
        _applied = {"policy": "system", "why": f"no glibc mallopt on {sys.platform}: the platform's allocator runs"}
    elif user:
        _applied = {"policy": "user", "why": "malloc variables set by the user are kept", "variables": user,
                    "glibc": libc.gnu_get_libc_version().decode()}
    else:
        failed = [name for name, (param, value) in RETAIN.items()
                  if libc.mallopt(ctypes.c_int(param), ctypes.c_int(value)) != 1]
        if failed:
            raise RuntimeError(f"glibc mallopt refused {failed}: the measured processes cannot run under the "
                               f"allocator policy of reproduce/harness/allocator.py")
        _applied = {"policy": "retain", "glibc": libc.gnu_get_libc_version().decode(),
                    **{name: value for name, (_, value) in RETAIN.items()}}
    return _applied


def state() -> dict[str, Any]:
    """What this process runs under: the policy applied, or glibc's (or the platform's) default where none was."""
    if _applied is not None:
        return _applied
    return {"policy": "default", "why": "this process did not apply the harness's allocator policy"}


def release_free_memory() -> bool:
    """Hand the heap's free pages back to the kernel (malloc_trim(0)); False where there is no glibc."""
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(ctypes.c_size_t(0))
    return True
