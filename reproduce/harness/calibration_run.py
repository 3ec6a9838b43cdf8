"""The program behind `dlrmbench calibrate`: the terms of EMBark's calibrated cost model (impls/embark/calibrated.py), measured on this
machine and backend, fitted into its calibration profile (where the profile lies and which points plan on it:
calibration.py).

- collectives: all_to_all (x = bytes each rank sends the others), all_reduce (x = the tensor's bytes) and all_gather
  (x = each rank's bytes) at message sizes from 64 B to 16 MiB, in ``world`` processes of this backend (gloo on a
  CPU, NCCL on GPUs); per size the median over repeats of the slowest rank's time; fitted latency + per byte;
- lookups per storage (dense-torch, and fbgemm's TBE where installed): forward, and backward with its fused SGD
  update, of one collection over a grid of tables, bags, keys per bag and widths, on uniform and Zipf(1.1) ids;
  fitted fixed + per bag + per key + per distinct row + per byte of rows read + per byte of distinct rows + per byte
  of pooled output (dearer past a cache knee, chosen by the fit);
- dedup: torch.unique (sorted, with the inverse) per key; pool: index_add_ of rows per byte;
- the engine's own work, last: at each world size, EMBark's embedding-only step (the real engine, the default
  storage) for every distinct candidate plan of the planner's search on a few calibration workloads (tables alike
  within one, of different counts, widths, keys per sample, batches and id skew), the median step of the slowest
  rank measured, and the difference from what the terms above predict for that plan fitted on the engine's features
  (Tally.engine_features: routed keys, output bytes, bytes an owner returns, shards, UB keys and occurrence bytes, DP
  tables and bytes), with the scale of the lookup term inside those steps.

Every fit is a non-negative least squares on relative error (each measurement weighted by 1 / its time; lookups by
1 / its square root, so the large calls a step is made of weigh more), and the profile keeps the medians it was
fitted to. Compute terms run with ``threads`` intra-op threads (the ranks' setting)."""
from __future__ import annotations

import dataclasses
import statistics
import tempfile
import time
from typing import Any, Callable, Sequence

from impls.embark.calibrated import COLLECTIVES, DIRECTIONS, Engine, Line, Lookup, Profile
from reproduce.harness.allocator import retain_freed_memory

SIZES = tuple(2**k for k in (6, 10, 14, 16, 18, 20, 22, 24))  # bytes per rank
REPEATS = 7
WARMUP = 2


@dataclasses.dataclass(frozen=True)
class Effort:
    """How much a calibration measures: timed repeats and warm-up calls per measurement, the collectives' message
    sizes, the lookup grid (the small grid alone, or with the corners real workloads reach; both id skews either way),
    the engine's rounds and timed steps per round, and the size of the copy that measures memory bandwidth."""

    name: str
    repeats: int = REPEATS
    warmup: int = WARMUP
    sizes: tuple[int, ...] = SIZES
    corners: bool = True
    engine_rounds: int = 3  # the median round counts
    engine_steps: int = 6  # timed steps per round
    copy_mb: int = 256


FULL = Effort("full")
# a smoke profile in about a fifth of the time: 3 repeats, messages to 1 MiB, the small lookup grid (outputs to 8 MiB),
# one engine round of 3 steps; its terms are noisier and extrapolate worse (the profile says it is quick)
QUICK = Effort("quick", repeats=3, warmup=1, sizes=SIZES[:6], corners=False, engine_rounds=1, engine_steps=3,
               copy_mb=64)


