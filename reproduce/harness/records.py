"""The run record: one JSON per run point, written atomically, with environment metadata."""
from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import tempfile
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
STATUSES = ("ok", "failed", "oom", "diverged", "skipped")


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(
            ["git", *args], capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parent
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def environment() -> dict[str, Any]:
    """Versions and hardware of this process (torch is imported here, never at CLI start-up): the machine's
    fingerprint and slug, git state, thread count."""
    import torch

    from reproduce.harness.machine import fingerprint, slug_of

    fp = fingerprint()
    return {
        "git_sha": _git("rev-parse", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "python": fp["python"],
        "torch": fp["torch"],
        "fbgemm_gpu": fp["fbgemm_gpu"],
        "cuda": fp["cuda"],
        "cuda_device": fp["gpu"],
        "cpu": fp["cpu"],
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "hostname": platform.node(),
        "platform": platform.platform(),
        "machine": fp,
        "machine_slug": slug_of(fp),
    }


def base_record(point: dict[str, Any], status: str, reason: str | None = None, log: str | None = None) -> dict:
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
    return {"schema": SCHEMA_VERSION, "point": point, "status": status, "reason": reason, "log": log}


def strict(value: Any) -> Any:
    """``value`` with every NaN / inf float replaced by None, so that records are strict JSON (null, not NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


def record_path(out_dir: str | Path, point: Any, repeat: int = 0) -> Path:
    """The record of one repeat of a point (a RunPoint): ``<out_dir>/<point_id>.r<repeat>.json``."""
    return Path(out_dir) / f"{point.point_id}.r{repeat}.json"


def log_path(record: Path) -> Path:
    """The log of the run whose record is ``record``: ``logs/<record stem>.log`` beside it."""
    return record.parent / "logs" / f"{record.stem}.log"


def write_record(path: str | Path, record: dict[str, Any]) -> Path:
    """Write JSON atomically (temporary file in the same directory, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(strict(record), f, indent=2, sort_keys=True, default=str, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_record(path: str | Path) -> dict[str, Any]:
    """The record at ``path``; a file that is not a JSON object (truncated, garbage) raises ValueError naming it."""
    try:
        record = json.loads(Path(path).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a readable record ({exc}); delete it, or rerun its point") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path}: not a record (a JSON {type(record).__name__}, not an object)")
    return record
