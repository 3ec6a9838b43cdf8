"""`dlrmbench calibrate`: the terms of EMBark's calibrated cost model (impls/embark/calibrated.py), measured on this
machine and backend, fitted and written as its profile (results/calibration/<machine>/<backend>.json).

- collectives: all_to_all (x = bytes each rank sends the others), all_reduce (x = the tensor's bytes) and all_gather
  (x = each rank's bytes) at message sizes from 64 B to 16 MiB, in ``world`` processes of this backend (gloo on a
  CPU, NCCL on GPUs); per size the median over repeats of the slowest rank's time; fitted latency + per byte;
- lookups per storage (dense-torch, and fbgemm's TBE where installed): forward, and backward with its fused SGD
  update, of one collection over a grid of tables, bags, keys per bag and widths; fitted fixed + per bag + per key +
  per byte of rows;
- dedup: torch.unique (sorted, with the inverse) per key; pool: index_add_ of rows per byte.

Every fit is a non-negative least squares on relative error (each measurement weighted by 1 / its time), and the
profile keeps the medians it was fitted to. Compute terms run with ``threads`` intra-op threads (the ranks' setting)."""
from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from impls.embark.calibrated import COLLECTIVES, DIRECTIONS, Line, Lookup, Profile

SIZES = tuple(2**k for k in (6, 10, 14, 16, 18, 20, 22, 24))  # bytes per rank
REPEATS = 7
WARMUP = 2


def fit_nonneg(rows: Sequence[Sequence[float]], y: Sequence[float]) -> list[float]:
    """Coefficients >= 0 minimizing the relative error of ``rows @ coef`` against ``y`` (y > 0)."""
    import numpy as np
    from scipy.optimize import nnls

    A, b = np.asarray(rows, dtype=float), np.asarray(y, dtype=float)
    w = 1.0 / np.maximum(b, 1e-12)
    coef, _ = nnls(A * w[:, None], b * w)
    return [float(c) for c in coef]


