"""The bytes a step's stages must move, from its stage plan (impls/core/stage_plan.py) and the TT shape: each GEMM's
operands read once and its result written once (no reuse through caches), and each lookup's row pooled into its
bag (forward) and its bag's gradient gathered back (backward). A bound the kernels can beat where the cores stay in
cache, and the quantity the time model (timing.py) divides by a device's bandwidth.

Per prefix product (stage 1): the d-1 first cores' slices in, the prefix out. Per item (stage 2): the prefix and the
last core's slice in, a row of D out. Backward, per prefix: the forward recomputed, then the prefix gradient in and
one gradient slice of each first core out (read-modify-write); per item: the row gradient in, the prefix and the last
slice in, their gradients out. Pooling: D floats read and D added per lookup, each way. Index work: every lookup's id
read (8 bytes) and, for a system that deduplicates, its sort (key and position, 8 bytes each, read and written).

By level (``by_level``), what the fused walks the TT systems run must move at least: each stream is served by the
smallest cache level that holds what it is drawn from (its footprint: the walk's stacks for the prefix products, the
bags for pooling, the ids and their sort for the index work) and crosses every level between there and the
registers; the bytes a step moves from memory whatever the caches (its compulsory bytes) cross them all."""
from __future__ import annotations

from dataclasses import dataclass

LEVELS = ("L2", "L3", "DRAM")  # the levels a stream past L1 is served from, smallest first


@dataclass
class Traffic:
    """Bytes per step of one system, by component."""

    stage_fwd: float = 0.0
    stage_bwd: float = 0.0
    pooling: float = 0.0
    index: float = 0.0
    prefixes: float = 0.0  # the prefix products (and, backward, their gradients) a fused walk writes and reads once

    @property
    def total(self) -> float:
        return self.stage_fwd + self.stage_bwd + self.pooling + self.index

    def add_plan(self, plan, shape, nnz: float, dedups: bool) -> None:
        first = sum(shape.core_shape(k)[1] for k in range(shape.d - 1))  # a digit's slice: r_k q_k r_{k+1}
        last = shape.core_shape(shape.d - 1)[1]
        w, dim = shape.prefix_width, shape.dim
        for c in plan.calls:
            if c.phase == "fwd":
                self.stage_fwd += 4 * (c.groups * (first + w) + c.items * (w + last + dim))
                self.prefixes += 4 * 2 * c.groups * w
            else:
                self.stage_bwd += 4 * (c.groups * (first + w) + c.groups * (w + 2 * first)
                                       + c.items * (dim + 2 * w + 2 * last))
                self.prefixes += 4 * 2 * 2 * c.groups * w  # recomputed, and their gradients
        self.pooling += 2 * 2 * 4 * dim * nnz
        self.index += 8 * nnz + (32 * nnz if dedups else 0.0)

    def by_level(self, footprints: dict[str, float], capacity: dict[str, float], compulsory: float = 0.0
                 ) -> dict[str, float]:
        """Bytes that must cross each level of LEVELS in a step of the fused walks (a lower bound, module docstring):
        the prefix products and their gradients written and read once, the pooling and the index work, each served
        by the smallest level that holds what it is drawn from, plus the ``compulsory`` bytes (moved from memory
        whatever the caches) at every level. The walks' GEMM operands beyond the prefixes (core slices, rows) are
        left out: a kernel may keep them in L1 or registers. ``footprints``: the bytes each stream is drawn from
        ("prefixes", "pooling", "index"); ``capacity``: the bytes of L2 (all the threads' cores together) and L3."""
        streams = {"prefixes": self.prefixes, "pooling": self.pooling, "index": self.index}
        served = {level: 0.0 for level in LEVELS}
        for name, nbytes in streams.items():
            size = footprints[name]
            level = next((lv for lv in LEVELS[:-1] if size <= capacity.get(lv, 0)), "DRAM")
            served[level] += nbytes
        out, passing = {}, float(compulsory)
        for level in reversed(LEVELS):  # a stream from DRAM crosses L3 and L2 too
            passing += served[level]
            out[level] = passing
        return {level: out[level] for level in LEVELS}
