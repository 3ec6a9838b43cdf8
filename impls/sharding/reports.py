"""Reports of a sharded collection: its local collections' counters and memory summed, plus the bytes this
rank sent since the step began, per phase."""
from __future__ import annotations

import dataclasses
from typing import Sequence

from impls.api import MemoryReport, WorkReport
from impls.sharding.comm import Comm

_SUMMED = ("nnz", "unique", "e1", "gemms", "flops", "intermediate_bytes")


def merge_work(reports: Sequence[WorkReport], comm: Comm, mark: dict) -> WorkReport:
    out = WorkReport()
    for r in reports:
        for k in _SUMMED:
            setattr(out, k, getattr(out, k) + getattr(r, k))
        for k, v in r.extra.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out.extra[k] = out.extra.get(k, 0) + v
    by_phase: dict[str, int] = {}
    for key, v in comm.sent.items():
        d = v - mark.get(key, 0)
        if d:
            by_phase[key[0]] = by_phase.get(key[0], 0) + d
    out.comm_bytes = sum(by_phase.values())
    out.extra["comm_bytes_by_phase"] = by_phase
    return out


def merge_memory(reports: Sequence[MemoryReport]) -> MemoryReport:
    out = MemoryReport()
    for r in reports:
        for f in dataclasses.fields(MemoryReport):
            setattr(out, f.name, getattr(out, f.name) + getattr(r, f.name))
    return out
