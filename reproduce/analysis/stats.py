"""Intervals over repeats: of a median, of a ratio of two medians, and of an aggregate (median / max / mean) of such
ratios over groups. From MIN_CI_RUNS (5) runs per side on, a bootstrap 95 % confidence interval (the repeats of each
side resampled independently; seeded, so the same records always give the same report); with fewer runs a bootstrap
says little, so the interval is the plain range of the runs (for a ratio its corners: min / max and max / min) and is
called "range of n runs", never a CI (``interval_name``)."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd

RESAMPLES = 4000
LEVEL = 0.95
SEED = 0
MIN_CI_RUNS = 5  # fewer runs per side: the range of the runs, not a bootstrap CI


def interval_name(runs: int) -> str:
    """What an interval over ``runs`` runs per side is: "95 % CI" from MIN_CI_RUNS on, else "range of n runs"."""
    if runs >= MIN_CI_RUNS:
        return "bootstrap 95 % CI"
    return "one run: no interval" if runs <= 1 else f"range of {runs} runs"

AGGREGATES: dict[str, Callable[..., np.ndarray]] = {"median": np.median, "max": np.max, "mean": np.mean,
                                                    "min": np.min}


def _resampled_medians(x: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` bootstrap medians of ``x`` (one per row of a resampled index matrix)."""
    idx = rng.integers(0, len(x), size=(n, len(x)))
    return np.median(x[idx], axis=1)


def _interval(draws: np.ndarray) -> tuple[float, float]:
    a = (1 - LEVEL) / 2
    lo, hi = np.quantile(draws, [a, 1 - a])
    return float(lo), float(hi)


def median_ci(x: Sequence[float], seed: int = SEED) -> tuple[float, float, float]:
    """Median of ``x`` and its interval: the bootstrap 95 % CI from MIN_CI_RUNS values on, else min and max."""
    x = np.asarray([v for v in x if v == v], dtype=float)
    if len(x) == 0:
        return float("nan"), float("nan"), float("nan")
    if len(x) < MIN_CI_RUNS:
        return float(np.median(x)), float(x.min()), float(x.max())
    rng = np.random.default_rng(seed)
    return float(np.median(x)), *_interval(_resampled_medians(x, rng, RESAMPLES))


def ratio_draws(num: Sequence[float], den: Sequence[float], rng: np.random.Generator,
                n: int = RESAMPLES) -> np.ndarray:
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    return _resampled_medians(num, rng, n) / _resampled_medians(den, rng, n)


def ratio_range(num: Sequence[float], den: Sequence[float]) -> tuple[float, float]:
    """The corners of a ratio's range: min(num) / max(den), max(num) / min(den)."""
    return float(min(num) / max(den)), float(max(num) / min(den))


def ratio_ci(num: Sequence[float], den: Sequence[float], seed: int = SEED) -> tuple[float, float, float]:
    """median(num) / median(den) and its interval: the bootstrap 95 % CI from MIN_CI_RUNS runs per side on, else the
    corners of the range."""
    num = [v for v in num if v == v]
    den = [v for v in den if v == v]
    if not num or not den:
        return float("nan"), float("nan"), float("nan")
    if min(len(num), len(den)) < MIN_CI_RUNS:
        return float(np.median(num) / np.median(den)), *ratio_range(num, den)
    rng = np.random.default_rng(seed)
    return float(np.median(num) / np.median(den)), *_interval(ratio_draws(num, den, rng))


def aggregate_ci(groups: Sequence[tuple[Sequence[float], Sequence[float], float]], how: str,
                 transform: Callable[[np.ndarray], np.ndarray] = lambda r: r,
                 seed: int = SEED) -> tuple[float, float, float, list[float]]:
    """An aggregate (``how``: median, max, mean) over groups ``(num, den, power)`` of
    ``transform((median(num) / median(den)) ** power)``, its interval, and the per-group values. The interval is the
    bootstrap 95 % CI (every group's repeats resampled in each draw) when every group has MIN_CI_RUNS runs per side;
    otherwise the aggregate of the groups' range corners (each aggregate is monotone in every group's value)."""
    if how not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {sorted(AGGREGATES)}, got {how!r}")
    agg = AGGREGATES[how]
    if not groups:
        return float("nan"), float("nan"), float("nan"), []
    rng = np.random.default_rng(seed)
    values = [float(transform(np.asarray((np.median(n) / np.median(d)) ** p))) for n, d, p in groups]
    if min(min(len(n), len(d)) for n, d, _ in groups) < MIN_CI_RUNS:
        ends = [sorted(float(transform(np.asarray(c ** p))) for c in ratio_range(n, d)) for n, d, p in groups]
        return (float(agg(np.asarray(values))), float(agg(np.asarray([e[0] for e in ends]))),
                float(agg(np.asarray([e[1] for e in ends]))), values)
    draws = np.stack([transform(ratio_draws(n, d, rng) ** p) for n, d, p in groups])  # groups x resamples
    return float(agg(np.asarray(values))), *_interval(agg(draws, axis=0)), values


def predicted_vs_measured(summary) -> tuple:
    """The `ok` points of a summary that carry a cost-model prediction, and the Spearman rank correlation of
    predicted and measured step time over them (NaN below 2 points)."""
    if "predicted_step_ms" not in summary:
        return summary[:0], float("nan")
    ok = summary[(summary["status"] == "ok") & summary["predicted_step_ms"].notna()]
    if len(ok) < 2:
        return ok, float("nan")
    return ok, float(ok["predicted_step_ms"].rank().corr(ok["total_ms"].rank()))


def ordered_pairs(points, keys: list[str], predicted: str = "predicted_step_ms",
                  measured: str = "total_ms", gap: float = 0.0) -> tuple[int, int]:
    """Of every pair of points that share the ``keys`` (the same workload and world: plans competing for one job)
    and whose measured times differ by more than ``gap`` (relative to the faster), how many the prediction orders as
    measured, and how many such pairs there are (predicted ties count as wrong)."""
    agree = total = 0
    for _, g in points.groupby(keys, sort=False):
        p, m = g[predicted].to_numpy(dtype=float), g[measured].to_numpy(dtype=float)
        for i in range(len(g)):
            for j in range(i + 1, len(g)):
                if abs(m[i] - m[j]) <= gap * min(m[i], m[j]):
                    continue
                total += 1
                agree += int(np.sign(p[i] - p[j]) == np.sign(m[i] - m[j]) != 0)
    return agree, total


def spearman_ci(predicted, measured, resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Spearman's rank correlation of two paired samples and its bootstrap 95 % interval (pairs resampled with
    replacement; a draw whose ranks are all tied is left out). NaN below 3 pairs."""
    x, y = np.asarray(predicted, dtype=float), np.asarray(measured, dtype=float)
    n = len(x)
    if n < 3:
        return float("nan"), float("nan"), float("nan")

    def rho(a, b):
        ra, rb = pd.Series(a).rank().to_numpy(), pd.Series(b).rank().to_numpy()
        if ra.std() == 0 or rb.std() == 0:
            return float("nan")
        return float(np.corrcoef(ra, rb)[0, 1])

    rng = np.random.default_rng(seed)
    draws = [rho(x[i], y[i]) for i in (rng.integers(0, n, n) for _ in range(resamples))]
    draws = np.asarray([d for d in draws if d == d])
    return rho(x, y), *_interval(draws)
