"""Options under which the contract suites exercise a system's own structure rather than its dense fallback: every
table TT for the TT systems (small ranks), every table compressed for the compression methods (explicit small
sizes: the suites' tables are too small for a byte budget to leave every one compressed)."""
from __future__ import annotations

from typing import Any

COMPRESSED = {"hash": {"rows": 3, "hashes": 2}, "qr": {"collisions": 2}, "md": {"dims": 2}}


def structure_options(cls: type) -> dict[str, Any]:
    names = cls.option_names()
    if cls.name in COMPRESSED:
        return dict(COMPRESSED[cls.name])
    return {k: v for k, v in {"tt_min_rows": 0, "ranks": 4}.items() if k in names}
