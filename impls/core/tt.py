"""Tensor-train (TT) table math shared by TT-Rec, EL-Rec and EcoRec.

A table W [N, D] is stored as d cores; core k is [p_k, r_k * q_k * r_{k+1}] (r_0 = r_d = 1) and the slice
for digit i is a row-major (r_k, q_k, r_{k+1}) tensor. Row ids and columns are mixed-radix numbers with
the first core most significant (FBTT-Embedding's layout): W[x, j] = G_0[i_0][:, j_0, :] ... G_{d-1}[i_{d-1}][:, j_{d-1}, :].
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

# "dense-matched" (the default): zero-mean cores scaled so that materialized rows have the dense initializer's
# mean and variance for every shape; the others are FBTT's formulas (its weight_dist options), kept for TT-Rec's
# initializer study: "uniform" draws non-negative cores, so the rows of a small table start far from 0.
DEFAULT_RANK = 32  # the inner TT rank of every core unless told (TT-Rec's, EL-Rec's and EcoRec's evaluations use 32)
WEIGHT_DISTS = ("dense-matched", "uniform", "naive-uniform", "normal", "approx-normal")


def dense_init_bound(num_embeddings: int) -> float:
    """The dense initializer's range: dlrm draws W ~ U(-b, b) with b = sqrt(1 / rows) (variance b^2 / 3)."""
    return math.sqrt(1.0 / max(int(num_embeddings), 1))


def _prime_factors(n: int) -> dict[int, int]:
    out: dict[int, int] = {}
    f = 2
    while f * f <= n:
        while n % f == 0:
            out[f] = out.get(f, 0) + 1
            n //= f
        f += 1 if f == 2 else 2
    if n > 1:
        out[n] = out.get(n, 0) + 1
    return out


def _entropy(parts: Sequence[int]) -> float:
    s = float(sum(parts))
    return -sum((x / s) * math.log(x / s) for x in parts if x > 0)


