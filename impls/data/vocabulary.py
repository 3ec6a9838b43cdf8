"""A click log's vocabulary fitted on its training split, with one out-of-vocabulary row per table (as NVTabular's
Categorify fits on train and maps unseen values to one row): id 0 is every value the training split never showed
(or showed fewer than ``min_count`` times), ids 1.. the kept training values in the order of their sorted keys.

The split of a row is known only after the first pass (a time split ranks every row's time), so the second pass,
which reads the rows again and writes each split, names every value by a provisional id (the order it was first
met, ``TrainVocabulary.ids``) and counts the training rows' values (``count``); ``final`` then gives the map from
provisional to final ids that the written arrays go through once (``remap_columns`` / ``remap_values``)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

OOV_ID = 0  # the row of a value the training split did not keep


def oov_ids(keys: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """The id of every key given the sorted kept keys: 1 + its rank there, or OOV_ID when it is not kept."""
    keys = np.asarray(keys, dtype=np.int64)
    if not len(kept):
        return np.full(len(keys), OOV_ID, dtype=np.int64)
    pos = np.searchsorted(kept, keys)
    hit = kept[np.minimum(pos, len(kept) - 1)] == keys
    return np.where(hit, pos + 1, OOV_ID).astype(np.int64)


class TrainVocabulary:
    """One categorical field's distinct values by provisional id (first met first), the text each stands for, and
    how often each occurs in the training split. Memory: a few words per distinct value, as a count would need."""

    def __init__(self) -> None:
        self.keys = np.zeros(0, dtype=np.int64)  # sorted
        self.prov = np.zeros(0, dtype=np.int64)  # provisional id of keys[i]
        self.texts: list = []  # by provisional id
        self.train = np.zeros(0, dtype=np.int64)  # training occurrences by provisional id

    def __len__(self) -> int:
        return len(self.texts)

    def ids(self, keys: np.ndarray, named: Sequence[tuple[np.ndarray, list]]) -> np.ndarray:
        """The provisional id of every key, giving the keys not met before the next ids; ``named``: (keys, texts)
        pairs covering every key (the chunk's distinct values and their text)."""
        uniq, inv = np.unique(np.asarray(keys, dtype=np.int64), return_inverse=True)
        pos = np.searchsorted(self.keys, uniq)
        known = pos < len(self.keys)
        known[known] = self.keys[pos[known]] == uniq[known]
        out = np.empty(len(uniq), dtype=np.int64)
        out[known] = self.prov[pos[known]]
        new = uniq[~known]
        if len(new):
            first = len(self.texts)
            out[~known] = np.arange(first, first + len(new))
            nk = np.concatenate([k for k, _ in named]) if named else np.zeros(0, np.int64)
            nt = np.concatenate([np.asarray(t, dtype=object) for _, t in named]) if named else np.zeros(0, object)
            order = np.argsort(nk, kind="stable")
            at = np.searchsorted(nk[order], new)
            self.texts.extend(nt[order][at].tolist())
            merged = np.argsort(np.concatenate([self.keys, new]), kind="stable")
            self.keys = np.concatenate([self.keys, new])[merged]
            self.prov = np.concatenate([self.prov, out[~known]])[merged]
            self.train = np.concatenate([self.train, np.zeros(len(new), np.int64)])
        return out[inv]

    def count(self, prov: np.ndarray) -> None:
        """Count training occurrences of these provisional ids."""
        if len(prov):
            self.train += np.bincount(prov, minlength=len(self.train))

    def final(self, min_count: int) -> tuple[np.ndarray, np.ndarray, list]:
        """(provisional -> final id map, the kept keys sorted, their texts in id order from id 1): a value is kept
        when the training split holds it at least ``max(min_count, 1)`` times; every other value maps to OOV_ID."""
        keep = np.flatnonzero(self.train >= max(int(min_count), 1))
        by_prov = np.empty(len(self.texts), dtype=np.int64)
        by_prov[self.prov] = self.keys
        order = keep[np.argsort(by_prov[keep], kind="stable")]
        remap = np.full(len(self.texts), OOV_ID, dtype=np.int64)
        remap[order] = np.arange(1, len(order) + 1)
        return remap, by_prov[order], [self.texts[p] for p in order]


BLOCK_ROWS = 1 << 20


def remap_columns(sparse: np.ndarray, maps: dict[int, np.ndarray]) -> None:
    """Put one-hot ids [n, T] through each mapped column's map, in place, a block of rows at a time."""
    for lo in range(0, len(sparse), BLOCK_ROWS):
        block = sparse[lo : lo + BLOCK_ROWS]
        for j, m in maps.items():
            block[:, j] = m[block[:, j]]


def remap_values(values: np.ndarray, lengths: np.ndarray, row_offsets: np.ndarray,
                 maps: dict[int, np.ndarray]) -> None:
    """Put multi-hot values (sample-major, bag sizes ``lengths`` [n, T]) through each mapped field's map, in place."""
    T = lengths.shape[1]
    for lo in range(0, len(lengths), BLOCK_ROWS):
        lens = np.asarray(lengths[lo : lo + BLOCK_ROWS], dtype=np.int64)
        a, b = int(row_offsets[lo]), int(row_offsets[lo + len(lens)])
        field = np.repeat(np.tile(np.arange(T), len(lens)), lens.ravel())
        block = values[a:b]
        for j, m in maps.items():
            mine = field == j
            block[mine] = m[block[mine]]
