"""A machine's calibration profile, the terms of EMBark's calibrated cost model measured on it (calibration_run.py
measures them, `dlrmbench calibrate`): where it lies (results/calibration/<machine>/<backend>.json), which run points
plan on it (``with_profile`` names it in their ``calibration`` option) and which named profiles are missing."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any


def profile_path(results: Path, machine: str, backend: str) -> Path:
    return Path(results) / "calibration" / machine / f"{backend}.json"


def _planning(impl: str) -> dict[str, Any] | None:
    """The defaults of ``impl``'s own planner options (strategy, cost) when it plans on a calibration profile (its
    build_distributed takes ``calibration``), else None."""
    import inspect

    from impls.api import get_impl

    try:
        build = getattr(get_impl(impl), "build_distributed", None)
    except ImportError:
        return None
    params = inspect.signature(build).parameters if build is not None else {}
    if "calibration" not in params:
        return None
    return {k: p.default for k, p in params.items() if k in ("strategy", "cost")}


def with_profile(point, root: str | Path, machine: str):
    """``point`` (a RunPoint) naming its machine's calibration profile, results/calibration/<machine>/<backend>.json
    under ``root`` (gloo on a CPU, nccl on GPUs), when it runs over ranks on a system that plans on one (EMBark) and
    names none: when the file exists (the record then carries the calibrated prediction whatever the strategy), or
    when the point plans on the calibrated cost (its default) - a missing profile is then an error before anything
    runs (``missing_profiles``), never a silent change of cost function."""
    defaults = _planning(point.impl) if point.world_size > 1 else None
    if defaults is None or "calibration" in point.impl_options:
        return point
    opts = point.impl_options
    path = profile_path(Path(root) / "results", machine, "nccl" if str(point.device).startswith("cuda") else "gloo")
    plans = opts.get("strategy", defaults.get("strategy")) == "embark" and opts.get(
        "cost", defaults.get("cost")) == "calibrated"
    if not (plans or path.is_file()):
        return point
    return dataclasses.replace(point, impl_options={**opts, "calibration": str(path)})


def missing_profile_paths(points) -> list[Path]:
    """The calibration profiles ``points`` name that do not exist."""
    return [Path(p) for p in sorted({str(p.impl_options["calibration"]) for p in points
                                     if "calibration" in p.impl_options}) if not Path(p).is_file()]


def missing_profiles(points) -> list[str]:
    """The calibration profiles ``points`` name that do not exist, each with the command that writes it."""
    return [f"{path} (write it with `dlrmbench calibrate --machine {path.parent.name} --backend {path.stem}` on that "
            "machine, a few minutes; or plan on HugeCTR's cost function: -o embark.cost=hugectr)"
            for path in missing_profile_paths(points)]
