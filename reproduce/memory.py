"""Process memory on CPU: current RSS and the peak since a reset (Linux /proc), CUDA allocator peaks."""
from __future__ import annotations

import resource
from pathlib import Path


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def rss_bytes() -> int:
    kib = _status_kib("VmRSS")
    if kib is None:  # no /proc: fall back to the lifetime peak, which is an upper bound
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return kib * 1024


def reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) to the current RSS; False where unsupported."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int:
    kib = _status_kib("VmHWM")
    if kib is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return kib * 1024
