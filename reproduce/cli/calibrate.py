"""`dlrmbench calibrate`: the numbers behind the cpu-gloo hardware profile of EMBark's cost model, measured on this
machine: memory bandwidth (a large tensor copy, read + write) and the bytes per second one gloo rank sends in an
all_to_all among ``world`` processes on this host."""
from __future__ import annotations

import json
import statistics
import tempfile
import time

import click


def _copy_bw(mb: int = 256, reps: int = 5) -> float:
    import torch

    a = torch.ones(mb * 2**20 // 4)
    b = torch.empty_like(a)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        b.copy_(a)
        times.append(time.perf_counter() - t0)
    return 2 * a.numel() * 4 / statistics.median(times)  # bytes read + written per second


def _a2a_rank(rank, world, init, mb, reps, out):
    import torch
    import torch.distributed as dist

    from impls.sharding.context import DistContext

    torch.set_num_threads(1)
    ctx = DistContext.init(rank, world, init, timeout_s=120)
    x = torch.ones(mb * 2**20 // 4)
    y = torch.empty_like(x)
    times = []
    for _ in range(reps):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_to_all_single(y, x)
        times.append(time.perf_counter() - t0)
    if rank == 0:
        out.put((world - 1) / world * x.numel() * 4 / statistics.median(times))
    ctx.close()


def _a2a_bw(world: int, mb: int = 64, reps: int = 5) -> float:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(_a2a_rank, args=(world, f"file://{d}/rdzv", mb, reps, out), nprocs=world,
                           start_method="spawn", join=True)
    return out.get()


@click.command("calibrate")
@click.option("--world", type=int, default=2, show_default=True, help="gloo processes in the all_to_all")
def calibrate(world) -> None:
    """Measure this machine for the cpu-gloo profile (memory and gloo all_to_all bandwidth)."""
    mem = _copy_bw()
    a2a = _a2a_bw(world)
    click.echo(json.dumps({"mem_bw": mem, "intra_bw": a2a, "inter_bw": a2a, "world": world,
                           "rho": mem / a2a}, indent=1))
