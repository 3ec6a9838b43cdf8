"""Seeded synthetic lookups and labels, vectorized and O(1) memory per row-space (valid for 1e9 rows).

Ids: a bounded power law over ranks drawn by inverse CDF, then a locality map from rank to id:
``ranked`` (hot ids are the small ids, as after frequency reordering) or ``scattered`` (ranks spread over
the id space by a keyed bijection). Bag sizes are fixed (= hotness) or random (uniform on
[0, 2*hotness], so empty bags occur). Labels come from a fixed random teacher, so AUC means something.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from impls.api import SparseFeatures, TableSpec, check_tables
from impls.data.batch import Batch
from impls.data.hashing import Bijection, unit_uniform

LOCALITIES = ("scattered", "ranked")
BAG_SIZES = ("fixed", "random")


HEAD = 1 << 10  # ranks sampled from their exact probabilities; the tail by a midpoint-rule inverse CDF


@functools.lru_cache(maxsize=4096)
def _zipf_head(n: int, alpha: float) -> tuple[np.ndarray, float]:
    """Cumulative weights of ranks [0, min(n, HEAD)) and the total weight of the remaining tail."""
    k = min(n, HEAD)
    cum = np.cumsum(np.arange(1, k + 1, dtype=np.float64) ** -alpha)
    lo, hi = k + 0.5, n + 0.5
    if n <= k:
        tail = 0.0
    elif abs(alpha - 1.0) < 1e-12:
        tail = math.log(hi / lo)
    else:
        tail = (hi ** (1 - alpha) - lo ** (1 - alpha)) / (1 - alpha)
    return cum, tail


def rank_cdf(n: int, alpha: float, k: np.ndarray) -> np.ndarray:
    """P(rank < k) under ``power_law_ranks`` (its exact head, its midpoint-rule tail), for an array of k in [0, n]."""
    k = np.asarray(k, dtype=np.float64)
    if alpha == 0:
        return k / n
    cum, tail = _zipf_head(int(n), float(alpha))
    head_w = cum[-1]
    h = len(cum)
    ki = np.clip(k, 0, h).astype(np.int64)
    below = np.where(ki > 0, cum[np.maximum(ki - 1, 0)], 0.0)
    lo, x = h + 0.5, np.maximum(k, h) + 0.5
    if abs(alpha - 1.0) < 1e-12:
        extra = np.log(x / lo)
    else:
        extra = (x ** (1 - alpha) - lo ** (1 - alpha)) / (1 - alpha)
    return (below + np.where(k > h, extra, 0.0)) / (head_w + tail)


def power_law_ranks(rng: np.random.Generator, n: int, alpha: float, size: int) -> np.ndarray:
    """Ranks in [0, n) with P(rank = r) proportional to (r + 1)^-alpha: a bounded Zipf law, as EMBark's and
    fbgemm's generators draw (alpha = 0 is uniform). The first 2^10 ranks get their exact probabilities; the
    tail is drawn by inverting the integral of x^-alpha over [rank + 0.5, rank + 1.5), whose relative error
    against (rank + 1)^-alpha is about alpha (alpha + 1) / (24 (rank + 1)^2) < 2e-7 there (midpoint rule),
    so the sampler is exact to float precision and O(1) memory for any n."""
    if alpha < 0:
        raise ValueError(f"power-law exponent must be >= 0, got {alpha}")
    u = rng.random(size)
    if alpha == 0:
        return np.minimum(np.floor(u * n), n - 1).astype(np.int64)
    cum, tail = _zipf_head(int(n), float(alpha))
    head_w = cum[-1]
    x = u * (head_w + tail)
    out = np.searchsorted(cum, np.minimum(x, head_w), side="right")
    in_tail = x >= head_w
    if in_tail.any():
        w = x[in_tail] - head_w  # weight into the tail
        lo = len(cum) + 0.5
        if abs(alpha - 1.0) < 1e-12:
            xs = lo * np.exp(w)
        else:
            e = 1.0 - alpha
            xs = (lo**e + w * e) ** (1.0 / e)
        out[in_tail] = np.floor(xs + 0.5) - 1  # x in [r + 0.5, r + 1.5) is rank r
    return np.clip(out, 0, n - 1).astype(np.int64)


def random_bag_bound(hotness: float) -> int:
    """The largest bag of ``bag_sizes="random"``: bags are uniform on [0, this]."""
    return int(round(2 * hotness))


def mean_bag(hotness: float, bag_sizes: str) -> float:
    """The expected ids per bag of a table of this hotness (what ``SyntheticSource.lengths`` draws)."""
    return float(int(hotness)) if bag_sizes == "fixed" else random_bag_bound(hotness) / 2.0


@dataclass(frozen=True)
class SyntheticSpec:
    """Everything that determines a synthetic stream."""

    tables: tuple[TableSpec, ...]
    alpha: float = 1.05  # power-law exponent of id popularity (0 = uniform)
    locality: str = "scattered"
    bag_sizes: str = "fixed"
    num_dense: int = 13
    seed: int = 0
    teacher_seed: int = 1234

    def __post_init__(self) -> None:
        object.__setattr__(self, "tables", check_tables(self.tables))
        if self.locality not in LOCALITIES:
            raise ValueError(f"locality must be one of {LOCALITIES}, got {self.locality!r}")
        if self.bag_sizes not in BAG_SIZES:
            raise ValueError(f"bag_sizes must be one of {BAG_SIZES}, got {self.bag_sizes!r}")
        if self.alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {self.alpha}")
        if self.num_dense < 0:
            raise ValueError(f"num_dense must be >= 0, got {self.num_dense}")
        if self.bag_sizes == "fixed":
            for t in self.tables:
                if t.hotness != int(t.hotness):
                    raise ValueError(f"table {t.name!r}: fixed bag sizes need an integer hotness, got {t.hotness}")


@dataclass
class Teacher:
    """A fixed random labelling function: logit = bias + dense·w + sum_t c_t·mean h_t(ids) + pairwise
    products of neighbouring tables' bag effects. h_t(id) is a unit-variance hash of (table, id), so the
    teacher needs no memory per row."""

    num_tables: int
    num_dense: int
    seed: int
    bias: float = -1.0
    w_dense: np.ndarray = field(init=False)
    c_table: np.ndarray = field(init=False)
    c_pair: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        rng = np.random.default_rng([self.seed, 0x7EAC])
        self.w_dense = rng.normal(size=self.num_dense) / math.sqrt(max(1, self.num_dense))
        self.c_table = 2.0 * rng.normal(size=self.num_tables) / math.sqrt(self.num_tables)
        self.c_pair = rng.normal(size=self.num_tables) / math.sqrt(self.num_tables)

    def effect(self, t: int, ids: np.ndarray) -> np.ndarray:
        return math.sqrt(3.0) * (2.0 * unit_uniform(ids, self.seed * 7919 + t) - 1.0)

    def logits(self, dense: np.ndarray, bag_effects: np.ndarray) -> np.ndarray:
        """dense [B, num_dense]; bag_effects [T, B] (mean h over each bag, 0 for an empty bag)."""
        z = self.bias + (dense - 1.0) @ self.w_dense + self.c_table @ bag_effects
        z += self.c_pair @ (bag_effects * np.roll(bag_effects, -1, axis=0))
        return z


class SyntheticSource:
    """Batches of a SyntheticSpec; batch i is the same for a given (spec, i, batch_size)."""

    def __init__(self, spec: SyntheticSpec) -> None:
        self.spec = spec
        self.maps = [
            Bijection(t.num_embeddings, spec.seed * 1_000_003 + i) if spec.locality == "scattered" else None
            for i, t in enumerate(spec.tables)
        ]
        self.teacher = Teacher(len(spec.tables), spec.num_dense, spec.teacher_seed)

    @property
    def tables(self) -> tuple[TableSpec, ...]:
        return self.spec.tables

    @property
    def num_dense(self) -> int:
        return self.spec.num_dense

    def lengths(self, rng: np.random.Generator, t: TableSpec, batch_size: int) -> np.ndarray:
        if self.spec.bag_sizes == "fixed":
            return np.full(batch_size, int(t.hotness), dtype=np.int64)
        return rng.integers(0, random_bag_bound(t.hotness) + 1, size=batch_size, dtype=np.int64)

    def ids(self, rng: np.random.Generator, i: int, size: int) -> np.ndarray:
        t = self.spec.tables[i]
        ranks = power_law_ranks(rng, t.num_embeddings, self.spec.alpha, size)
        return ranks if self.maps[i] is None else self.maps[i](ranks)

    def batch(self, index: int, batch_size: int) -> Batch:
        if batch_size <= 0:
            raise ValueError(f"batch size must be > 0, got {batch_size}")
        spec = self.spec
        rng = np.random.default_rng([spec.seed, index, batch_size])
        values, lengths, effects = [], [], []
        for i, t in enumerate(spec.tables):
            L = self.lengths(rng, t, batch_size)
            ids = self.ids(rng, i, int(L.sum()))
            h = self.teacher.effect(i, ids)
            bag = np.repeat(np.arange(batch_size), L)
            eff = np.bincount(bag, weights=h, minlength=batch_size) / np.maximum(L, 1)
            values.append(ids)
            lengths.append(L)
            effects.append(eff)
        dense = np.log1p(np.floor(rng.lognormal(mean=1.0, sigma=1.5, size=(batch_size, spec.num_dense))))
        z = self.teacher.logits(dense, np.stack(effects))
        labels = (rng.random(batch_size) < 1.0 / (1.0 + np.exp(-z))).astype(np.float32)
        offsets = np.zeros(len(spec.tables) * batch_size + 1, dtype=np.int64)
        np.cumsum(np.concatenate(lengths), out=offsets[1:])
        sparse = SparseFeatures(torch.from_numpy(np.concatenate(values)), torch.from_numpy(offsets), batch_size)
        return Batch(torch.from_numpy(dense.astype(np.float32)), sparse, torch.from_numpy(labels))

    def batches(self, count: int, batch_size: int, start: int = 0) -> list[Batch]:
        return [self.batch(start + k, batch_size) for k in range(count)]


def tables_from_rows(
    rows: Sequence[int], dim: int, hotness: Sequence[float] | float = 1.0, prefix: str = "t", pooling: str = "sum",
    names: Sequence[str] | None = None,
) -> tuple[TableSpec, ...]:
    """Tables named ``names`` (default prefix0, prefix1, ...) with the given rows and hotness."""
    hot = [hotness] * len(rows) if isinstance(hotness, (int, float)) else list(hotness)
    names = list(names) if names is not None else [f"{prefix}{i}" for i in range(len(rows))]
    if not len(hot) == len(names) == len(rows):
        raise ValueError(f"{len(rows)} tables but {len(hot)} hotness values and {len(names)} names")
    return tuple(TableSpec(nm, int(n), dim, pooling, float(h)) for nm, n, h in zip(names, rows, hot))
