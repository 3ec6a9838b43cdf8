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


def available_bytes(device) -> int | None:
    """Memory a new allocation can use: MemAvailable on a Linux CPU, the free device memory on CUDA."""
    if device.type == "cuda":
        import torch

        return int(torch.cuda.mem_get_info(device)[0])
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def check_fits(param_bytes: int, device, where: str) -> None:
    """MemoryError (an `oom` record) before allocating parameters that cannot fit: a 128 GB table on a 24 GB
    machine is refused with the numbers instead of being left to the OOM killer."""
    avail = available_bytes(device)
    if avail is not None and param_bytes > avail:
        raise MemoryError(f"{where} needs {param_bytes / 2**30:,.1f} GiB for its parameters; "
                          f"{avail / 2**30:,.1f} GiB is available on {device}")
