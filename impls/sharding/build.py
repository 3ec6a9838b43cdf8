"""Build one system's embedding collection for a distributed run: its sharding (``dist_defaults`` of the
system, overridden by options), and for greedy placement the per-table costs EcoRec balances on: the number
of distinct ids of each table in a sampled global batch, computed on rank 0 and broadcast."""
from __future__ import annotations

from typing import Any, Sequence

import torch

from impls.api import (BUILD_ARGS, HARNESS_KEYS, EmbeddingCollection, EmbeddingOptim, ShardedCollection,
                       SparseFeatures, TableSpec)
from impls.sharding.comm import Comm
from impls.sharding.context import DistContext
from impls.sharding.data_parallel import DataParallelCollection
from impls.sharding.table_wise import TableWiseCollection

SHARDINGS = ("table-wise", "data-parallel")
TABLE_WISE_KEYS = ("placement", "pipeline", "pipeline_groups", "skew", "reorder", "pipeline_micro_batches",
                   "overlap", "capacity_bytes")
DIST_KEYS = ("sharding", *TABLE_WISE_KEYS)


def accepted_options(cls: type[EmbeddingCollection], distributed: bool) -> frozenset[str]:
    """Every option key ``cls`` takes in a run on one device or over ranks: its own options, plus over ranks
    what builds it there (its ``build_distributed``'s keywords, else the sharding wrappers' DIST_KEYS).
    The harness's own arguments (BUILD_ARGS, HARNESS_KEYS) are never options."""
    names = set(cls.option_names())
    if not distributed:
        return frozenset(names)
    if not issubclass(cls, ShardedCollection):
        return frozenset(names | set(DIST_KEYS))
    return frozenset((names | cls.dist_option_keys) - BUILD_ARGS - HARNESS_KEYS)


def unique_counts(features: SparseFeatures) -> list[int]:
    """Distinct ids per table of one batch (EcoRec's per-table cost estimate)."""
    return [int(torch.unique(features.table(t)[0]).numel()) for t in range(features.num_tables)]


def build_sharded(
    cls: type[EmbeddingCollection],
    tables: Sequence[TableSpec],
    optim: EmbeddingOptim,
    ctx: DistContext,
    comm: Comm,
    *,
    stats: SparseFeatures | None = None,
    device: str | torch.device = "cpu",
    check_bounds: bool = True,
    seed: int = 0,
    **options: Any,
) -> EmbeddingCollection:
    """``stats``: a sampled global batch, needed on rank 0 for greedy placement. A system that shards itself
    (a ShardedCollection: EMBark with its own planner, TorchRec) builds through its ``build_distributed``."""
    if issubclass(cls, ShardedCollection):
        return cls.build_distributed(tables, optim, ctx, comm, stats=stats, device=device, check_bounds=check_bounds,
                                     seed=seed, **options)
    dist_opts = {**cls.dist_defaults, **{k: options.pop(k) for k in DIST_KEYS if k in options}}
    sharding = dist_opts.pop("sharding")
    common = dict(local_cls=cls, local_options=options, comm=comm, device=device, check_bounds=check_bounds,
                  seed=seed)
    if sharding == "data-parallel":
        extra = sorted(set(dist_opts) - set(cls.dist_defaults))
        if extra:
            raise ValueError(f"option(s) {extra} apply to table-wise sharding, not data-parallel")
        return DataParallelCollection(tables, optim, ctx, **common)
    if sharding != "table-wise":
        raise ValueError(f"sharding must be one of {SHARDINGS}, got {sharding!r}")
    costs = None
    if dist_opts.get("placement") == "greedy":
        error = None
        if ctx.rank == 0:  # rank 0 estimates, every rank gets the estimate or rank 0's error
            if stats is None:
                error = "greedy placement needs a sampled batch (stats) on rank 0"
            elif stats.num_tables != len(tables):
                error = f"stats batch has {stats.num_tables} tables, the model {len(tables)}"
            else:
                costs = unique_counts(stats)
        costs, error = comm.broadcast_object((costs, error))
        if error:
            raise ValueError(error)
    return TableWiseCollection(tables, optim, ctx, costs=costs, **dist_opts, **common)
