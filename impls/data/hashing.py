"""Vectorized integer hashing: splitmix64 mixing and a keyed bijection on [0, n) (Feistel network
with cycle walking), O(1) memory per row-space, valid for n up to 2**60."""
from __future__ import annotations

import numpy as np

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN_INT = 0x9E3779B97F4A7C15


def mix64(x: np.ndarray, key: int = 0) -> np.ndarray:
    """splitmix64 finalizer of ``x + key`` (uint64 in, uint64 out; wraps modulo 2**64)."""
    z = np.asarray(x).astype(np.uint64) + np.uint64((key * _GOLDEN_INT) % 2**64)
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def unit_uniform(x: np.ndarray, key: int) -> np.ndarray:
    """A deterministic float64 in [0, 1) per element of x (53 high bits of its hash)."""
    return (mix64(x, key) >> np.uint64(11)).astype(np.float64) * (1.0 / 2**53)


class Bijection:
    """A keyed permutation of [0, n): a 4-round balanced Feistel network on the smallest even number of
    bits that holds n, walked until the image falls inside [0, n) (at most ~4 steps on average)."""

    ROUNDS = 4

    def __init__(self, n: int, key: int) -> None:
        if n <= 0:
            raise ValueError(f"bijection domain must be non-empty, got n={n}")
        if n > 2**60:
            raise ValueError(f"bijection domain too large: {n} > 2**60")
        self.n = n
        bits = max(2, int(n - 1).bit_length())
        self.half = (bits + 1) // 2
        self.mask = np.uint64((1 << self.half) - 1)
        self.keys = [int(k) for k in mix64(np.arange(self.ROUNDS, dtype=np.uint64), key)]

    def _round(self, x: np.ndarray) -> np.ndarray:
        h = np.uint64(self.half)
        left, right = x >> h, x & self.mask
        for k in self.keys:
            left, right = right, left ^ (mix64(right, k) & self.mask)
        return (left << h) | right

    def __call__(self, x: np.ndarray) -> np.ndarray:
        y = self._round(np.asarray(x, dtype=np.uint64))
        n = np.uint64(self.n)
        out = y >= n
        while out.any():
            y[out] = self._round(y[out])
            out = y >= n
        return y.astype(np.int64)
