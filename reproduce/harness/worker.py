"""Executes ONE run point in this process and writes exactly one record.

``python -m reproduce.harness.worker --point-json JSON --out RECORD`` is what `dlrmbench run` and sweeps
launch, one fresh process per point. The worker owns the clock (reproduce/harness/training.py: a benchmark's warm-up and
timed steps, or a training run's epochs), with the forward / backward / update phases timed separately
(CUDA-synchronized on GPU).
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import traceback
from pathlib import Path
from dataclasses import dataclass
from typing import Any

from impls.api import ShardedCollection
from reproduce.harness import allocator
from reproduce.harness.point import RunPoint
from reproduce.harness.fault import Fault
from reproduce.harness.fingerprint import loaded_modules
from reproduce.harness.lifeline import die_with_parent
from reproduce.harness.rank import Rank, rank_error_path, rank_of_env
from reproduce.harness.environment import environment
from reproduce.harness.record_store import ids_from_name, write_record
from reproduce.harness.records import Body, Record
from reproduce.harness.model_build import build_step
from reproduce.harness.training import Clock, bench_loop, final_score, train_loop


def _stats(xs: list[float]) -> dict[str, float]:
    qs = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3  # within the data
    return {"median": statistics.median(xs), "p25": qs[0], "p75": qs[2], "iqr": qs[2] - qs[0], "min": min(xs)}


@dataclass
class Site:
    """Where the point runs: its rank in a torchrun launch (None for one process), the world size and this process's
    global rank number, the device and its clock."""

    rank: Rank | None
    world: int
    rank_no: int
    device: Any
    clock: Clock
    fault: Fault

    def occupancy(self) -> dict[str, Any]:
        """How this run shares the machine: ranks on this node x threads per rank against its cores
        (``oversubscribed`` when they exceed them: the ranks then time each other's compute)."""
        import torch

        from reproduce.harness.machine import cores

        ranks = self.rank.ctx.local_world_size if self.rank else 1
        threads, n = torch.get_num_threads(), cores()
        return {"ranks_on_node": ranks, "threads_per_rank": threads, "cores": n, "oversubscribed": ranks * threads > n}

    @classmethod
    def join(cls, point: RunPoint, out: str | None) -> "Site":
        import torch

        rank = Rank.join(point, out)  # None for a single process
        world, rank_no = (rank.ctx.world_size, rank.ctx.rank) if rank else (1, 0)
        if point.threads or rank:
            torch.set_num_threads(point.threads or 1)
        device = rank.ctx.device if rank else torch.device(point.device)
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        return cls(rank, world, rank_no, device, Clock(sync), Fault.from_env(point.impl))


@dataclass
class Inputs:
    """The point's source and this rank's slices of the batches it steps on (a training run reads as it goes)."""

    source: Any
    global_batch: int
    batches: list
    evaluation: list
    held: Any
    seconds: float

    @classmethod
    def load(cls, point: RunPoint, site: Site) -> "Inputs":
        from impls.data.loader import BatchIterator
        from impls.data.sources import held_out, open_source

        source = open_source(point.data, seed=point.seed, **point.data_options)
        t0 = time.perf_counter()
        B = point.batch_size * site.world  # the global batch; this rank steps on its slice
        batches, evaluation, held = [], [], None
        if point.epochs:
            held, _ = held_out(point.data, source, **point.data_options)
        else:
            batches = [b.to(site.device) for b in BatchIterator(source, B, point.num_batches, rank=site.rank_no,
                                                              world_size=site.world)]
        if point.eval_batches and not point.epochs:
            if point.mode != "dlrm":
                raise ValueError("eval_batches needs mode='dlrm' (embedding-only runs have no predictions)")
            eval_source, start = held_out(point.data, source, **point.data_options)
            evaluation = [b.to(site.device) for b in BatchIterator(eval_source, B, point.eval_batches, start, site.rank_no,
                                                                 site.world)]
        return cls(source, B, batches, evaluation, held, time.perf_counter() - t0)


@dataclass
class MemoryBase:
    """Process memory just before the build: what the record's peaks are measured from. The window closes after the
    first step (`close`): its peak is the record's, and the timed steps then run with freed memory kept
    (allocator.py)."""

    rss: int
    peak_reset: bool
    cuda: int | None
    peak_rss: int | None = None  # read when the window closed

    @classmethod
    def take(cls, device) -> "MemoryBase":
        import torch

        from reproduce.harness.memory import reset_peak, rss_bytes

        gc.collect()
        allocator.release_free_memory()  # what setup freed goes back: the peak counts what the build and steps hold
        rss, peak_reset = rss_bytes(), reset_peak()
        cuda = None
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            cuda = torch.cuda.memory_allocated(device)
        return cls(rss, peak_reset, cuda)

    def close(self) -> None:
        """End the memory window (after the first step): keep its peak, then time under the retaining policy."""
        from reproduce.harness.memory import peak_rss_bytes

        if self.peak_rss is None:
            self.peak_rss = peak_rss_bytes()
            allocator.retain_freed_memory()

    def measured(self, emb, device) -> dict[str, Any]:
        import torch

        from reproduce.harness.memory import peak_rss_bytes

        window = "the build and the first step" if self.peak_rss is not None else "the build and every step"
        memory: dict[str, Any] = {
            "analytic": emb.memory_report().to_dict(),
            "peak_rss_delta_bytes": (self.peak_rss or peak_rss_bytes()) - self.rss if self.peak_reset else None,
            "peak_rss_method": f"VmHWM reset before the build, read after {window}, minus the RSS baseline"
            if self.peak_reset else "unsupported",
            "baseline_rss_bytes": self.rss,
        }
        if self.cuda is not None:
            memory["cuda_peak_bytes"] = torch.cuda.max_memory_allocated(device) - self.cuda
        return memory


def build(point: RunPoint, site: Site, data: Inputs):
    """The embedding collection (sharded over the ranks of a launch) and the training step around it."""
    stats = None
    if site.rank and site.rank_no == 0:
        stats = data.source.batch(0, data.global_batch).sparse  # greedy placement's sample
    step = build_step(point, data.source.tables, data.source.num_dense, site.device, site.rank, data.global_batch,
                      stats)
    return step.embeddings, step


def startup_seconds() -> float | None:
    """Seconds from the launcher starting this process to now (the interpreter, its imports; over ranks torchrun's
    start too); None without the launcher's clock."""
    import os

    from reproduce.harness.environment import LAUNCHED_ENV

    try:
        return max(0.0, time.time() - float(os.environ[LAUNCHED_ENV]))
    except (KeyError, ValueError):
        return None


def run_point(point: RunPoint, out: str | None = None, save: str | None = None,
              resume: str | None = None, startup_s: float | None = None) -> Record | None:
    """Measure (``epochs`` > 0: train) one point; return its record (rank 0; None on the other ranks): `ok`, or
    `diverged` with what was measured before the loss went bad (other exceptions propagate to the caller). A training
    run goes on from the model kept in ``resume`` and is kept in ``save`` at its end (kept_model.py)."""
    from impls.api import get_impl
    from reproduce.harness.memory import check_fits

    entered = time.perf_counter()
    if (save or resume) and (not point.epochs or point.world_size > 1 or point.mode != "dlrm"):
        raise ValueError("--save / --resume keep a model trained in one process (dlrm mode, `train` without "
                         "-n / --world-size): a sharded model is not kept yet")
    kept = None
    if resume:
        from reproduce.harness.kept_model import load

        kept = load(Path(resume))
    site = Site.join(point, out)
    data = Inputs.load(point, site)
    if kept is not None and kept.info["preparation_digest"] is not None:
        kept.check_data(Path(point.data))
    if site.rank is None:  # one process holds every table; over ranks, per-rank capacity is the sharding planners' job
        need = get_impl(point.impl).table_param_bytes(data.source.tables, point.impl_options)
        check_fits(sum(need), site.device, f"{point.impl} on {point.data}")
    base = MemoryBase.take(site.device)
    t0 = time.perf_counter()
    emb, step = build(point, site, data)
    build_s = time.perf_counter() - t0
    if point.epochs or point.warmup:
        site.clock.after_first = base.close  # the first step ends the memory window
    else:  # every step is timed: all of them run with freed memory kept, and the peak covers them all
        allocator.retain_freed_memory("every step (no warm-up: the peak covers the timed steps)")
    # warm-up, then the timed steps (a benchmark), or the epochs with their evaluations (a training run)
    if point.epochs:
        start, best = None, None
        if kept is not None:
            from reproduce.harness.kept_model import resume_state

            start, best = resume_state(kept, point, step)
        res = train_loop(point, step, data.source, data.held, site.rank, site.clock, site.fault, site.rank_no,
                         site.world, site.device, note=progress_note(point, site, data, out), start=start,
                         best_weights=best)
        if save and not res.diverged:
            from reproduce.harness.kept_model import save as keep

            keep(Path(save), point, data.source.tables, data.source.num_dense, point.data, step, res)
            res.info["saved"] = str(save)
        if resume:
            res.info["resumed_from"] = str(resume)
    else:
        res = bench_loop(point, step, data.batches, data.evaluation, site.rank, site.clock, site.fault, site.rank_no,
                         count_syncs=site.device.type == "cuda")
    looped = time.perf_counter()
    ran = loaded_modules()  # the code this rank executed, read at the end of the timed loop (fingerprint.py)
    setup = {"startup": startup_s, "data": data.seconds, "prepare": t0 - entered - data.seconds, "build": build_s,
             **loop_seconds(res, looped - t0 - build_s)}
    return make_record(point, site, data, emb, step, res, base, setup, ran, looped)


def loop_seconds(res, seconds: float) -> dict[str, float]:
    """The loop's wall time split: warm-up steps, timed steps, and the rest (evaluations, agreeing over ranks)."""
    warm = sum(res.loop.get("warmup_ms", [])) / 1e3 if res.loop else 0.0
    timed = sum(res.phases["total"]) / 1e3
    return {"warmup": warm, "timed": timed, "loop_other": max(0.0, seconds - warm - timed)}


def progress_note(point: RunPoint, site: Site, data: Inputs, out: str | None):
    """Rank 0's progress note for the launcher's bar (None without a record path, and on the other ranks)."""
    if out is None or site.rank_no != 0:
        return None
    from reproduce.harness.progress import ProgressNote

    return ProgressNote(out, point.epochs, data.source.num_rows // (point.batch_size * site.world))


def make_record(point: RunPoint, site: Site, data: Inputs, emb, step, res, base: MemoryBase,
                setup: dict[str, float | None], ran: list[str], looped: float) -> Record | None:
    """The run's record from what the loops measured: over ranks the measurements are combined on rank 0 first."""
    from reproduce.harness import fingerprint

    phases, losses = res.phases, res.losses
    memory = base.measured(emb, site.device)
    param_bytes = sum(p.numel() * p.element_size() for p in emb.parameters()) + sum(
        b.numel() * b.element_size() for b in emb.buffers())
    work = emb.work_report().to_dict()
    if point.epochs:
        evaluated = res.curve[-1] if res.curve and not res.diverged else None
        if evaluated and res.info.get("restored") is not None:  # early stop put the best weights back: the result
            evaluated = res.info["best"]
    else:
        evaluated = final_score(step, data.evaluation, site.rank, res)
    dist_part = None
    if site.rank:
        phases, losses, memory, param_bytes, work, dist_part, ran = site.rank.combine(
            phases, losses, memory, param_bytes, work, len(losses), ran)
        if site.rank_no != 0:
            return None
    tables = data.source.tables
    timed = bool(phases["total"])
    code = fingerprint.of_run(ran, point.to_dict(), build=fingerprint.build_info())
    setup = {**setup, "finish": time.perf_counter() - looped}  # scoring, combining ranks, the fingerprint
    body = Body(
        timing_ms={k: _stats(v) for k, v in phases.items()} if timed else None,
        iterations_ms=phases,
        samples_per_s=data.global_batch / (statistics.median(phases["total"]) / 1e3) if timed else None,
        loss=losses,
        memory=memory,
        param_bytes=param_bytes,
        work=work,
        setup_s=setup,
        tables={"count": len(tables), "rows": sum(t.num_embeddings for t in tables),
                "dense_bytes": sum(t.dense_bytes for t in tables)},
        env=environment(),
        code=code,
        occupancy=site.occupancy(),
        loop=res.loop or None,
        syncs=res.syncs,
        train=res.info or None,
        dist=with_sharding(dist_part, emb) if dist_part else None,
        eval=evaluated or None,
        eval_curve=res.curve or None,
    )
    return Record.measured(point.to_dict(), point.point_id, body, res.diverged or None)


def with_sharding(dist_part: dict[str, Any], emb) -> dict[str, Any]:
    """The distributed part of a record with where the tables live and, for EMBark, the plan and its predicted
    step; a system whose collectives bypass Comm reports no bytes or blocked time."""
    if isinstance(emb, ShardedCollection):
        for key, value in (("placement", emb.placement()), ("plan", emb.plan_info())):
            if value is not None:
                dist_part[key] = value
    if not emb.comm_counted:
        dist_part.update(comm_counted=False, comm_bytes_per_step=None, comm_blocked_ms=None)
    return dist_part


def main(argv: list[str] | None = None) -> int:
    started = startup_seconds()
    ap = argparse.ArgumentParser(description="run one dlrmbench point (internal; use `dlrmbench run`)")
    ap.add_argument("--point-json", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--save", default=None, help="keep the trained model in this folder")
    ap.add_argument("--resume", default=None, help="go on from the model kept in this folder")
    args = ap.parse_args(argv)
    die_with_parent()  # a rank under torchrun, or a worker whose launcher is killed outright, goes with it
    allocator.apply("eager", "memory window: the build, and the first step when a warm-up or training follows")
    point_dict = json.loads(args.point_json)
    rank_no = rank_of_env()
    try:
        record = run_point(RunPoint.from_dict(point_dict), args.out, args.save, args.resume, started)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a `failed` record
        traceback.print_exc()
        msg = str(exc).lower()
        oom = isinstance(exc, MemoryError) or "out of memory" in msg or "can't allocate memory" in msg
        status = "oom" if oom else "failed"
        reason = f"{type(exc).__name__}: {exc}" if rank_no is None else f"rank {rank_no}: {type(exc).__name__}: {exc}"
        if rank_no:  # not rank 0: the launcher reads this when rank 0 wrote no record
            rank_error_path(args.out, rank_no).write_text(f"{status}\n{reason}\n")
        else:
            write_record(args.out, Record.failed(point_dict, reason, status, ids_from_name(Path(args.out))[0]))
        return 1
    if record is not None:  # rank 0 (or the only process) writes the record
        write_record(args.out, record)
        return 0 if record.ok else 1
    return 0


def exit_now(code: int) -> None:
    """End a worker whose run ended well once its record is written: flush its output and leave without the
    interpreter's teardown (torch's module destructors and atexit handlers took ~0.6 s of every run's wall time,
    timing nothing). A failing rank exits as before: its peers fail moments after the rank that failed first, and
    torchrun names the root cause by who exited first."""
    import os

    if code != 0:
        sys.exit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
