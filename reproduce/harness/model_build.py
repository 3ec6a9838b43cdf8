"""The training step of a run point's model: the embedding collection of its system (sharded over the ranks of a
launch) inside the DLRM and its MLP optimizer. The worker builds a run's through it, and a kept model is rebuilt
through it (kept_model.py)."""
from __future__ import annotations

from reproduce.harness.point import RunPoint


def build_step(point: RunPoint, tables, num_dense: int, device, rank=None,
               global_batch: int | None = None, stats=None):
    """The training step of ``point``'s model over ``tables`` on ``device`` (over ranks: the collection sharded,
    ``stats`` rank 0's sample for a greedy placement); a kept model is rebuilt through it (kept_model.py)."""
    from impls.api import EmbeddingOptim, get_impl
    from impls.model.train import TrainStep

    cls = get_impl(point.impl)
    optim = EmbeddingOptim(point.optimizer, lr=point.lr)
    common = dict(device=device, check_bounds=point.check_bounds, seed=point.seed, **point.impl_options)
    if rank:
        from impls.sharding.build import build_sharded

        emb = build_sharded(cls, tables, optim, rank.ctx, rank.comm, stats=stats, **common)
    else:
        emb = cls(tables, optim, **common)
    step = TrainStep(emb, mode=point.mode, num_dense=num_dense, seed=point.seed,
                     comm=rank.comm if rank else None, global_batch=global_batch or None,
                     mlp_optimizer=point.mlp_optimizer, mlp_lr=point.mlp_lr, bottom=point.bottom, top=point.top,
                     interaction=point.interaction)
    if step.model is not None:
        step.model.to(device)
    return step
