"""Executes ONE run point in this process and writes exactly one record.

``python -m reproduce.worker --point-json JSON --out RECORD`` is what `dlrmbench run` and sweeps
launch, one fresh process per point. The worker owns the clock (reproduce/training.py: a benchmark's warm-up and
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
from typing import Any

from impls.api import ShardedCollection
from reproduce.config import RunPoint
from reproduce.fault import Fault
from reproduce.lifeline import die_with_parent
from reproduce.rank import Rank, rank_error_path, rank_of_env
from reproduce.records import base_record, environment, write_record
from reproduce.training import Clock, bench_loop, final_score, train_loop


def _stats(xs: list[float]) -> dict[str, float]:
    qs = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3  # within the data
    return {"median": statistics.median(xs), "p25": qs[0], "p75": qs[2], "iqr": qs[2] - qs[0], "min": min(xs)}


def run_point(point: RunPoint, out: str | None = None) -> dict[str, Any]:
    """Measure (``epochs`` > 0: train) one point; return its record: `ok`, or `diverged` with what was measured
    before the loss went bad (other exceptions propagate to the caller)."""
    import torch

    from impls.api import EmbeddingOptim, get_impl
    from impls.data.loader import BatchIterator
    from impls.data.sources import held_out, open_source
    from impls.model.train import TrainStep
    from reproduce.memory import check_fits, peak_rss_bytes, reset_peak, rss_bytes

    rank = Rank.join(point, out)  # None for a single process
    G, me = (rank.ctx.world_size, rank.ctx.rank) if rank else (1, 0)
    fault = Fault.from_env(point.impl)
    if point.threads or rank:
        torch.set_num_threads(point.threads or 1)
    device = rank.ctx.device if rank else torch.device(point.device)
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    source = open_source(point.data, seed=point.seed, **point.data_options)
    tables = source.tables
    t0 = time.perf_counter()
    B = point.batch_size * G  # the global batch; this rank steps on its slice
    batches, evaluation, held = [], [], None
    if point.epochs:  # a training run reads its batches as it goes
        held, _ = held_out(point.data, source, **point.data_options)
    else:
        batches = [b.to(device) for b in BatchIterator(source, B, point.num_batches, rank=me, world_size=G)]
    if point.eval_batches and not point.epochs:
        if point.mode != "dlrm":
            raise ValueError("eval_batches needs mode='dlrm' (embedding-only runs have no predictions)")
        eval_source, start = held_out(point.data, source, **point.data_options)
        evaluation = [b.to(device) for b in BatchIterator(eval_source, B, point.eval_batches, start, me, G)]
    gen_s = time.perf_counter() - t0

    cls = get_impl(point.impl)
    if rank is None:  # one process holds every table; over ranks, per-rank capacity is the sharding planners' job
        check_fits(sum(cls.table_param_bytes(tables, point.impl_options)), device, f"{point.impl} on {point.data}")
    gc.collect()
    baseline = rss_bytes()
    peak_reset = reset_peak()
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
        cuda_base = torch.cuda.memory_allocated(device)
    t0 = time.perf_counter()
    optim = EmbeddingOptim(point.optimizer, lr=point.lr)
    common = dict(device=device, check_bounds=point.check_bounds, seed=point.seed, **point.impl_options)
    if rank:
        from impls.sharding.build import build_sharded

        stats = source.batch(0, B).sparse if me == 0 else None  # greedy placement's sampled batch
        emb = build_sharded(cls, tables, optim, rank.ctx, rank.comm, stats=stats, **common)
    else:
        emb = cls(tables, optim, **common)
    step = TrainStep(emb, mode=point.mode, num_dense=source.num_dense, seed=point.seed,
                     comm=rank.comm if rank else None, global_batch=B, mlp_optimizer=point.mlp_optimizer,
                     mlp_lr=point.mlp_lr, bottom=point.bottom, top=point.top, interaction=point.interaction)
    if step.model is not None:
        step.model.to(device)
    build_s = time.perf_counter() - t0

    clock = Clock(sync)
    if point.epochs:
        res = train_loop(point, step, source, held, rank, clock, fault, me, G, device)
    else:
        res = bench_loop(point, step, batches, evaluation, rank, clock, fault, me)
    phases, losses = res.phases, res.losses

    memory: dict[str, Any] = {
        "analytic": emb.memory_report().to_dict(),
        "peak_rss_delta_bytes": peak_rss_bytes() - baseline if peak_reset else None,
        "peak_rss_method": "VmHWM reset before build, minus RSS baseline" if peak_reset else "unsupported",
        "baseline_rss_bytes": baseline,
    }
    if cuda:
        memory["cuda_peak_bytes"] = torch.cuda.max_memory_allocated(device) - cuda_base
    param_bytes = sum(p.numel() * p.element_size() for p in emb.parameters()) + sum(
        b.numel() * b.element_size() for b in emb.buffers()
    )
    work = emb.work_report().to_dict()
    if point.epochs:
        evaluated = res.curve[-1] if res.curve and not res.diverged else None
    else:
        evaluated = final_score(step, evaluation, rank, res)
    dist_part = None
    if rank:
        phases, losses, memory, param_bytes, work, dist_part = rank.combine(
            phases, losses, memory, param_bytes, work, len(losses))
        if me != 0:
            return {}
    record = base_record(point.to_dict(), "diverged" if res.diverged else "ok", res.diverged)
    timed = bool(phases["total"])
    record.update(
        {
            "timing_ms": {k: _stats(v) for k, v in phases.items()} if timed else None,
            "iterations_ms": phases,
            "samples_per_s": B / (statistics.median(phases["total"]) / 1e3) if timed else None,
            "loss": losses,
            "memory": memory,
            "param_bytes": param_bytes,
            "work": work,
            "setup_s": {"data": gen_s, "build": build_s},
            "tables": {"count": len(tables), "rows": sum(t.num_embeddings for t in tables),
                       "dense_bytes": sum(t.dense_bytes for t in tables)},
            "env": environment(),
        }
    )
    if res.info:
        record["train"] = res.info
    if dist_part:
        record["dist"] = dist_part
        if isinstance(emb, ShardedCollection):  # where tables live; EMBark: the plan and its predicted step
            for key, value in (("placement", emb.placement()), ("plan", emb.plan_info())):
                if value is not None:
                    dist_part[key] = value
        if not emb.comm_counted:  # its collectives bypass Comm: no bytes or blocked time to report
            dist_part.update(comm_counted=False, comm_bytes_per_step=None, comm_blocked_ms=None)
    if evaluated:
        record["eval"] = evaluated
    if res.curve:
        record["eval_curve"] = res.curve
    return record


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="run one dlrmbench point (internal; use `dlrmbench run`)")
    ap.add_argument("--point-json", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    die_with_parent()  # a rank under torchrun, or a worker whose launcher is killed outright, goes with it
    point_dict = json.loads(args.point_json)
    me = rank_of_env()
    try:
        record = run_point(RunPoint.from_dict(point_dict), args.out)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a `failed` record
        traceback.print_exc()
        msg = str(exc).lower()
        oom = isinstance(exc, MemoryError) or "out of memory" in msg or "can't allocate memory" in msg
        status = "oom" if oom else "failed"
        reason = f"{type(exc).__name__}: {exc}" if me is None else f"rank {me}: {type(exc).__name__}: {exc}"
        if me:  # not rank 0: the launcher reads this when rank 0 wrote no record
            rank_error_path(args.out, me).write_text(f"{status}\n{reason}\n")
        else:
            write_record(args.out, base_record(point_dict, status, reason))
        return 1
    if record:  # rank 0 (or the only process) writes the record
        write_record(args.out, record)
        return 0 if record["status"] == "ok" else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
