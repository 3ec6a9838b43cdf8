"""Intervals over rounds. A sweep runs every point once per round (rounds interleaved: A B C, C B A), so the runs of
two points in one round share the machine's state: a ratio is taken WITHIN each round (paired) and summarized over
rounds by the Hodges-Lehmann estimate of the log ratio (the median of the Walsh averages (d_i + d_j) / 2, i <= j, of
the per-round log ratios d), with its exact Wilcoxon signed-rank interval: distribution-free for noise symmetric
about the ratio - which the difference of two runs' log times is when their noise is alike, however skewed each is -,
robust like the median and about 95 % efficient under normal noise, where the median's order-statistic interval is
about 64 % (so about twice as wide at 10 rounds). Exact: no resampling, so the same records always give the same
report. A system over itself is exactly 1 with no interval. From 6 rounds the interval is a 95 % confidence
interval; with fewer it is the range of the Walsh averages, and ``paired_interval_name`` states the confidence that
range has (5 rounds: 94 %), never calling it 95 %. A point's own metric (a step time) is summarized by its median
over rounds with the order-statistic interval of the median (``median_interval``, ``interval_name``).
An aggregate over groups (the max, median or mean of several settings' ratios) takes a bootstrap over rounds (the
max / min: of those very settings) or over groups and rounds (the median / mean: its interval spans the settings)."""
from __future__ import annotations

import functools
import math
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

RESAMPLES = 4000
LEVEL = 0.95
SEED = 0

AGGREGATES: dict[str, Callable[..., np.ndarray]] = {"median": np.median, "max": np.max, "mean": np.mean,
                                                    "min": np.min}
Interval = tuple[float, float, float]
NAN3: Interval = (float("nan"),) * 3


def _coverage(n: int, k: int) -> float:
    """The confidence of [x_(k), x_(n+1-k)] (1-based order statistics) for the median of n values: 1 - 2 P(B < k),
    B ~ Binomial(n, 1/2)."""
    below = sum(math.comb(n, i) for i in range(k)) / 2 ** n
    return 1 - 2 * below


def _largest_k(coverage: Callable[[int], float], values: int) -> int:
    """The largest k whose interval between the k-th smallest and the k-th largest of ``values`` ordered values
    still has LEVEL confidence (``coverage(k)``); 1 when none does: the range, whose confidence the name states."""
    k = 1
    while k + 1 <= (values + 1) // 2 and coverage(k + 1) >= LEVEL:
        k += 1
    return k


def _named(rounds: int, cover: float, ci: str, span: str, of: str = "") -> str:
    """An interval's name: ``ci`` when its confidence ``cover`` reaches LEVEL, else ``span`` with the confidence it
    has (a CI ``of`` what)."""
    if rounds <= 1:
        return "one round: no interval"
    if cover >= LEVEL:
        return ci
    return f"{span} ({cover * 100:.0f} % CI{of})"


def order_k(n: int) -> int:
    """The largest k whose interval [x_(k), x_(n+1-k)] still covers the median with LEVEL confidence."""
    return _largest_k(lambda k: _coverage(n, k), n)


def is_ci(rounds: int) -> bool:
    """Whether the order-statistic interval over ``rounds`` values is a LEVEL (95 %) confidence interval."""
    return rounds > 1 and _coverage(rounds, order_k(rounds)) >= LEVEL


def interval_name(rounds: int) -> str:
    """What the interval of a median over ``rounds`` values is."""
    return _named(rounds, _coverage(rounds, order_k(rounds)) if rounds > 1 else 0.0,
                  f"order-statistic 95 % CI of the median over {rounds} rounds", f"range of {rounds} rounds",
                  " of the median")


def median_interval(x: Sequence[float]) -> Interval:
    """Median of ``x`` and its order-statistic interval (``order_k``); NaNs left out."""
    v = np.sort(np.asarray([a for a in x if a == a], dtype=float))
    if len(v) == 0:
        return NAN3
    k = order_k(len(v))
    return float(np.median(v)), float(v[k - 1]), float(v[len(v) - k])


