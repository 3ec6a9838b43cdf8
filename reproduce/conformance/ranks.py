"""check-system's `ranks` check: a system over 2 gloo processes equals one process. Each rank builds it through the
sharding layer (impls.sharding.build: its own ``build_distributed`` for a system that shards itself, else the
sharding its ``dist_defaults`` name - table-wise unless it says data-parallel - or the one check-system's
--sharding chooses), pools its slice of one global batch, backpropagates its slice of one upstream
gradient and takes one SGD step; the ranks' output rows and the whole tables after the step (``gather_table``) come
back to this process. The reference is the same system in one process on the whole batch; for a system that runs over
ranks only, the float64 dense model of its own tables as gathered before the step."""
from __future__ import annotations

import tempfile
import traceback
from typing import Any

import torch

from impls.api import TableSpec
from reproduce.conformance import oracle
from reproduce.conformance.cases import SGD, random_batch, upstream
from reproduce.conformance.compare import Failed, close
from reproduce.harness.rank_processes import rank_queue, start_ranks

WORLD = 2
TABLES = (TableSpec("a", 40, 8), TableSpec("b", 7, 8, pooling="mean"), TableSpec("c", 25, 8), TableSpec("d", 60, 8))
BATCH_SIZE, SEED = 8, 5


def _system(name: str, spec: str | None):
    from impls.api import get_impl

    if spec is not None:
        from reproduce.harness.systems import load

        load(spec)
    return get_impl(name)


def _step(coll, batch, g) -> Any:
    out = coll(batch)
    (out * g).sum().backward()
    coll.optimizer_step()
    return out.detach()


def _rank(rank: int, init: str, name: str, spec: str | None, options: dict, results, errors) -> None:
    try:
        from impls.data.loader import rank_rows
        from impls.sharding.build import build_sharded
        from impls.sharding.comm import Comm
        from impls.sharding.context import DistContext

        torch.set_num_threads(1)
        ctx = DistContext.init(rank, WORLD, init, local_world_size=WORLD, timeout_s=60)
        try:
            batch = random_batch(TABLES, BATCH_SIZE, SEED)
            comm = Comm(ctx)
            coll = build_sharded(_system(name, spec), TABLES, SGD, ctx, comm, stats=batch if rank == 0 else None,
                                 seed=SEED, **options)
            before = [coll.gather_table(t.name).detach().clone() for t in TABLES]
            lo, hi = rank_rows(BATCH_SIZE, rank, WORLD)
            g = upstream(BATCH_SIZE, sum(t.dim for t in TABLES))[lo:hi]
            out = _step(coll, batch.split_batch(WORLD)[rank], g)
            after = [coll.gather_table(t.name).detach().clone() for t in TABLES]
            results.put((rank, out.numpy(), [b.numpy() for b in before], [a.numpy() for a in after]))  # by value
        finally:
            ctx.close()
    except BaseException:  # noqa: BLE001 - reported to the parent
        errors.put(f"rank {rank}: {traceback.format_exc()}")


def _spawned(name: str, spec: str | None, options: dict) -> list[tuple]:
    """(output rows, tables before, tables after) of each rank."""
    errors, results = rank_queue(), rank_queue()
    with tempfile.TemporaryDirectory(prefix="dlrmbench-check-") as tmp:
        start_ranks(_rank, (f"file://{tmp}/rdzv", name, spec, options, results, errors), WORLD)
    if not errors.empty():
        raise Failed(errors.get().strip().splitlines()[-1])
    got = {}
    while not results.empty():
        r, out, before, after = results.get()
        got[r] = (torch.from_numpy(out), [torch.from_numpy(b) for b in before], [torch.from_numpy(a) for a in after])
    return [got[r] for r in range(WORLD)]


def two_ranks(s) -> str:
    from impls.api import ShardedCollection

    sharding = s.sharding or s.cls.dist_defaults.get("sharding", "table-wise")
    said = f"{sharding} sharding" + ("" if s.sharding else " (its dist_defaults)")
    dist = {"sharding": s.sharding} if s.sharding else {}
    if issubclass(s.cls, ShardedCollection):  # it shards itself (build_distributed)
        said, dist = "its own sharding (build_distributed)", {}
    per_rank = _spawned(s.cls.name, s.spec, {**s.options, **dist})
    before, after = per_rank[0][1], per_rank[0][2]
    batch = random_batch(TABLES, BATCH_SIZE, SEED)
    g = upstream(BATCH_SIZE, sum(t.dim for t in TABLES))
    if not s.cls.distributed_only:
        ref = s.cls(list(TABLES), SGD, seed=SEED, **s.options)
        want_out = _step(ref, batch, g)
        want_after = [ref.materialize(t.name) for t in TABLES]
        what = "one process of the same system"
    else:
        want_out, want_after, at = [], [], 0
        for i, t in enumerate(TABLES):
            w = before[i].double().clone().requires_grad_(True)
            rows = oracle.pooled(w, batch, i, t.pooling)
            grad, = torch.autograd.grad((rows * g[:, at:at + t.dim].double()).sum(), w)
            want_out.append(rows.detach())
            want_after.append((w - SGD.lr * grad).detach())
            at += t.dim
        want_out = torch.cat(want_out, 1)
        what = "the float64 dense model of its gathered tables"
    first, at = 0, 0  # rank by rank, table by table: a failure names both
    for r, (rows, _, _) in enumerate(per_rank):
        n = rows.shape[0]
        for t in TABLES:
            close(rows[:, at:at + t.dim], want_out[first:first + n, at:at + t.dim],
                  f"rank {r}'s pooled rows of table {t.name!r} (bags {first}..{first + n - 1}, {said}) vs {what}")
            at += t.dim
        first, at = first + n, 0
    for t, a, w in zip(TABLES, after, want_after):
        close(a, w, f"table {t.name!r} after one SGD step over {WORLD} ranks ({said}) vs {what}", rtol=1e-4)
    return f"{WORLD} gloo ranks, {said} (forward, one SGD step) = {what}"
