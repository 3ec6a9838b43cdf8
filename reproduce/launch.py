"""Launch one run point in a fresh process and always come back with exactly one record."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from impls.api import registered_names
from reproduce.config import RunPoint
from reproduce.records import base_record, read_record, write_record


def record_path(out_dir: Path, point: RunPoint) -> Path:
    return Path(out_dir) / f"{point.point_id}.json"


def launch_point(point: RunPoint, out_dir: Path, timeout_s: float | None = None) -> dict[str, Any]:
    """Run ``point`` in ``python -m reproduce.worker``; its output goes to ``out_dir/logs``. A point whose
    implementation is not registered yet is recorded as `skipped` without launching anything."""
    out_dir = Path(out_dir)
    rec_path = record_path(out_dir, point)
    if point.impl not in registered_names():
        record = base_record(point.to_dict(), "skipped", f"not implemented: {point.impl!r} is not registered yet")
        write_record(rec_path, record)
        return record
    log = out_dir / "logs" / f"{point.point_id}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    rec_path.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "reproduce.worker", "--point-json", json.dumps(point.to_dict()), "--out", str(rec_path)]
    with open(log, "w") as f:
        try:
            proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = None
    if rec_path.exists():
        record = read_record(rec_path)
    elif code is None:
        record = base_record(point.to_dict(), "failed", f"time limit of {timeout_s} s exceeded")
    elif code == -signal.SIGKILL:
        record = base_record(point.to_dict(), "oom", "worker killed by SIGKILL (most likely the kernel OOM killer)")
    else:
        record = base_record(point.to_dict(), "failed", f"worker exited with code {code} and wrote no record")
    record["log"] = str(log)
    write_record(rec_path, record)
    return record
