"""The expected index statistics of a table's ids under the synthetic generator's own law (impls/data/synthetic.py):
``n`` iid ranks of a bounded power law over ``rows`` (exponent alpha), mapped to ids ``ranked`` (rank = id) or
``scattered`` (a keyed bijection). A TT system groups ids by their prefix, id div p_last (impls/core/stage_plan.py).

- distinct ids: E[U] = sum_i 1 - (1 - p_i)^n (impls/data/zipf.expected_unique);
- distinct prefix groups, ``ranked``: a group is p_last consecutive ranks of mass P_g = F(hi) - F(lo) (F: the
  sampler's CDF, synthetic.rank_cdf), E[E1] = sum_g 1 - (1 - P_g)^n, exact over the first groups and over geometric
  bins of the rest;
- ``scattered``: the bijection puts p_last ids of random ranks in each group, so a group is missed with probability
  about q^p_last, q = 1 - E[U] / rows the mean miss probability of one id: E[E1] = sum_g 1 - q^size_g;
- the groups among a contiguous range [lo, hi) of the sorted distinct ids (EcoRec's micro-batches): a group is a run
  of sorted ids (id div p_last is monotone), and two neighbours share a group with probability
  rho = (U - E1) / (U - 1), so E = (hi - lo) - (hi - lo - 1) rho, and the m ranges sum to E1 + (m - 1) rho.
  That treats a range's edge as falling anywhere in a group: it holds while the batch covers a small part of the
  table. A batch that covers most of it fixes where the groups lie, and the m - 1 edges split a group or not by
  their alignment; either way the sum lies in [E1, E1 + m - 1], so the error is at most m - 1 groups.

These are expectations over batches, not counts of one batch; tests/work holds them to the mean over sampled
batches."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from impls.data.synthetic import LOCALITIES, rank_cdf
from impls.data.zipf import expected_unique

EXACT_GROUPS = 1 << 16  # ranked: groups summed one by one; beyond, geometric bins


def hit(mass: np.ndarray, draws: float) -> np.ndarray:
    """1 - (1 - mass)^draws, stable for small mass."""
    return -np.expm1(draws * np.log1p(-np.clip(mass, 0.0, 1.0 - 1e-16)))


def expected_groups(rows: int, draws: float, alpha: float, radix: int, locality: str) -> float:
    """E[distinct prefix groups (id div ``radix``)] of ``draws`` ids of the law above."""
    if locality not in LOCALITIES:
        raise ValueError(f"locality must be one of {LOCALITIES}, got {locality!r}")
    if draws <= 0:
        return 0.0
    rows, radix = int(rows), int(radix)
    full, rest = divmod(rows, radix)
    if locality == "scattered":
        q = 1.0 - expected_unique(rows, draws, alpha) / rows
        miss = math.exp(radix * math.log(q)) if q > 0 else 0.0
        return full * (1.0 - miss) + (1.0 - q ** rest if rest else 0.0)
    count = full + (1 if rest else 0)
    head = min(count, EXACT_GROUPS)
    edges = np.minimum(np.arange(head + 1, dtype=np.float64) * radix, rows)
    cdf = rank_cdf(rows, alpha, edges)
    total = float(hit(np.diff(cdf), draws).sum())
    if count > head:
        g = np.unique(np.geomspace(head, count, 512).astype(np.int64))
        lo_rank = g[:-1] * float(radix)
        hi_rank = np.minimum(g[1:] * float(radix), rows)
        mass = np.diff(rank_cdf(rows, alpha, np.stack([lo_rank, hi_rank]).T.ravel()))[::2]
        n_groups = (g[1:] - g[:-1]).astype(np.float64)
        total += float((n_groups * hit(mass / n_groups, draws)).sum())
    return total


@dataclass
class ExpectedIndex:
    """A table's expected index statistics (the IndexStats of impls/core/stage_plan.py) for ``nnz`` ids."""

    rows: int
    nnz: float
    alpha: float
    locality: str
    last_radix: int
    unique: float = field(init=False)
    e1: float = field(init=False)

    def __post_init__(self) -> None:
        self.unique = expected_unique(int(self.rows), float(self.nnz), float(self.alpha))
        self.e1 = expected_groups(self.rows, self.nnz, self.alpha, self.last_radix, self.locality)

    @property
    def shared(self) -> float:
        """rho: the chance that two neighbouring sorted distinct ids share a prefix group."""
        return 0.0 if self.unique <= 1 else max(0.0, (self.unique - self.e1) / (self.unique - 1))

    def groups(self, lo: int, hi: int) -> float:
        n = hi - lo
        if n <= 0:
            return 0.0
        if lo == 0 and hi >= int(round(self.unique)):
            return self.e1
        return n - (n - 1) * self.shared
