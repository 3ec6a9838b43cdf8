"""Labelling functions for `dlrmbench data synth` (``--teacher``). A synthetic stream's ids and dense features come
from its preset; its labels from a teacher, a fixed random function of them (a Bernoulli draw of sigmoid(logit)).

``scalar`` (the stream's own, impls/data/synthetic.py): each (table, id) carries one number h (a keyed hash), the
logit adds c_t * mean h over each bag and products of neighbouring tables' effects. One number per id is all there
is to learn, so a model that keeps any one number per id (a mixed-dimension table at dim 1) holds the whole
teacher, which is why a comparison of compressed tables must not score on it.

``vector`` (here): each (table, id) carries a vector u of the table's width d (every entry a keyed hash, unit
variance, independent of every other entry and id), and

    logit = bias + w . (dense - 1) + sum_t a_t . mean u_t + sum_t (mean u_t)^T W_t (mean u_t+1)

(neighbouring tables in a ring: pairwise products, which DLRM's dot interaction models). a and W are Gaussian,
scaled so the first-order term has variance 4 and the pairwise one 1, as the scalar teacher's. Why it favours none
of the compression methods: the per-id vectors are independent draws, so the tables hold no low-rank structure
(what TT's cores and QR's quotient x remainder factorisation assume), no shared rows (what hashing assumes), and
the same information per id whatever its popularity (what mixed dimensions assume: popularity only decides how
often an id is seen, as in real logs); each method is scored on how much of d numbers per id its bytes keep. It is
written in the dense tables' own form (d numbers per id), so the dense model is the ceiling every method measures
against, as the uncompressed model is in every compression study."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from impls.api import TableSpec
from impls.data.batch import Batch
from impls.data.hashing import unit_uniform

TEACHERS = ("scalar", "vector")


class VectorTeacher:
    """The ``vector`` teacher of tables ``tables`` (their widths) and ``num_dense`` dense features, keyed by
    ``seed``."""

    def __init__(self, tables: Sequence[TableSpec], num_dense: int, seed: int, bias: float = -1.0) -> None:
        self.widths = [int(t.dim) for t in tables]
        self.seed, self.bias = seed, bias
        T = len(self.widths)
        rng = np.random.default_rng([seed, 0x7EC7])
        self.w_dense = rng.normal(size=num_dense) / math.sqrt(max(1, num_dense))
        self.a = [2.0 * rng.normal(size=d) / math.sqrt(T * d) for d in self.widths]
        self.W = [rng.normal(size=(d, self.widths[(t + 1) % T])) / math.sqrt(T * d * self.widths[(t + 1) % T])
                  for t, d in enumerate(self.widths)]

    def vectors(self, t: int, ids: np.ndarray) -> np.ndarray:
        """u_t(id) for every id: [n, d_t], entries uniform with unit variance."""
        keys = [(self.seed * 1_000_003 + t) * 4099 + j for j in range(self.widths[t])]
        return np.stack([math.sqrt(3.0) * (2.0 * unit_uniform(ids, k) - 1.0) for k in keys], axis=1)

    def bag_means(self, batch: Batch) -> list[np.ndarray]:
        """mean u_t over each bag of the batch, per table: [B, d_t] (0 for an empty bag)."""
        B = batch.sparse.batch_size
        offsets = batch.sparse.offsets.numpy()
        values = batch.sparse.values.numpy()
        out = []
        for t in range(len(self.widths)):
            lo, hi = offsets[t * B], offsets[(t + 1) * B]
            lengths = np.diff(offsets[t * B:(t + 1) * B + 1])
            bag = np.repeat(np.arange(B), lengths)
            u = self.vectors(t, values[lo:hi])
            sums = np.zeros((B, self.widths[t]))
            np.add.at(sums, bag, u)
            out.append(sums / np.maximum(lengths, 1)[:, None])
        return out

    def logits(self, batch: Batch) -> np.ndarray:
        means = self.bag_means(batch)
        z = self.bias + (batch.dense.numpy().astype(np.float64) - 1.0) @ self.w_dense
        for t, m in enumerate(means):
            z += m @ self.a[t] + np.einsum("bi,ij,bj->b", m, self.W[t], means[(t + 1) % len(means)])
        return z

    def labels(self, batch: Batch, rng: np.random.Generator) -> np.ndarray:
        """0/1 labels: Bernoulli(sigmoid(logit)) per sample."""
        z = self.logits(batch)
        return (rng.random(z.shape[0]) < 1.0 / (1.0 + np.exp(-z))).astype(np.float32)
