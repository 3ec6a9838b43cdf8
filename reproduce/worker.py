"""Executes ONE run point in this process and writes exactly one record.

``python -m reproduce.worker --point-json JSON --out RECORD`` is what `dlrmbench run` and sweeps
launch, one fresh process per point. The worker owns the clock: warm-up, then timed iterations with the
forward / backward / update phases timed separately (CUDA-synchronized on GPU).
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import sys
import time
import traceback
from typing import Any

from reproduce.config import RunPoint
from reproduce.fault import Fault
from reproduce.lifeline import die_with_parent
from reproduce.rank import Rank, rank_error_path, rank_of_env
from reproduce.records import base_record, environment, write_record


class Diverged(RuntimeError):
    """The training loss became NaN or infinite: recorded as `diverged`, with the step."""


def _stats(xs: list[float]) -> dict[str, float]:
    qs = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3  # within the data
    return {"median": statistics.median(xs), "p25": qs[0], "p75": qs[2], "iqr": qs[2] - qs[0], "min": min(xs)}


def _auc_logloss(step, batches, rank: "Rank | None" = None) -> dict[str, float]:
    import numpy as np
    import torch
    from sklearn.metrics import log_loss, roc_auc_score

    probs, labels = [], []
    for b in batches:
        probs.append(step.predict(b).cpu())
        labels.append(b.labels.cpu())
    if rank is not None:  # every rank predicts its slice; all slices are scored together
        parts = rank.gather((torch.cat(probs), torch.cat(labels)))
        probs, labels = [pr for pr, _ in parts], [la for _, la in parts]
    p = torch.cat(probs).double().numpy()
    y = torch.cat(labels).numpy()
    if len(np.unique(y)) < 2:
        return {"auc": float("nan"), "logloss": float(log_loss(y, p, labels=[0, 1]))}
    return {"auc": float(roc_auc_score(y, p)), "logloss": float(log_loss(y, p, labels=[0, 1]))}


def run_point(point: RunPoint, out: str | None = None) -> dict[str, Any]:
    """Measure one point; return its `ok` record (exceptions propagate to the caller)."""
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
    batches = [b.to(device) for b in BatchIterator(source, B, point.num_batches, rank=me, world_size=G)]
    evaluation = []
    if point.eval_batches:
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
                     comm=rank.comm if rank else None, global_batch=B)
    if step.model is not None:
        step.model.to(device)
    build_s = time.perf_counter() - t0

    phases: dict[str, list[float]] = {"forward": [], "backward": [], "update": [], "total": []}
    losses = []
    curve: list[dict[str, float]] = []
    for it in range(point.warmup + point.iters):
        batch = batches[it % len(batches)]
        if fault:
            fault.at_step(me, it)
        if rank:
            rank.at_step(it, point.warmup)
        sync()
        a = time.perf_counter()
        step.prefetch(batches[(it + 1) % len(batches)])  # a no-op unless the system pipelines its loads
        loss = step.forward(batch)
        sync()
        b = time.perf_counter()
        step.backward(loss)
        sync()
        c = time.perf_counter()
        step.update()
        sync()
        d = time.perf_counter()
        value = float(loss.detach())  # after the timed window
        if not math.isfinite(value):
            raise Diverged(f"the loss became {value} at step {it + 1} (warm-up {point.warmup} + {point.iters} timed "
                           f"steps); lower the learning rate or check the inputs")
        if it >= point.warmup:
            for k, v in zip(phases, (b - a, c - b, d - c, d - a)):
                phases[k].append(v * 1e3)
            losses.append(value)
        if point.eval_every and (it + 1) % point.eval_every == 0:  # outside the timed window
            curve.append({"step": it + 1, **_auc_logloss(step, evaluation)})

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
    evaluated = _auc_logloss(step, evaluation, rank) if evaluation else None
    dist_part = None
    if rank:
        phases, losses, memory, param_bytes, work, dist_part = rank.combine(
            phases, losses, memory, param_bytes, work, point.iters)
        if me != 0:
            return {}
    median_total = statistics.median(phases["total"])
    record = base_record(point.to_dict(), "ok")
    record.update(
        {
            "timing_ms": {k: _stats(v) for k, v in phases.items()},
            "iterations_ms": phases,
            "samples_per_s": B / (median_total / 1e3),
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
    if dist_part:
        record["dist"] = dist_part
        if hasattr(emb, "placement"):
            dist_part["placement"] = emb.placement()
        if hasattr(emb, "plan_info"):  # EMBark: the plan and its predicted embedding step
            dist_part["plan"] = emb.plan_info
        if not emb.comm_counted:  # its collectives bypass Comm: no bytes or blocked time to report
            dist_part.update(comm_counted=False, comm_bytes_per_step=None, comm_blocked_ms=None)
    if evaluated:
        record["eval"] = evaluated
    if curve:
        record["eval_curve"] = curve
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
        status = "diverged" if isinstance(exc, Diverged) else "oom" if oom else "failed"
        reason = f"{type(exc).__name__}: {exc}" if me is None else f"rank {me}: {type(exc).__name__}: {exc}"
        if me:  # not rank 0: the launcher reads this when rank 0 wrote no record
            rank_error_path(args.out, me).write_text(f"{status}\n{reason}\n")
        else:
            write_record(args.out, base_record(point_dict, status, reason))
        return 1
    if record:  # rank 0 (or the only process) writes the record
        write_record(args.out, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