@functools.lru_cache(maxsize=None)
def _signed_rank_counts(n: int) -> tuple[int, ...]:
    """How many subsets of the ranks 1..n sum to t, for t = 0..n(n+1)/2 (the Wilcoxon signed-rank statistic's null
    distribution times 2^n)."""
    counts = [1] + [0] * (n * (n + 1) // 2)
    for r in range(1, n + 1):
        for t in range(len(counts) - 1, r - 1, -1):
            counts[t] += counts[t - r]
    return tuple(counts)


def _walsh_coverage(n: int, k: int) -> float:
    """The confidence of [W_(k), W_(M+1-k)] (1-based order statistics of the M = n(n+1)/2 Walsh averages) for the
    center of a symmetric distribution: 1 - 2 P(T < k), T the signed-rank statistic."""
    counts = _signed_rank_counts(n)
    return 1 - 2 * sum(counts[:k]) / 2 ** n


@functools.lru_cache(maxsize=None)
def walsh_k(n: int) -> int:
    """The largest k whose interval [W_(k), W_(M+1-k)] still holds the center with LEVEL confidence."""
    return _largest_k(lambda k: _walsh_coverage(n, k), n * (n + 1) // 2)


def walsh_averages(x: np.ndarray) -> np.ndarray:
    """(x_i + x_j) / 2 for every i <= j, over the last axis (a batch of samples: one row each)."""
    i, j = np.triu_indices(x.shape[-1])
    return (x[..., i] + x[..., j]) / 2


def hodges_lehmann(x: Sequence[float]) -> Interval:
    """The Hodges-Lehmann estimate of the center of ``x`` (the median of its Walsh averages) and its exact Wilcoxon
    signed-rank interval (``walsh_k``); NaNs left out."""
    v = np.asarray([a for a in x if a == a], dtype=float)
    if len(v) == 0:
        return NAN3
    w = np.sort(walsh_averages(v))
    k = walsh_k(len(v))
    return float(np.median(w)), float(w[k - 1]), float(w[len(w) - k])


def is_paired_ci(rounds: int) -> bool:
    """Whether the signed-rank interval over ``rounds`` paired rounds is a LEVEL (95 %) confidence interval."""
    return rounds > 1 and _walsh_coverage(rounds, walsh_k(rounds)) >= LEVEL


def paired_interval_name(rounds: int) -> str:
    """What the interval of a paired ratio over ``rounds`` rounds is."""
    return _named(rounds, _walsh_coverage(rounds, walsh_k(rounds)) if rounds > 1 else 0.0,
                  f"Hodges-Lehmann, exact Wilcoxon signed-rank 95 % CI over {rounds} rounds",
                  f"range of the Walsh averages of {rounds} rounds")


def by_round(runs: pd.DataFrame, metric: str) -> dict[int, float]:
    """round (the ``repeat`` column) -> ``metric`` of the runs given (one point's, or one side of a comparison; two
    runs in one round give their median); NaNs left out."""
    if metric not in runs or runs.empty:
        return {}
    g = runs.dropna(subset=[metric]).groupby("repeat")[metric].median()
    return {int(r): float(v) for r, v in g.items()}


def round_ratios(num: Mapping[int, float], den: Mapping[int, float]) -> np.ndarray:
    """num[r] / den[r] for every round r both sides measured (NaNs left out), in round order."""
    rounds = sorted(r for r in num.keys() & den.keys() if num[r] == num[r] and den[r] == den[r] and den[r])
    return np.asarray([num[r] / den[r] for r in rounds], dtype=float)


def ratio_interval(r: Sequence[float]) -> Interval:
    """The Hodges-Lehmann estimate of per-round ratios ``r`` (on their logs) and its signed-rank interval, as
    ratios."""
    r = np.asarray(r, dtype=float)
    r = r[(r == r) & (r > 0)]
    if len(r) == 0:
        return NAN3
    est, lo, hi = hodges_lehmann(np.log(r))
    return math.exp(est), math.exp(lo), math.exp(hi)


def paired_ratio(num: Mapping[int, float], den: Mapping[int, float]) -> tuple[float, float, float, int]:
    """The Hodges-Lehmann estimate over rounds of the within-round ratio num[r] / den[r] (on the log ratios), its
    exact signed-rank interval and the number of rounds paired (``num`` and ``den``: round -> value)."""
    r = round_ratios(num, den)
    return (*ratio_interval(r), len(r))


def half_width(value: float, lo: float, hi: float) -> float:
    """An interval's half-width relative to its value (inf without an interval)."""
    if not (value == value and lo == lo and hi == hi) or value == 0:
        return float("inf")
    return (hi - lo) / 2 / abs(value)


def _interval(draws: np.ndarray) -> tuple[float, float]:
    a = (1 - LEVEL) / 2
    lo, hi = np.quantile(draws, [a, 1 - a])
    return float(lo), float(hi)


Group = tuple[Mapping[int, float], Mapping[int, float], float]  # numerator rounds, denominator rounds, power


def aggregate_name(how: str, groups: int, rounds: int) -> str:
    """What ``aggregate_interval`` gives for ``groups`` groups of at least ``rounds`` paired rounds."""
    if groups == 1:
        return paired_interval_name(rounds)
    if rounds <= 1 and how in ("max", "min"):
        return "one round: no interval"
    over = "rounds" if how in ("max", "min") else "groups and rounds"
    return f"bootstrap 95 % over {over} ({groups} groups, {rounds}+ rounds)"


def aggregate_interval(groups: Sequence[Group], how: str,
                       transform: Callable[[np.ndarray], np.ndarray] = lambda r: r,
                       seed: int = SEED) -> tuple[float, float, float, list[float]]:
    """An aggregate (``how``: median, max, mean, min) over groups of ``transform(paired ratio ** power)``, its
    interval and the per-group values (each group's ratio: its Hodges-Lehmann estimate). One group: its signed-rank
    interval. Several: a bootstrap (seeded) that redraws each group's rounds (max / min: of the same groups) or the groups themselves and then their rounds
    (median / mean: the interval spans what the settings disagree on, not only repeat noise)."""
    if how not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {sorted(AGGREGATES)}, got {how!r}")
    agg = AGGREGATES[how]
    ratios = [(round_ratios(n, d), p) for n, d, p in groups]
    ratios = [(r, p) for r, p in ratios if len(r)]
    if not ratios:
        return float("nan"), float("nan"), float("nan"), []
    f = lambda r, p: np.asarray(transform(np.asarray(r, dtype=float) ** p), dtype=float)  # noqa: E731
    values = [float(f(ratio_interval(r)[0], p)) for r, p in ratios]
    if len(ratios) == 1:
        r, p = ratios[0]
        ends = sorted(float(f(x, p)) for x in ratio_interval(r)[1:])
        return values[0], ends[0], ends[1], values
    rng = np.random.default_rng(seed)

    def estimates(r: np.ndarray) -> np.ndarray:  # the Hodges-Lehmann estimate of each resample of r
        logs = np.log(r[rng.integers(0, len(r), size=(RESAMPLES, len(r)))])
        return np.exp(np.median(walsh_averages(logs), axis=1))

    draws = np.stack([f(estimates(r), p) for r, p in ratios])  # groups x resamples
    if how in ("median", "mean"):
        pick = rng.integers(0, len(ratios), size=(RESAMPLES, len(ratios)))
        draws = np.take_along_axis(draws, pick.T, axis=0)
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
