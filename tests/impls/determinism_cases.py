"""Training runs for the determinism tests (spawned ranks import this module): a few DLRM steps of one
implementation with 2 threads, returning every loss and every table after the last step."""
from __future__ import annotations

import hashlib

import torch

from impls.api import EmbeddingOptim, TableSpec, get_impl
from impls.data.loader import rank_slice
from impls.model.train import TrainStep
from tests.sharding.sharded_cases import global_batch

# Tables large enough for 3-core TT shapes, small enough that a batch of 128 repeats core rows many times.
TABLES = (TableSpec("a", 3000, 16), TableSpec("b", 12000, 16, pooling="mean"), TableSpec("c", 700, 16))
STEPS, BATCH, NUM_DENSE = 3, 128, 4


def train(name: str, optim_kind: str, ctx=None, options: dict | None = None) -> tuple[list[float], list[torch.Tensor]]:
    torch.set_num_threads(2)
    optim = EmbeddingOptim(optim_kind, lr=0.05, eps=1e-4)
    kwargs = {"seed": 5, **(options or {})}
    comm = None
    if ctx is not None:
        from impls.sharding.comm import Comm

        comm = Comm(ctx)
        if name == "embark":  # every cluster: a row-split reduction-based table, a unique-based one, a DP one
            from impls.embark.shards import Plan, TablePlacement

            mp = (TablePlacement(0, (0, 1)), TablePlacement(1, (1, 0), cluster="ub"))
            kwargs.update(plan=Plan(2, 2, dp=(2,), mp=mp), comm=comm)
    emb = get_impl(name)(TABLES, optim, ctx, **kwargs)
    step = TrainStep(emb, mode="dlrm", num_dense=NUM_DENSE, seed=5, bottom=(16,), top=(16,), comm=comm,
                     global_batch=BATCH if ctx is not None else None)
    losses = []
    for k in range(STEPS):
        batch = global_batch(BATCH, 100 + k, tables=TABLES, num_dense=NUM_DENSE, max_bag=6)
        if ctx is not None:
            batch = rank_slice(batch, ctx.rank, ctx.world_size)
        losses.append(step(batch))
    gather = getattr(emb, "gather_table", None) if ctx is not None else None
    tables = [(gather or emb.materialize)(t.name).detach().clone() for t in TABLES]
    dense = [p.detach().clone() for n, p in step.model.named_parameters() if not n.startswith("embeddings.")]
    return losses, tables + dense


def train_on_rank(ctx, name: str, optim_kind: str, options: dict | None = None):
    """train() on one rank; each tensor goes back to the parent as the SHA-256 of its bytes (the ranks'
    result pipe holds a few KiB until the parent reads it after the join; equal bytes <=> equal digests)."""
    losses, tensors = train(name, optim_kind, ctx, options)
    return losses, [hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest() for t in tensors]
