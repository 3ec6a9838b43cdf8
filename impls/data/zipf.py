"""Zipf-distributed ids, analytically: the expected number of distinct ids among n draws, which the EMBark cost
model (per-shard unique keys) and the scale model (unique ids per rank) both need."""
from __future__ import annotations

import functools

import numpy as np


@functools.lru_cache(maxsize=4096)
def expected_unique(rows: int, draws: float, alpha: float, bins: int = 512) -> float:
    """E[distinct ids] of ``draws`` iid Zipf(alpha) ids over ``rows`` (sum_i 1 - (1 - p_i)^n), summed exactly
    over the first 1024 ids and over geometric bins of the tail."""
    if draws <= 0:
        return 0.0
    head = min(rows, 1024)
    i = np.arange(1, head + 1, dtype=np.float64)
    w_head = i ** -alpha
    if rows > head:
        edges = np.unique(np.geomspace(head + 1, rows + 1, bins).astype(np.int64))
        lo, hi = edges[:-1], edges[1:]
        mid = np.sqrt(lo * (hi - 1.0).clip(min=lo))
        count = (hi - lo).astype(np.float64)
        w_tail = mid ** -alpha
    else:
        count, w_tail = np.zeros(0), np.zeros(0)
    total = w_head.sum() + (count * w_tail).sum()
    hit = lambda w: -np.expm1(draws * np.log1p(-w / total))  # noqa: E731 - 1 - (1 - p)^n, stable
    return float(hit(w_head).sum() + (count * hit(w_tail)).sum())
