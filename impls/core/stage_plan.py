"""What a TT system's schedule runs on one table in one step, said without running it: the stage calls (prefix
groups and items per call, forward and backward) and the intermediate bytes alive at each, from the ids' index
statistics. Each TT system states its own plan (``stage_plan``, beside its schedule); the GEMMs and FLOPs of a call
come from the counters the ops themselves use (ops.count_stages / count_stages_backward), so a plan over a sampled
batch equals the run's work counters exactly (tests/work), and over an id law gives their expectation (impls/work).

An ``IndexStats`` is what a plan reads of a table's ids: lookups (nnz), distinct ids (U), and the distinct prefix
groups (id div p_last) among a contiguous range of the sorted distinct ids. ``SampledIndex`` counts them on a batch
with the schedules' own index code (tt_batch.prefix_groups); impls/work/index_law.py gives their expectation."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch
from torch import Tensor

from impls.core.tt_batch import prefix_groups


class IndexStats(Protocol):
    nnz: float
    unique: float

    def groups(self, lo: int, hi: int) -> float:
        """Distinct prefix groups among sorted distinct ids [lo, hi)."""


@dataclass
class SampledIndex:
    """The index statistics of one table's ids in one batch (counted, exact)."""

    values: Tensor
    last_radix: int
    nnz: int = field(init=False)
    unique: int = field(init=False)

    def __post_init__(self) -> None:
        self.sorted_unique = torch.unique(self.values)
        self.nnz = int(self.values.numel())
        self.unique = int(self.sorted_unique.numel())

    def groups(self, lo: int, hi: int) -> int:
        if hi <= lo:
            return 0
        return int(prefix_groups(self.sorted_unique[lo:hi], self.last_radix).prefix_ids.numel())


@dataclass(frozen=True)
class StageCall:
    """One call of the stage ops: ``groups`` prefix products and ``items`` last-core products (``phase`` fwd:
    tt_stages; bwd: tt_stages_backward), with ``live_bytes`` of intermediate buffers alive at it."""

    phase: str
    groups: float
    items: float
    live_bytes: float


@dataclass
class TablePlan:
    """A table's step: its stage calls and the index counters the schedule reports (TTWork's unique, e1,
    micro_batches)."""

    calls: list[StageCall]
    unique: float = 0
    e1: float = 0
    micro_batches: int = 0

    def count(self, work, shape) -> None:
        """Add this plan's GEMMs, FLOPs, counters and peak intermediate bytes into ``work`` (a TTWork), as the ops
        count the calls they run."""
        from impls.core.ops import count_stages, count_stages_backward

        for c in self.calls:
            (count_stages if c.phase == "fwd" else count_stages_backward)(work, shape, c.groups, c.items)
            work.peak_intermediate_bytes = max(work.peak_intermediate_bytes, c.live_bytes)
        work.unique += self.unique
        work.e1 += self.e1
        work.micro_batches += self.micro_batches