def _interleave(parts: Sequence[int]) -> tuple[int, ...]:
    """FBTT's order: sorted ascending, then the small half and the large half taken in turn."""
    x = sorted(parts)
    small, large = x[: len(x) // 2], x[len(x) // 2 :]
    out = []
    for i in range(max(len(small), len(large))):
        if i < len(small):
            out.append(small[i])
        if i < len(large):
            out.append(large[i])
    return tuple(out)


def _sorted_factorizations(n: int, d: int, least: int = 1):
    """Every way to write n as a product of d factors a_1 <= ... <= a_d, each >= ``least`` (each multiset once)."""
    if d == 1:
        if n >= least:
            yield (n,)
        return
    f = least
    while f**d <= n:
        if n % f == 0:
            for rest in _sorted_factorizations(n // f, d - 1, f):
                yield (f, *rest)
        f += 1


@functools.lru_cache(maxsize=4096)  # the round numbers suggest_tt_shapes tries recur
def _best_shape(n: int, d: int) -> tuple[int, ...]:
    """The most balanced (max-entropy) split of n's prime factors into d factors (FBTT's _auto_shape).

    As in FBTT, a factor may be 1 only when n has fewer than d prime factors (it pads with ones).
    Ties go to the lexicographically smallest shape (FBTT leaves them to set iteration order). The shape depends only
    on the factors as a multiset (_interleave sorts them), so each multiset is tried once.
    """
    ones_allowed = max(0, d - sum(_prime_factors(n).values()))
    best, best_h = None, -1.0
    for parts in _sorted_factorizations(n, d):
        if sum(1 for x in parts if x == 1) > ones_allowed:
            continue
        shape = _interleave(parts)
        h = _entropy(shape)
        if h > best_h + 1e-12 or (abs(h - best_h) <= 1e-12 and shape < best):
            best, best_h = shape, h
    return best


def suggest_tt_shapes(n: int, d: int = 3, allow_round_up: bool = True) -> tuple[int, ...]:
    """FBTT's ``suggested_tt_shapes``: d factors whose product is n (or n rounded up to a multiple of
    10^k when that is more balanced and ``allow_round_up``), most balanced first by entropy."""
    if n < 1 or d < 1:
        raise ValueError(f"suggest_tt_shapes needs n >= 1 and d >= 1, got n={n}, d={d}")
    if not allow_round_up:
        return _best_shape(n, d)
    best, best_h = None, -1.0
    for k in range(len(str(n))):
        step = 10**k
        m = -(-n // step) * step
        shape = _best_shape(m, d)
        h = _entropy(shape)
        if h > best_h + 1e-12:
            best, best_h = shape, h
    return best


@dataclass(frozen=True)
class TTShape:
    """Shapes of one TT table: rows N, dim D, p (row radices), q (column radices), ranks r_0..r_d."""

    num_embeddings: int
    dim: int
    p: tuple[int, ...]
    q: tuple[int, ...]
    r: tuple[int, ...]  # full, r[0] = r[-1] = 1

    def __post_init__(self) -> None:
        d = len(self.p)
        if not 2 <= d <= 4:
            raise ValueError(f"a TT table has 2 to 4 cores, got p = {self.p}")
        if len(self.q) != d or len(self.r) != d + 1:
            raise ValueError(f"TT shapes disagree: p = {self.p}, q = {self.q}, ranks = {self.r[1:-1]}")
        if self.r[0] != 1 or self.r[-1] != 1 or min(self.r) < 1 or min(self.p) < 1 or min(self.q) < 1:
            raise ValueError(f"TT shapes must be positive with r_0 = r_d = 1: p={self.p} q={self.q} r={self.r}")
        if math.prod(self.p) < self.num_embeddings:
            raise ValueError(
                f"TT p shapes {self.p} cover {math.prod(self.p)} rows < num_embeddings {self.num_embeddings}"
            )
        if math.prod(self.q) != self.dim:
            raise ValueError(f"TT q shapes {self.q} multiply to {math.prod(self.q)}, not the dim {self.dim}")

    @classmethod
    def create(
        cls,
        num_embeddings: int,
        dim: int,
        ranks: int | Sequence[int],
        p: Sequence[int] | None = None,
        q: Sequence[int] | None = None,
        d: int | None = None,
    ) -> "TTShape":
        """Shapes from inner ranks (an int means all equal) and optional p / q (suggested when omitted)."""
        if d is None:
            d = len(p) if p is not None else len(q) if q is not None else (
                3 if isinstance(ranks, int) else len(ranks) + 1
            )
        inner = [int(ranks)] * (d - 1) if isinstance(ranks, int) else [int(x) for x in ranks]
        if len(inner) != d - 1:
            raise ValueError(f"{d} cores need {d - 1} inner ranks, got {inner}")
        p = tuple(int(x) for x in p) if p is not None else suggest_tt_shapes(num_embeddings, d)
        q = tuple(int(x) for x in q) if q is not None else suggest_tt_shapes(dim, d, allow_round_up=False)
        return cls(num_embeddings, dim, p, q, (1, *inner, 1))

    @property
    def d(self) -> int:
        return len(self.p)

    @property
    def ranks(self) -> tuple[int, ...]:
        return self.r[1:-1]

    def core_shape(self, k: int) -> tuple[int, int]:
        return (self.p[k], self.r[k] * self.q[k] * self.r[k + 1])

    @property
    def num_params(self) -> int:
        return sum(a * b for a, b in (self.core_shape(k) for k in range(self.d)))

    def with_max_rank(self, rank: int) -> "TTShape":
        """The same table with every inner rank capped at ``rank``."""
        return TTShape(self.num_embeddings, self.dim, self.p, self.q, (1, *(min(r, rank) for r in self.ranks), 1))

    def fitted_to(self, max_bytes: int, elem_bytes: int = 4) -> "TTShape | None":
        """The highest rank cap at which the cores take at most ``max_bytes``; None when even rank 1 takes more."""
        for rank in range(max(self.ranks), 0, -1):
            shape = self.with_max_rank(rank)
            if shape.num_params * elem_bytes <= max_bytes:
                return shape
        return None

    @property
    def compression_ratio(self) -> float:
        return self.num_embeddings * self.dim / self.num_params

    @property
    def last_radix(self) -> int:
        return self.p[-1]

    @property
    def prefix_width(self) -> int:
        return math.prod(self.q[:-1]) * self.r[-2]

    # --- work per lookup (the kernels perform exactly these GEMMs) -------------
    def prefix_flops(self) -> int:
        """a: FLOPs of one prefix product (d-2 chained GEMMs over the first d-1 cores)."""
        return sum(2 * math.prod(self.q[:t]) * self.r[t] * self.q[t] * self.r[t + 1] for t in range(1, self.d - 1))

    def last_flops(self) -> int:
        """b: FLOPs of one last-core GEMM (prefix (Q x r) times the last slice (r x q_last))."""
        return 2 * math.prod(self.q[:-1]) * self.r[-2] * self.q[-1]

    def prefix_backward_cost(self) -> tuple[int, int]:
        """(GEMMs, FLOPs) of one prefix backward: 2 per chain step plus the inner products it recomputes."""
        steps = self.d - 2
        recompute = max(0, self.d - 3)
        flops = 2 * self.prefix_flops()
        flops += sum(2 * math.prod(self.q[:t]) * self.r[t] * self.q[t] * self.r[t + 1] for t in range(1, self.d - 2))
        return 2 * steps + recompute, flops


def encode(digits: Sequence[Tensor], p: Sequence[int]) -> Tensor:
    """Row ids from per-core digits (first core most significant)."""
    x = torch.zeros_like(digits[0])
    for dg, pk in zip(digits, p):
        x = x * pk + dg
    return x


def decode(x: Tensor, p: Sequence[int]) -> list[Tensor]:
    """Per-core digits of row ids: i_k = (x div prod(p[k+1:])) mod p_k."""
    out = []
    for k in range(len(p)):
        stride = math.prod(p[k + 1 :])
        out.append(torch.div(x, stride, rounding_mode="floor") % p[k])
    return out


def init_cores(shape: TTShape, weight_dist: str, generator: torch.Generator) -> list[Tensor]:
    """Fresh cores: "dense-matched" rows (mean 0, the dense initializer's variance), or as FBTT draws them
    (its weight_dist options)."""
    n, d = shape.num_embeddings, shape.d
    cores = [torch.empty(shape.core_shape(k)) for k in range(d)]
    if weight_dist == "dense-matched":
        # an entry of W sums prod(inner ranks) products of d independent zero-mean entries, so its variance is
        # prod(r) * prod(sigma_k^2): equal sigmas give the dense initializer's variance b^2 / 3 exactly
        var = dense_init_bound(n) ** 2 / 3.0
        sigma = (var / math.prod(shape.r)) ** (1.0 / (2 * d))
        for t in cores:
            t.normal_(0.0, sigma, generator=generator)
    elif weight_dist == "uniform":
        c = math.sqrt(2.0 / (n + shape.dim)) ** (1.0 / d) * math.prod(r ** (-1.0 / (2 * d)) for r in shape.r)
        for t in cores:
            t.uniform_(0.0, c, generator=generator)
    elif weight_dist == "naive-uniform":
        for t in cores:
            t.uniform_(0.0, 1.0 / math.sqrt(n), generator=generator)
    elif weight_dist == "normal":
        for t in cores:
            t.normal_(0.0, 1.0 / math.sqrt(n), generator=generator)
    elif weight_dist == "approx-normal":
        scale = (1.0 / math.sqrt(3.0 * n)) ** (1.0 / d)
        for t in cores:
            flat = t.view(-1)
            todo = torch.arange(flat.numel())
            while todo.numel():  # keep only the tails |x| >= 2, as FBTT does
                draw = torch.randn(todo.numel(), generator=generator)
                ok = draw.abs() >= 2
                flat[todo[ok]] = draw[ok]
                todo = todo[~ok]
            t.mul_(scale)
    else:
        raise ValueError(f"unknown TT weight_dist {weight_dist!r}; choose one of {', '.join(WEIGHT_DISTS)}")
    return cores


def rows_from_cores(cores: Sequence[Tensor], shape: TTShape, rows: Tensor) -> Tensor:
    """Dense rows W[rows] [n, D] by the chain of per-row products (pure torch; differentiable)."""
    digits = decode(rows, shape.p)
    n = rows.numel()
    acc = cores[0][digits[0]].view(n, shape.q[0], shape.r[1])
    for t in range(1, shape.d):
        g = cores[t][digits[t]].view(n, shape.r[t], shape.q[t] * shape.r[t + 1])
        acc = torch.bmm(acc, g).view(n, acc.shape[1] * shape.q[t], shape.r[t + 1])
    return acc.reshape(n, shape.dim)


def materialize(cores: Sequence[Tensor], shape: TTShape, chunk: int = 1 << 16) -> Tensor:
    """The dense table [N, D] the cores represent (tests and small tables only)."""
    out = torch.empty(shape.num_embeddings, shape.dim, dtype=cores[0].dtype, device=cores[0].device)
    with torch.no_grad():
        for lo in range(0, shape.num_embeddings, chunk):
            hi = min(lo + chunk, shape.num_embeddings)
            out[lo:hi] = rows_from_cores(cores, shape, torch.arange(lo, hi, device=out.device))
    return out