def fit_nonneg(rows: Sequence[Sequence[float]], y: Sequence[float],
               scale: Sequence[float] | None = None) -> list[float]:
    """Coefficients >= 0 minimizing the error of ``rows @ coef`` against ``y`` relative to ``scale`` (default ``y``,
    then y > 0)."""
    import numpy as np
    from scipy.optimize import nnls

    A, b = np.asarray(rows, dtype=float), np.asarray(y, dtype=float)
    w = 1.0 / np.maximum(np.asarray(scale if scale is not None else y, dtype=float), 1e-12)
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
def _collective_rank(rank: int, world: int, init: str, backend: str, effort: Effort, out) -> None:
    import torch
    import torch.distributed as dist

    retain_freed_memory()
    torch.set_num_threads(1)
    dev = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(dev)
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=world)
    res: dict[str, list[tuple[float, float]]] = {"all_to_all": [], "all_reduce": [], "all_gather": []}
    for size in effort.sizes:
        n = max(world, size // 4 // world * world)
        x = torch.ones(n, device=dev)
        y = torch.empty_like(x)
        g = torch.empty(n * world, device=dev)
        ops = {"all_to_all": (lambda: dist.all_to_all_single(y, x), (world - 1) / world * n * 4),
               "all_reduce": (lambda: dist.all_reduce(x), n * 4),
               "all_gather": (lambda: dist.all_gather_into_tensor(g, x), n * 4)}
        for name, (op, nbytes) in ops.items():
            times = []
            for rep in range(effort.warmup + effort.repeats):
                dist.barrier()
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                t0 = time.perf_counter()
                op()
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                took = torch.tensor([time.perf_counter() - t0], device=dev)
                dist.all_reduce(took, op=dist.ReduceOp.MAX)  # the slowest rank's
                if rep >= effort.warmup:
                    times.append(float(took))
            res[name].append((nbytes, statistics.median(times)))
    if rank == 0:
        out.put(res)
    dist.destroy_process_group()


def collectives(world: int, backend: str, effort: Effort = FULL) -> dict[str, list[tuple[float, float]]]:
    """(bytes, median seconds) per size for each collective in ``world`` processes."""
    from reproduce.harness.rank_processes import rank_queue, start_ranks

    out = rank_queue()
    with tempfile.TemporaryDirectory() as d:
        start_ranks(_collective_rank, (world, f"file://{d}/rdzv", backend, effort, out), world)
    return out.get()


# --- compute terms, in this process ----------------------------------------------------------------------------------
# (tables, width, keys per bag, bags per table): a small grid, then the corners real workloads reach - many wide
# tables with short bags (a pooled output of tens of MB, past the caches) and long bags (tens of keys per bag); each
# with ids uniform over the rows and Zipf(1.1) through a fixed permutation (hot rows stay cached)
LOOKUP_SMALL_GRID = [(T, d, h, B) for T in (1, 8) for d in (16, 128) for h in (1, 8) for B in (256, 2048)]
LOOKUP_CORNERS = [(64, 128, 1, 2048), (64, 64, 2, 1024), (32, 128, 4, 2048), (128, 32, 1, 2048),
                  (8, 64, 64, 1024), (16, 128, 32, 512), (1, 64, 128, 2048), (32, 32, 16, 2048)]
LOOKUP_GRID = LOOKUP_SMALL_GRID + LOOKUP_CORNERS
LOOKUP_ROWS = 20_000
LOOKUP_ALPHAS = (0.0, 1.1)


def lookup_points(storage: str, device: str = "cpu", effort: Effort = FULL) -> list[dict[str, float]]:
    """Forward and backward (+ fused SGD update) seconds of ``storage`` over LOOKUP_GRID x LOOKUP_ALPHAS (the small
    grid only where ``effort`` leaves the corners out)."""
    import numpy as np
    import torch

    from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, get_impl
    from impls.data.synthetic import power_law_ranks
    from impls.embark.engines import STORAGES

    cls = get_impl(STORAGES[storage])
    gen = torch.Generator().manual_seed(0)
    rng = np.random.default_rng(0)
    perm = rng.permutation(LOOKUP_ROWS)
    out = []
    grid = LOOKUP_GRID if effort.corners else LOOKUP_SMALL_GRID
    for (T, d, h, B), alpha in ((g, a) for g in grid for a in LOOKUP_ALPHAS):
        tables = [TableSpec(f"t{i}", LOOKUP_ROWS, d) for i in range(T)]
        # checked, as EMBark builds its stores (one native bounds_check pass; fbgemm then skips its own)
        coll = cls(tables, EmbeddingOptim("sgd", lr=0.01), None, device=device, check_bounds=True)
        n = T * B * h
        ids = perm[power_law_ranks(rng, LOOKUP_ROWS, alpha, n)]
        unique = sum(len(np.unique(ids[t * B * h:(t + 1) * B * h])) for t in range(T))
        values = torch.from_numpy(ids).long().to(device)
        sf = SparseFeatures(values, torch.arange(0, n + 1, h, device=device), B)
        grad = torch.randn(B, T * d, generator=gen).to(device)
        state: dict[str, Any] = {}

        def fwd():
            state["y"] = coll(sf)

        def bwd():
            fwd()
            state["y"].backward(grad)
            coll.optimizer_step()

        t_fwd = _median_time(fwd, effort.repeats, effort.warmup)
        t_bwd = max(_median_time(bwd, effort.repeats, effort.warmup) - t_fwd, 0.0)
        out.append({"alpha": alpha, "bags": B * T, "keys": n, "unique": unique, "row_bytes": n * d * 4,
                    "unique_bytes": unique * d * 4, "out_bytes": B * T * d * 4, "fwd_s": t_fwd, "bwd_s": t_bwd})
        del coll, state
    return out


def dedup_points(effort: Effort = FULL) -> list[tuple[float, float]]:
    import torch

    gen = torch.Generator().manual_seed(1)
    pts = []
    for n in (1_000, 8_000, 64_000, 512_000):
        keys = (torch.rand(n, generator=gen) ** 4 * 1e6).long()
        pts.append((n, _median_time(lambda: torch.unique(keys, sorted=True, return_inverse=True), effort.repeats,
                                    effort.warmup)))
    return pts


def pool_points(effort: Effort = FULL) -> list[tuple[float, float]]:
    import torch

    gen = torch.Generator().manual_seed(2)
    pts = []
    for n in (1_000, 8_000, 64_000):
        rows = torch.randn(n, 64, generator=gen)
        idx = torch.randint(0, max(1, n // 4), (n,), generator=gen)
        out = torch.zeros(max(1, n // 4), 64)
        pts.append((n * 64 * 4, _median_time(lambda: out.index_add_(0, idx, rows), effort.repeats, effort.warmup)))
    return pts


def copy_bandwidth(mb: int = 256) -> float:
    """Bytes read + written per second by a large tensor copy (the cpu-gloo HugeCTR profile's memory bandwidth)."""
    import torch

    a = torch.ones(mb * 2**20 // 4)
    b = torch.empty_like(a)
    return 2 * a.numel() * 4 / _median_time(lambda: b.copy_(a), reps=5, warmup=1)


# --- the engine's own work, in `world` processes ---------------------------------------------------------------------
# (tables, rows, width, keys per sample, local batch, Zipf exponent of the ids: 0 uniform, 1.1 EMBark's): tables alike
# within a workload; from a few narrow tables to hundreds of wide ones (outputs of 32k floats per sample) and to
# thousands of keys per sample
ENGINE_WORKLOADS = ((8, 4000, 64, 1, 256, 0.0), (26, 4000, 128, 8, 256, 1.1), (64, 2000, 32, 2, 256, 0.0),
                    (16, 4000, 16, 20, 512, 0.0), (32, 4000, 64, 4, 1024, 0.0), (128, 2000, 128, 2, 256, 1.1),
                    (48, 4000, 64, 40, 256, 1.1), (256, 2000, 128, 1, 256, 1.1), (64, 4000, 64, 64, 256, 1.1))


def _engine_rank(rank: int, world: int, init: str, backend: str, threads: int, profile: dict[str, Any],
                 storage: str, workloads: Sequence[tuple[int, ...]], effort: Effort, out) -> None:
    import torch

    from impls.api import EmbeddingOptim
    from impls.data.loader import rank_slice
    from impls.data.sources import open_source
    from impls.embark.calibrated import table_loads
    from impls.embark.collection import EmbarkCollection
    from impls.embark.cost import HARDWARE, CostModel
    from impls.embark.search import Search, candidates
    from impls.model.train import TrainStep
    from impls.sharding.comm import Comm
    from impls.sharding.context import DistContext

    retain_freed_memory()
    torch.set_num_threads(threads)
    dev = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    ctx = DistContext.init(rank, world, init, backend=backend, device=dev, timeout_s=600)
    comm = Comm(ctx)
    primitive = Profile.from_dict(profile)
    rows = []
    try:
        for T, R, d, h, b, alpha in workloads:
            source = open_source("uniform", num_tables=T, rows=R, dim=d, hotness=h, alpha=alpha, seed=T)
            tables, B = source.tables, b * world
            batches = [source.batch(k, B) for k in range(2)]
            model = CostModel(HARDWARE["cpu-gloo" if backend == "gloo" else "dgx-h100"], world, world, B)
            search = Search(tables, table_loads(tables, B, world, batches[0].sparse), primitive, model, storage)
            seen = set()
            for plan in candidates(tables, search):
                key = (plan.dp, plan.mp)
                if key in seen or search.score(plan) is None:
                    continue
                seen.add(key)
                coll = EmbarkCollection(tables, EmbeddingOptim("sgd", lr=0.01), ctx, plan=plan, comm=comm,
                                        storage=storage, device=dev, check_bounds=True, seed=0)
                step = TrainStep(coll, mode="embedding-only", comm=comm, global_batch=B)
                local = [rank_slice(x, rank, world).to(dev) for x in batches]
                for k in range(effort.warmup + 1):
                    step(local[k % 2])
                times = []
                for _ in range(effort.engine_rounds):
                    torch.distributed.barrier()
                    if dev.type == "cuda":
                        torch.cuda.synchronize(dev)
                    t0 = time.perf_counter()
                    for k in range(effort.engine_steps):
                        step(local[k % 2])
                    if dev.type == "cuda":
                        torch.cuda.synchronize(dev)
                    took = torch.tensor([(time.perf_counter() - t0) / effort.engine_steps], device=dev)
                    torch.distributed.all_reduce(took, op=torch.distributed.ReduceOp.MAX)
                    times.append(float(took))
                tally = search.tally(plan)
                prim = tally.breakdown()
                rows.append({"workload": [T, R, d, h, b, alpha], "plan": plan.name,
                             "measured_s": statistics.median(times), "primitive_s": prim.total_s,
                             "lookup_s": prim.lookup_s,
                             "features": list(tally.engine_features())})
                del step, coll
        if rank == 0:
            out.put(rows)
    finally:
        ctx.close()


def engine_points(world: int, backend: str, threads: int, profile: dict[str, Any], storage: str,
                  workloads: Sequence[tuple[int, ...]] = ENGINE_WORKLOADS, effort: Effort = FULL) -> list[dict]:
    """Every distinct candidate plan of the calibration workloads at ``world``: its measured step (median of rounds,
    slowest rank), what the primitive terms of ``profile`` predict for it, and its engine features."""
    from reproduce.harness.rank_processes import rank_queue, start_ranks

    out = rank_queue()
    with tempfile.TemporaryDirectory() as d:
        start_ranks(_engine_rank, (world, f"file://{d}/rdzv", backend, threads, profile, storage, workloads, effort,
                                   out), world)
    return out.get()


def fit_engine(points: Sequence[dict[str, Any]]) -> tuple[Engine, dict[str, float]]:
    """The engine term fitted to what each measured step leaves beyond the primitive terms, together with the scale
    of their lookup term inside those steps (error relative to the measured step), and how well the whole
    prediction then matches the measured steps: median and largest relative error."""
    coef = fit_nonneg([(1.0, p["lookup_s"], *p["features"]) for p in points],
                      [p["measured_s"] - (p["primitive_s"] - p["lookup_s"]) for p in points],
                      [p["measured_s"] for p in points])
    engine = Engine(coef[0], *coef[2:], lookup_scale=coef[1])
    errs = sorted(abs(p["primitive_s"] + (engine.lookup_scale - 1) * p["lookup_s"] + engine.at(*p["features"])
                      - p["measured_s"]) / p["measured_s"] for p in points)
    return engine, {"plans": len(errs), "median_rel_err": statistics.median(errs), "max_rel_err": errs[-1]}


def fit_line(points: Sequence[tuple[float, float]]) -> Line:
    return Line(*fit_nonneg([(1.0, x) for x, _ in points], [t for _, t in points]))


KNEES = tuple(2**k for k in range(19, 27))  # 512 KiB .. 64 MiB: where a pooled output stops fitting the caches


def fit_lookup(points: Sequence[dict[str, float]], key: str) -> Lookup:
    """The Lookup terms fitted to ``points`` (non-negative; error relative to the square root of each time: the large
    calls a step is made of weigh more than under relative error, the small ones still count), with the cache knee
    among KNEES that fits best."""
    import numpy as np

    y = [max(p[key], 1e-7) for p in points]
    scale = [t**0.5 for t in y]
    best = None
    for knee in KNEES:
        rows = [Lookup.features(p["bags"], p["keys"], p["unique"], p["row_bytes"], p["unique_bytes"], p["out_bytes"],
                                knee) for p in points]
        coef = fit_nonneg(rows, y, scale)
        err = float(np.sum(((np.asarray(rows) @ np.asarray(coef) - y) / scale) ** 2))
        if best is None or err < best[0] * (1 - 1e-9):
            best = (err, Lookup(*coef, cache_bytes=float(knee)))
    return best[1]


def calibrate(worlds: Sequence[int], threads: int, machine: str, backend: str, storages: Sequence[str],
              engine_workloads: int | None = None, progress: Callable[[str], None] = lambda s: None,
              effort: Effort = FULL) -> dict[str, Any]:
    """Measure and fit every term; the profile as a dict (Profile.to_dict, with the machine's fingerprint, the date
    and the effort beside it)."""
    import torch

    from impls.embark.engines import default_storage
    from reproduce.harness.machine import cores, fingerprint

    allocator = retain_freed_memory()  # this process times the lookups; every rank it spawns applies it too
    began = time.monotonic()
    measured: dict[str, Any] = {"collectives": {}, "lookup": {}}
    fitted_c: dict[str, dict[int, Line]] = {name: {} for name in COLLECTIVES}
    for w in worlds:
        progress(f"collectives, {w} {backend} processes")
        res = collectives(w, backend, effort)
        measured["collectives"][str(w)] = res
        for name, pts in res.items():
            fitted_c[name][w] = fit_line(pts)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        lookups = {}
        for s in storages:
            progress(f"lookups, {s}")
            pts = lookup_points(s, "cuda" if backend == "nccl" else "cpu", effort)
            measured["lookup"][s] = pts
            lookups[s] = {k: fit_lookup(pts, f"{k}_s") for k in DIRECTIONS}
        progress("dedup and pooling")
        measured["dedup"], measured["pool"] = dedup_points(effort), pool_points(effort)
        measured["copy_bytes_per_s"] = copy_bandwidth(effort.copy_mb)
    finally:
        torch.set_num_threads(before)
    primitive = Profile(machine, backend, cores(), threads, fitted_c, lookups, fit_line(measured["dedup"]),
                        fit_line(measured["pool"]))
    storage = default_storage()
    workloads = ENGINE_WORKLOADS[:engine_workloads] if engine_workloads else ENGINE_WORKLOADS
    engines, fit = {}, {}
    measured["engine"] = {}
    for w in worlds:
        progress(f"the engine's own work, {w} {backend} processes ({storage} storage, "
                 f"{len(workloads)} workloads x their candidate plans)")
        pts = engine_points(w, backend, threads, primitive.to_dict(), storage, workloads, effort)
        measured["engine"][str(w)] = pts
        engines[w], fit[str(w)] = fit_engine(pts)
    measured["engine_fit"], measured["engine_storage"] = fit, storage
    measured["engine_workloads"] = [list(w) for w in workloads]
    profile = dataclasses.replace(primitive, engine=engines, measured=measured)
    return {**profile.to_dict(), "env": fingerprint(), "allocator": allocator, "effort": dataclasses.asdict(effort),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "wall_s": time.monotonic() - began}