def _median_time(fn: Callable[[], Any], reps: int = REPEATS, warmup: int = WARMUP) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# --- collectives, in `world` processes ------------------------------------------------------------------------------
def _collective_rank(rank: int, world: int, init: str, backend: str, out) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dev = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(dev)
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=world)
    res: dict[str, list[tuple[float, float]]] = {"all_to_all": [], "all_reduce": [], "all_gather": []}
    for size in SIZES:
        n = max(world, size // 4 // world * world)
        x = torch.ones(n, device=dev)
        y = torch.empty_like(x)
        g = torch.empty(n * world, device=dev)
        ops = {"all_to_all": (lambda: dist.all_to_all_single(y, x), (world - 1) / world * n * 4),
               "all_reduce": (lambda: dist.all_reduce(x), n * 4),
               "all_gather": (lambda: dist.all_gather_into_tensor(g, x), n * 4)}
        for name, (op, nbytes) in ops.items():
            times = []
            for rep in range(WARMUP + REPEATS):
                dist.barrier()
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                t0 = time.perf_counter()
                op()
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                took = torch.tensor([time.perf_counter() - t0], device=dev)
                dist.all_reduce(took, op=dist.ReduceOp.MAX)  # the slowest rank's
                if rep >= WARMUP:
                    times.append(float(took))
            res[name].append((nbytes, statistics.median(times)))
    if rank == 0:
        out.put(res)
    dist.destroy_process_group()


def collectives(world: int, backend: str) -> dict[str, list[tuple[float, float]]]:
    """(bytes, median seconds) per size for each collective in ``world`` processes."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(_collective_rank, args=(world, f"file://{d}/rdzv", backend, out), nprocs=world,
                           start_method="spawn", join=True)
    return out.get()


# --- compute terms, in this process ----------------------------------------------------------------------------------
LOOKUP_GRID = [(T, d, h, B) for T in (1, 8) for d in (16, 128) for h in (1, 8) for B in (256, 2048)]
LOOKUP_ROWS = 20_000


def lookup_points(storage: str, device: str = "cpu") -> list[dict[str, float]]:
    """Forward and backward (+ fused SGD update) seconds of ``storage`` over LOOKUP_GRID."""
    import torch

    from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, get_impl
    from impls.embark.engines import STORAGES

    cls = get_impl(STORAGES[storage])
    gen = torch.Generator().manual_seed(0)
    out = []
    for T, d, h, B in LOOKUP_GRID:
        tables = [TableSpec(f"t{i}", LOOKUP_ROWS, d) for i in range(T)]
        # checked, as EMBark builds its stores (one native bounds_check pass; fbgemm then skips its own)
        coll = cls(tables, EmbeddingOptim("sgd", lr=0.01), None, device=device, check_bounds=True)
        n = T * B * h
        values = (torch.rand(n, generator=gen) ** 4 * LOOKUP_ROWS).long().clamp_(max=LOOKUP_ROWS - 1).to(device)
        sf = SparseFeatures(values, torch.arange(0, n + 1, h, device=device), B)
        grad = torch.randn(B, T * d, generator=gen).to(device)
        state: dict[str, Any] = {}

        def fwd():
            state["y"] = coll(sf)

        def bwd():
            fwd()
            state["y"].backward(grad)
            coll.optimizer_step()

        t_fwd = _median_time(fwd)
        t_bwd = max(_median_time(bwd) - t_fwd, 0.0)
        out.append({"bags": B * T, "keys": n, "row_bytes": n * d * 4, "fwd_s": t_fwd, "bwd_s": t_bwd})
    return out


def dedup_points() -> list[tuple[float, float]]:
    import torch

    gen = torch.Generator().manual_seed(1)
    pts = []
    for n in (1_000, 8_000, 64_000, 512_000):
        keys = (torch.rand(n, generator=gen) ** 4 * 1e6).long()
        pts.append((n, _median_time(lambda: torch.unique(keys, sorted=True, return_inverse=True))))
    return pts


def pool_points() -> list[tuple[float, float]]:
    import torch

    gen = torch.Generator().manual_seed(2)
    pts = []
    for n in (1_000, 8_000, 64_000):
        rows = torch.randn(n, 64, generator=gen)
        idx = torch.randint(0, max(1, n // 4), (n,), generator=gen)
        out = torch.zeros(max(1, n // 4), 64)
        pts.append((n * 64 * 4, _median_time(lambda: out.index_add_(0, idx, rows))))
    return pts


def copy_bandwidth(mb: int = 256) -> float:
    """Bytes read + written per second by a large tensor copy (the cpu-gloo HugeCTR profile's memory bandwidth)."""
    import torch

    a = torch.ones(mb * 2**20 // 4)
    b = torch.empty_like(a)
    return 2 * a.numel() * 4 / _median_time(lambda: b.copy_(a), reps=5, warmup=1)


def fit_line(points: Sequence[tuple[float, float]]) -> Line:
    return Line(*fit_nonneg([(1.0, x) for x, _ in points], [t for _, t in points]))


def fit_lookup(points: Sequence[dict[str, float]], key: str) -> Lookup:
    rows = [(1.0, p["bags"], p["keys"], p["row_bytes"]) for p in points]
    return Lookup(*fit_nonneg(rows, [max(p[key], 1e-7) for p in points]))


def calibrate(worlds: Sequence[int], threads: int, machine: str, backend: str, storages: Sequence[str],
              progress: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Measure and fit every term; the profile as a dict (Profile.to_dict, with the machine's fingerprint and the
    date beside it)."""
    import torch

    from reproduce.harness.machine import cores, fingerprint

    measured: dict[str, Any] = {"collectives": {}, "lookup": {}}
    fitted_c: dict[str, dict[int, Line]] = {name: {} for name in COLLECTIVES}
    for w in worlds:
        progress(f"collectives, {w} {backend} processes")
        res = collectives(w, backend)
        measured["collectives"][str(w)] = res
        for name, pts in res.items():
            fitted_c[name][w] = fit_line(pts)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        lookups = {}
        for s in storages:
            progress(f"lookups, {s}")
            pts = lookup_points(s, "cuda" if backend == "nccl" else "cpu")
            measured["lookup"][s] = pts
            lookups[s] = {k: fit_lookup(pts, f"{k}_s") for k in DIRECTIONS}
        progress("dedup and pooling")
        measured["dedup"], measured["pool"] = dedup_points(), pool_points()
        measured["copy_bytes_per_s"] = copy_bandwidth()
    finally:
        torch.set_num_threads(before)
    profile = Profile(machine, backend, cores(), threads, fitted_c, lookups, fit_line(measured["dedup"]),
                      fit_line(measured["pool"]), measured=measured)
    return {**profile.to_dict(), "env": fingerprint(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def profile_path(results: Path, machine: str, backend: str) -> Path:
    return Path(results) / "calibration" / machine / f"{backend}.json"

