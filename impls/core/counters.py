"""Work accounting for the TT ops: each op wrapper in ops.py records the GEMMs and FLOPs it ran, the
schedules record their distinct counts (nnz, U, E1) and live intermediate buffers. Nothing is modeled:
a count is added where the work is launched, from the sizes the kernel receives."""
from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

from impls.api import WorkReport


@dataclass
class TTWork:
    nnz: int = 0
    unique: int = 0  # U (distinct ids) as seen by the schedule; 0 when it never deduplicates
    e1: int = 0  # stage-1 prefix products of the forward (summed over micro-batches)
    micro_batches: int = 0
    cache_hits: int = 0  # lookups served by a hot-row cache (TT-Rec), out of cache_lookups
    cache_lookups: int = 0
    gemms: dict[str, int] = field(default_factory=lambda: {"fwd": 0, "bwd": 0})
    flops: dict[str, int] = field(default_factory=lambda: {"fwd": 0, "bwd": 0})
    stage_gemms: dict[str, int] = field(default_factory=dict)  # e.g. "fwd.stage1" -> count
    stage_flops: dict[str, int] = field(default_factory=dict)  # the same keys -> FLOPs (the work model's time)
    peak_intermediate_bytes: int = 0

    def add(self, phase: str, stage: str, gemms: int, flops: int) -> None:
        self.gemms[phase] += gemms
        self.flops[phase] += flops
        key = f"{phase}.{stage}"
        self.stage_gemms[key] = self.stage_gemms.get(key, 0) + gemms
        self.stage_flops[key] = self.stage_flops.get(key, 0) + flops

    def live(self, *buffers: Tensor | None) -> None:
        """Record the bytes of the intermediate buffers alive together at this point of a schedule."""
        self.live_bytes(sum(b.numel() * b.element_size() for b in buffers if b is not None))

    def live_bytes(self, nbytes: int) -> None:
        """Record ``nbytes`` of intermediate buffers alive together (a native op's own, which Python never holds)."""
        self.peak_intermediate_bytes = max(self.peak_intermediate_bytes, int(nbytes))

    def report(self) -> WorkReport:
        return WorkReport(
            nnz=self.nnz,
            unique=self.unique,
            e1=self.e1,
            gemms=self.gemms["fwd"] + self.gemms["bwd"],
            flops=self.flops["fwd"] + self.flops["bwd"],
            intermediate_bytes=self.peak_intermediate_bytes,
            extra={
                "gemms_fwd": self.gemms["fwd"],
                "gemms_bwd": self.gemms["bwd"],
                "flops_fwd": self.flops["fwd"],
                "flops_bwd": self.flops["bwd"],
                "micro_batches": self.micro_batches,
                **({"cache_hits": self.cache_hits, "cache_lookups": self.cache_lookups,
                    "cache_hit_rate": self.cache_hits / max(self.cache_lookups, 1)} if self.cache_lookups else {}),
                "stage_gemms": dict(sorted(self.stage_gemms.items())),
            },
        )
