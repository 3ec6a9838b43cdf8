"""Which machine a result set belongs to: a fingerprint (CPU model, cores, ISA, memory; GPU model and count; torch /
CUDA / fbgemm versions) and a readable slug (``amd-epyc-2c``, ``8x-h100-80gb-hbm3``) that names the folder
results/<experiment>/<machine>/. A sweep counts a point as done only when this machine's folder holds it, so the
committed reference set is never mistaken for a measurement of another machine."""
from __future__ import annotations

import os
import platform
import re
from pathlib import Path
from typing import Any

SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
REFERENCE_FILE = "REFERENCE_MACHINE"  # under results/: the slug of the machine whose records are committed
_NOISE = re.compile(r"\(r\)|\(tm\)|\bcpu\b|\bprocessor\b|\b\d+-core\b|@.*$|\bwith\b.*$|\bnvidia\b|\btesla\b|"
                    r"\bgeforce\b|\bgraphics\b")


def _cpu_info() -> tuple[str, set[str]]:
    model, flags = "", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, val = line.partition(":")
            if key.strip() == "model name" and not model:
                model = val.strip()
            elif key.strip() in ("flags", "Features") and not flags:
                flags = set(val.split())
    except OSError:
        pass
    return model or platform.processor() or platform.machine(), flags


def _mem_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


MACHINE_CORES_ENV = "DLRMBENCH_MACHINE_CORES"  # set by a sweep that holds a run to some of its cores (a duet)


def cores() -> int:
    """Cores this process may run on (the affinity mask where the OS has one); in a run a sweep held to part of the
    machine (a duet), the cores the sweep itself had: the machine's, which its slug names."""
    if os.environ.get(MACHINE_CORES_ENV, "").isdigit():
        return int(os.environ[MACHINE_CORES_ENV])
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _words(name: str) -> str:
    s = _NOISE.sub(" ", name.lower())
    return "-".join(re.findall(r"[a-z0-9]+(?:\.[0-9]+)?", s)) or "unknown"


def isa(flags: set[str]) -> str:
    """The widest vector ISA the kernels are built for (-march=native): it changes their speed."""
    for name, flag in (("avx512", "avx512f"), ("avx2", "avx2"), ("sve", "sve"), ("neon", "asimd")):
        if flag in flags:
            return name
    return "scalar"


def _kernel_isa() -> str | None:
    """The vector ISA build the CPU TT kernels run (impls.core.ops.cpu_isa); None where the native library is not
    built (a command that runs no kernel)."""
    try:
        from impls.core import ops
    except ImportError:
        return None
    return ops.cpu_isa()


FBGEMM_DISTRIBUTIONS = ("fbgemm-gpu", "fbgemm-gpu-cpu", "fbgemm_gpu")


def _fbgemm_version() -> str | None:
    """fbgemm_gpu's version: the loaded module's when a run imported it, else the installed distribution's (importing
    it only to read its version would cost a run a second of start-up); None when not installed."""
    import sys
    from importlib import metadata

    loaded = sys.modules.get("fbgemm_gpu")
    if loaded is not None:
        return getattr(loaded, "__version__", "unknown")
    for name in FBGEMM_DISTRIBUTIONS:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def fingerprint() -> dict[str, Any]:
    """This machine and its software stack (imports torch)."""
    import torch

    model, flags = _cpu_info()
    fbgemm = _fbgemm_version()
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return {
        "cpu": model,
        "cores": cores(),
        "isa": isa(flags),
        "kernel_isa": _kernel_isa(),
        "memory_bytes": _mem_bytes(),
        "gpu": torch.cuda.get_device_name(0) if gpus else None,
        "gpu_count": gpus,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "fbgemm_gpu": fbgemm,
        "python": platform.python_version(),
    }


def slug_of(fp: dict[str, Any]) -> str:
    """``8x-h100-80gb-hbm3`` for a GPU machine, ``amd-epyc-2c`` (``-avx512`` when it has it) for a CPU one."""
    if fp.get("gpu_count"):
        return f"{fp['gpu_count']}x-{_words(fp['gpu'])}"
    tail = "-avx512" if fp.get("isa") == "avx512" else ""
    return f"{_words(fp['cpu'])}-{fp['cores']}c{tail}"


def check_slug(name: str) -> str:
    if not SLUG.match(name):
        raise ValueError(f"machine name {name!r} must be lower-case letters, digits, '.', '-' or '_' "
                         f"(at most 64, starting with a letter or digit)")
    return name


def this_machine(override: str | None = None) -> str:
    """The slug of this machine, or ``override`` (checked) when the user names the result set."""
    return check_slug(override) if override else slug_of(fingerprint())


def reference_machine(results: Path) -> str | None:
    """The slug of the committed reference set (results/REFERENCE_MACHINE), or None."""
    path = Path(results) / REFERENCE_FILE
    return check_slug(path.read_text().strip()) if path.exists() else None


def machines_of(exp_dir: Path) -> list[str]:
    """The machines that have records for an experiment (folders of results/<experiment>/ holding records)."""
    exp_dir = Path(exp_dir)
    if not exp_dir.is_dir():
        return []
    return sorted(d.name for d in exp_dir.iterdir() if d.is_dir() and SLUG.match(d.name) and any(d.glob("*.json")))


def pick_machine(exp_dir: Path, results: Path, override: str | None = None) -> str:
    """The result set to read: ``override``; else this machine when it has records; else the reference set."""
    if override:
        return check_slug(override)
    here = this_machine()
    have = machines_of(exp_dir)
    if here in have:
        return here
    ref = reference_machine(results)
    if ref:
        return ref
    if have:
        return have[0]
    return here
