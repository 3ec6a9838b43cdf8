"""The cases the conformance suite runs: small tables (sum and mean pooling), batches with empty bags, duplicate ids
and each table's first and last rows, the optimizers and upstream gradients of its steps, and the options under
which a system exercises its own structure rather than a dense fallback: every table TT for the TT systems at small
ranks, every table compressed for the compression methods, EMBark's planner on a cost model that needs no
calibration. A system (ours as an outside one) states them in a ``check_options`` class attribute (the suite's tables
are too small for a byte budget to leave every one compressed); a TT system that takes ``tt_min_rows`` and ``ranks``
gets every table TT at rank 4."""
from __future__ import annotations

from typing import Any

import torch

from torch import Tensor

from impls.api import EmbeddingOptim, SparseFeatures, TableSpec
from impls.ebc.kjt import offsets_of

TABLES = (TableSpec("a", 40, 8), TableSpec("b", 7, 8, pooling="mean"), TableSpec("c", 25, 8))
# B = 3; a: [0, 39, 39], [], [5]; b: [6], [2, 2], []; c: [24], [0], [3, 4]
BATCH = SparseFeatures(torch.tensor([0, 39, 39, 5, 6, 2, 2, 24, 0, 3, 4]),
                       torch.tensor([0, 3, 3, 4, 5, 7, 7, 8, 9, 11]), 3)
EMPTY = ((0, 1), (1, 2))  # (table, bag) of BATCH's empty bags
SGD = EmbeddingOptim("sgd", lr=0.5)
# Adagrad moves every touched entry by about lr whatever the gradient's size; lr 0.05 and eps 1e-4 keep a TT core's
# near-zero gradients (sums that cancel) from turning rounding into steps
ADAGRAD = EmbeddingOptim("adagrad", lr=0.05, eps=1e-4)


def structure_options(cls: type) -> dict[str, Any]:
    """The options under which ``cls`` runs its own structure on the suite's small tables."""
    names = cls.option_names()
    own = getattr(cls, "check_options", None)
    if own is not None:
        return dict(own)
    return {k: v for k, v in {"tt_min_rows": 0, "ranks": 4}.items() if k in names}


def random_batch(tables, batch_size: int, seed: int, max_bag: int = 4) -> SparseFeatures:
    """A batch of random bags (0 to ``max_bag`` ids, the first bag of each table empty, each table's last row
    read) of ``tables``."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, max_bag + 1, (len(tables) * batch_size,), generator=g)
    vals = []
    for t, spec in enumerate(tables):
        lengths[t * batch_size] = 0
        n = int(lengths[t * batch_size: (t + 1) * batch_size].sum())
        v = torch.randint(0, spec.num_embeddings, (n,), generator=g)
        if n:
            v[-1] = spec.num_embeddings - 1
        vals.append(v)
    return SparseFeatures(torch.cat(vals), offsets_of(lengths), batch_size)


def upstream(batch_size: int, dim: int, seed: int = 0) -> Tensor:
    return torch.randn(batch_size, dim, generator=torch.Generator().manual_seed(seed))
