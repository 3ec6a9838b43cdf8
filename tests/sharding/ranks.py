"""Run a function on N gloo ranks (file:// rendezvous; processes of the harness's rank_processes) and collect what
each returns or raises."""
from __future__ import annotations

import traceback

import torch
from impls.sharding.context import DistContext
from reproduce.harness.rank_processes import rank_queue, start_ranks


def _main(rank, world, init, L, fn, args, errors, results):
    try:
        torch.set_num_threads(1)
        ctx = DistContext.init(rank, world, init, local_world_size=L, timeout_s=60)
        try:
            results.put((rank, fn(ctx, *args)))
        finally:
            ctx.close()
    except BaseException:  # noqa: BLE001 - reported to the parent
        errors.put(f"rank {rank}: {traceback.format_exc()}")


def run_ranks(tmp_path, world: int, fn, *args, L: int | None = None) -> list:
    """``fn(ctx, *args)`` on every rank (``fn`` importable: a module-level function; ``L`` ranks per node,
    default all on one); its results by rank."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    errors, results = rank_queue(), rank_queue()
    start_ranks(_main, (world, f"file://{tmp_path}/rdzv", L or world, fn, args, errors, results), world)
    msgs = []
    while not errors.empty():
        msgs.append(errors.get())
    assert not msgs, "\n".join(msgs)
    out = {}
    while not results.empty():
        r, v = results.get()
        out[r] = v
    return [out[r] for r in range(world)]
