"""The digest that names a calibration profile in the plans and records made on it: sha256 of the file's bytes, its
first 12 hex digits. Torch-free, so the report can check a record's profile without importing the planner."""
from __future__ import annotations

import hashlib
from pathlib import Path


def digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:12]


def file_digest(path: str | Path) -> str | None:
    """The digest of the file as it is now; None when it is gone."""
    p = Path(path)
    return digest(p.read_bytes()) if p.is_file() else None
