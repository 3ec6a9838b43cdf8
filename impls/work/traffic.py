"""The bytes a step's stages must move, from its stage plan (impls/core/stage_plan.py) and the TT shape: each GEMM's
operands read once and its result written once (no reuse through caches), and each lookup's row pooled into its
bag (forward) and its bag's gradient gathered back (backward). A bound the kernels can beat where the cores stay in
cache, and the quantity the time model (timing.py) divides by a device's bandwidth.

Per prefix product (stage 1): the d-1 first cores' slices in, the prefix out. Per item (stage 2): the prefix and the
last core's slice in, a row of D out. Backward, per prefix: the forward recomputed, then the prefix gradient in and
one gradient slice of each first core out (read-modify-write); per item: the row gradient in, the prefix and the last
slice in, their gradients out. Pooling: D floats read and D added per lookup, each way. Index work: every lookup's id
read (8 bytes) and, for a system that deduplicates, its sort (key and position, 8 bytes each, read and written)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Traffic:
    """Bytes per step of one system, by component."""

    stage_fwd: float = 0.0
    stage_bwd: float = 0.0
    pooling: float = 0.0
    index: float = 0.0

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
            else:
                self.stage_bwd += 4 * (c.groups * (first + w) + c.groups * (w + 2 * first)
                                       + c.items * (dim + 2 * w + 2 * last))
        self.pooling += 2 * 2 * 4 * dim * nnz
        self.index += 8 * nnz + (32 * nnz if dedups else 0.0)

