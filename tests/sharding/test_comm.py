"""The distributed runtime on gloo with real processes: groups, collectives, byte accounting, async handles,
and a timeout instead of a hang when a rank never joins a collective."""
import time

import pytest
import torch
import torch.distributed as dist

from impls.sharding.comm import Comm
from impls.sharding.context import DistContext
from reproduce.harness.rank_processes import rank_queue, start_ranks


def _collectives(rank, world, init, L, errors):
    try:
        torch.set_num_threads(1)
        ctx = DistContext.init(rank, world, init, local_world_size=L, timeout_s=60)
        comm = Comm(ctx)
        assert (ctx.node, ctx.local_rank, ctx.num_nodes) == (rank // L, rank % L, world // L)
        # all_to_all with uneven splits: rank r sends (p + 1) rows to peer p, each row = [r, p]
        in_splits = [p + 1 for p in range(world)]
        inp = torch.cat([torch.tensor([[float(rank), float(p)]] * (p + 1)) for p in range(world)])
        out_splits = [rank + 1] * world
        out = torch.empty(sum(out_splits), 2)
        h = comm.all_to_all(out, inp, out_splits, in_splits, "fwd.a2a", async_op=True)
        h.wait()
        want = torch.cat([torch.tensor([[float(src), float(rank)]] * (rank + 1)) for src in range(world)])
        assert torch.equal(out, want)
        assert comm.bytes("fwd.a2a") == sum((p + 1) * 8 for p in range(world) if p != rank)
        t = torch.full((6,), float(rank + 1))
        comm.all_reduce(t, "bwd.ar")
        assert torch.equal(t, torch.full((6,), float(sum(range(1, world + 1)))))
        assert comm.bytes("bwd.ar") == 2 * (world - 1) * 24 // world
        rs = torch.empty(2)
        comm.reduce_scatter(rs, torch.arange(2.0 * world), "bwd.rs")
        assert torch.equal(rs, world * torch.arange(2.0 * rank, 2.0 * rank + 2))
        assert comm.bytes("bwd.rs") == (world - 1) * 2 * world * 4 // world
        g = torch.empty(world * 3)
        comm.all_gather(g, torch.full((3,), float(rank)), "fwd.ag")
        assert torch.equal(g, torch.arange(world).float().repeat_interleave(3))
        node_sum = torch.tensor([float(rank)])
        dist.all_reduce(node_sum, group=ctx.intra)
        assert float(node_sum) == sum(range(ctx.node * L, (ctx.node + 1) * L))
        rail_sum = torch.tensor([1.0])
        dist.all_reduce(rail_sum, group=ctx.rails)
        assert float(rail_sum) == ctx.num_nodes
        ctx.close()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        errors.put(f"rank {rank}: {type(exc).__name__}: {exc}")


@pytest.mark.parametrize("world,L", [(2, 2), (4, 2)])
def test_collectives_groups_and_bytes(tmp_path, world, L):
    errors = rank_queue()
    start_ranks(_collectives, (world, f"file://{tmp_path}/rdzv", L, errors), world)
    msgs = []
    while not errors.empty():
        msgs.append(errors.get())
    assert not msgs, msgs


def _one_rank_absent(rank, world, init, errors):
    try:
        ctx = DistContext.init(rank, world, init, timeout_s=3)
        if rank == 0:
            t0 = time.time()
            try:
                dist.all_reduce(torch.ones(1))
                errors.put("rank 0: the collective returned without its peer")
            except RuntimeError:
                errors.put(f"timeout after {time.time() - t0:.1f}s")
        else:
            time.sleep(8)  # never joins the collective
        ctx.close()
    except BaseException as exc:  # noqa: BLE001
        errors.put(f"rank {rank}: {type(exc).__name__}: {exc}")


def test_a_missing_rank_times_out_instead_of_hanging(tmp_path):
    errors = rank_queue()
    t0 = time.time()
    ctx = start_ranks(_one_rank_absent, (2, f"file://{tmp_path}/rdzv", errors), 2, join=False)
    while not ctx.join(timeout=30):
        assert time.time() - t0 < 60, "the run hung"
    msgs = []
    while not errors.empty():
        msgs.append(errors.get())
    assert any(m.startswith("timeout after") for m in msgs), msgs


def test_bad_context_arguments():
    with pytest.raises(ValueError, match="not in a world of 2"):
        DistContext.init(2, 2, "file:///nonexistent")
    with pytest.raises(ValueError, match="whole number of nodes"):
        DistContext.init(0, 3, "file:///nonexistent", local_world_size=2)
    with pytest.raises(ValueError, match="timeout must be > 0"):
        DistContext.init(0, 1, "file:///nonexistent", timeout_s=0)
