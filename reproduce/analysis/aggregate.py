"""Records -> flat tables: repeats.csv (one row per run, the A/A control's twin runs included) and summary.csv (one row
per point, the twin left out: medians over its rounds with their order-statistic intervals, of the step time,
throughput and memory, and the speedup over the baseline paired by round: stats.py)."""
from __future__ import annotations

import io

import json
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from impls.data.safe_write import refuse_symlink
from reproduce.harness.point import point_defaults
from reproduce.harness.record_store import records_in
from reproduce.harness.records import Record
from reproduce.analysis.stats import NAN3, by_round, median_interval, paired_ratio
from reproduce.harness.evidence import is_twin_label

KEYS = ["data", "max_rows", "rows", "batch_size", "mode", "optimizer", "world_size"]


def flatten(record: Record | dict[str, Any]) -> dict[str, Any]:
    """One row of repeats.csv: a record's point and what it measured, read through its typed body."""
    rec = record if isinstance(record, Record) else Record.from_dict(record)
    p, b = {**point_defaults(), **rec.point}, rec.body  # a field an older record lacks: at RunPoint's default
    env = rec.env
    over = (b.occupancy or {}).get("oversubscribed")
    if over is None:  # a record from before occupancy: ranks per node x threads against the machine's cores
        cores = (env.get("machine") or {}).get("cores") or env.get("cpu_count")
        ranks = int(p["world_size"]) // int(p["nnodes"] or 1)
        over = ranks * int(p["threads"] or env.get("torch_threads") or 1) > cores if cores else None
    row: dict[str, Any] = {
        "point_id": rec.point_id,
        "repeat": rec.repeat,
        "machine": env.get("machine_slug"),
        "git_sha": env.get("git_sha"),
        "git_dirty": env.get("git_dirty"),
        "code": (b.code or {}).get("digest"),
        "oversubscribed": over,
        "cores": (env.get("machine") or {}).get("cores") or env.get("cpu_count"),
        "schedule": env.get("schedule", "solo"),  # "duet": run beside another run, on half the cores
        "timed_steps": (b.loop or {}).get("timed_steps"),
        "impl": p["impl"],
        "label": p["label"] or p["impl"],
        "twin": int(p["twin"]),  # the A/A control's second copy (left out of every table but the control's)
        "data": p["data"],
        "batch_size": p["batch_size"],
        "device_kind": "cuda" if str(p["device"]).startswith("cuda") else "cpu",
        "mode": p["mode"],
        "optimizer": p["optimizer"],
        "iters": p["iters"],
        "max_rows": p["data_options"].get("max_rows", 0),  # 0: the preset's table sizes
        "rows": p["data_options"].get("rows", 0),  # 0: the preset's own row counts
        "seed": p["seed"],
        "budget": p["budget"],  # the fraction of the dense tables' bytes it was sized to (0: none)
        "world_size": p["world_size"],
        "global_batch": p["batch_size"] * p["world_size"],
        "status": rec.status.value,
        "reason": rec.reason,
        "wall_s": rec.wall_s,  # the run's process, start to record (launch, data, build, steps)
    }
    for part, seconds in (b.setup_s or {}).items():  # where the wall time went (worker.py: startup ... finish)
        row[f"{part}_s"] = seconds
    if b.timing_ms:  # ok, or diverged after some timed steps
        for phase, s in b.timing_ms.items():
            row[f"{phase}_ms"] = s["median"]
            row[f"{phase}_iqr_ms"] = s["iqr"]
        mem = b.memory
        row["samples_per_s"] = b.samples_per_s
        row["peak_rss_delta_bytes"] = mem.get("peak_rss_delta_bytes")
        row["cuda_peak_bytes"] = mem.get("cuda_peak_bytes")
        row["analytic_bytes"] = mem["analytic"]["total"]
        row["param_bytes"] = b.param_bytes  # the collection's tensors: weights, optimizer state, buffers
        row["weight_bytes"] = mem["analytic"].get("params")  # the embedding weights alone (what a budget sizes)
        row["dense_bytes"] = b.tables["dense_bytes"]
        work = b.work
        row["nnz"] = work["nnz"]
        for key in ("unique", "e1", "gemms", "flops", "intermediate_bytes"):
            row[key] = work.get(key)
        for key in ("flops_fwd", "flops_bwd", "micro_batches"):
            row[key] = work.get("extra", {}).get(key)
        d = b.dist
        if d and d.get("comm_blocked_ms") is not None:  # the busiest rank's exposed communication per step
            row["comm_blocked_ms"] = d["comm_blocked_ms"]
            # of medians, so approximate: what is neither blocked communication nor the update phase
            row["compute_ms"] = row["total_ms"] - d["comm_blocked_ms"] - row["update_ms"]
            row["comm_share"] = d["comm_blocked_ms"] / row["total_ms"] if row.get("total_ms") else None
        if d and d.get("plan"):
            row["plan_strategy"] = d["plan"].get("strategy")
            row["predicted_step_ms"] = d["plan"].get("predicted_step_ms")
            if row["predicted_step_ms"] is not None:  # older records: HugeCTR's cost function with a hardware spec
                row["predicted_by"] = d["plan"].get("predicted_by", "hugectr")
            terms = d["plan"].get("predicted") or {}
            if terms:  # the calibrated breakdown, to hold against the measured comm_blocked_ms / compute_ms
                row["predicted_comm_ms"] = sum(terms.get(k, 0.0) for k in ("comm_latency_ms", "comm_bytes_ms",
                                                                           "dp_allreduce_ms"))
                row["predicted_compute_ms"] = sum(terms.get(k, 0.0) for k in ("lookup_ms", "dedup_ms", "pool_ms",
                                                                              "engine_ms"))
            row["plan_shards"] = d["plan"].get("shards")
            if d["plan"].get("start"):  # the calibrated planner: the candidate it started from, its moves, and a
                row["plan_start"] = d["plan"]["start"]  # searched plan the risk margin set aside
                row["plan_moves"] = d["plan"].get("moves", 0)
                row["plan_set_aside"] = (d["plan"].get("not_worth_its_risk") or {}).get("plan")
        if d:
            row["comm_bytes_per_step"] = d.get("comm_bytes_per_step")
            row["param_bytes_all_ranks"] = d["param_bytes_all_ranks"]
        if b.syncs:  # a GPU run: host-device syncs of one step
            row["syncs_per_step"] = b.syncs["per_step"]
        row["device"] = env.get("cuda_device") or env.get("cpu")
        row["threads"] = env.get("torch_threads")
        if b.train:
            row["steps"] = b.train["steps"]
            row["epochs"] = b.train["epochs"]
    if b.eval:
        row["auc"] = b.eval["auc"]
        row["logloss"] = b.eval["logloss"]
        row["base_logloss"] = b.eval.get("base_logloss")
    if b.eval_curve:
        row["eval_curve"] = json.dumps(b.eval_curve)
    return row


CI_METRICS = ("total_ms", "samples_per_s", "peak_rss_delta_bytes", "comm_share")


def by_point(reps: pd.DataFrame) -> pd.DataFrame:
    """One row per point from its repeats: every numeric column the median over the `ok` repeats, the others from
    the first repeat; ``repeats`` (ok) and ``runs`` (all); ``<metric>_lo`` / ``_hi``: the order-statistic interval
    of the median for the CI_METRICS (stats.median_interval)."""
    rows = []
    for _, g in reps.groupby("point_id", sort=False):
        ok = g[g["status"] == "ok"]
        src = ok if len(ok) else g
        row = src.iloc[0].to_dict()
        for col in g.columns:
            if col not in ("repeat", "point_id") and pd.api.types.is_numeric_dtype(g[col]) and len(ok):
                row[col] = ok[col].median()
                if pd.api.types.is_integer_dtype(g[col]) and row[col] == row[col]:
                    row[col] = int(round(row[col]))
        row.update(status="ok" if len(ok) else g["status"].iloc[-1], repeats=len(ok), runs=len(g))
        if len(ok) and len(ok) < len(g):
            bad = g[g["status"] != "ok"].iloc[0]
            row["reason"] = f"{len(g) - len(ok)} of {len(g)} repeats {bad['status']}: {bad['reason']}"
        for m in CI_METRICS:
            if m in ok and ok[m].notna().any():
                _, row[f"{m}_lo"], row[f"{m}_hi"] = median_interval(ok[m].tolist())
        row.pop("repeat", None)
        rows.append(row)
    return pd.DataFrame(rows)


def flat_repeats(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per run (repeat) of a point."""
    return pd.DataFrame([flatten(r) for r in records])


def summarize(records: Iterable[dict[str, Any]], baseline: str | None = None) -> pd.DataFrame:
    """One row per point of ``records`` (medians over its repeats), with speedups: see ``summarize_runs``."""
    return summarize_runs(flat_repeats(records), baseline)


def summarize_runs(reps: pd.DataFrame, baseline: str | None = None) -> pd.DataFrame:
    """One row per point (medians over its repeats; the A/A twin left out), plus ``speedup`` = baseline total time /
    this total time within each (data, batch_size, mode, optimizer, world size) group: the Hodges-Lehmann estimate
    over rounds of the ratio within each round, with its interval (``speedup_lo`` / ``speedup_hi``: stats.paired_ratio). The baseline is
    ``baseline`` or the first impl."""
    if reps.empty:
        return reps
    reps = without_twins(reps)
    df = by_point(reps)
    baseline = baseline or df["impl"].iloc[0]
    df["baseline"] = baseline
    if "total_ms" in df:
        ok = reps[reps["status"] == "ok"]
        runs = {pid: by_round(g, "total_ms") for pid, g in ok.groupby("point_id")}
        base_ids = df[(df["impl"] == baseline) & (df["status"] == "ok")].drop_duplicates(KEYS)
        base = {tuple(r[k] for k in KEYS): runs.get(r["point_id"]) for _, r in base_ids.iterrows()}
        speedups = []
        for _, r in df.iterrows():
            b, mine = base.get(tuple(r[k] for k in KEYS)), runs.get(r["point_id"])
            speedups.append(paired_ratio(b, mine)[:3] if b and mine else NAN3)
        df[["speedup", "speedup_lo", "speedup_hi"]] = pd.DataFrame(speedups, index=df.index)
    return df


def without_twins(reps: pd.DataFrame) -> pd.DataFrame:
    """The runs of a set but its A/A control's twin (the control's ratio is evidence.control_band's)."""
    if reps.empty or "label" not in reps:
        return reps
    return reps[~reps["label"].map(is_twin_label)]


def load_records(directory: str | Path, only: set[str] | None = None) -> list[Record]:
    """The records in ``directory`` (only the file names in ``only``, when given); an unreadable one raises, naming
    the file."""
    return list(records_in(directory, only))


def write_summary(
    directory: str | Path, baseline: str | None = None, order: list[str] | None = None, only: set[str] | None = None
) -> Path:
    """Summarize the records in ``directory`` into ``directory/summary.csv`` (impls in ``order``) and every run
    into ``directory/repeats.csv``."""
    directory = Path(directory)
    df, reps = summaries(directory, baseline, order, only)
    reps.to_csv(refuse_symlink(directory / "repeats.csv"), index=False)
    out = refuse_symlink(directory / "summary.csv")
    df.to_csv(out, index=False)
    return out


def summaries(directory: str | Path, baseline: str | None = None, order: list[str] | None = None,
              only: set[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary, repeats) of the records in ``directory``, as ``write_summary`` writes them (read back as CSV, so
    that a figure drawn from them is the figure drawn from the files)."""
    directory = Path(directory)
    reps = flat_repeats(load_records(directory, only))
    if "machine" in reps:  # records from before fingerprints: the result set's folder names their machine
        reps["machine"] = reps["machine"].fillna(directory.name)
    df = summarize_runs(reps, baseline)
    if order and not df.empty:
        rank = {n: i for i, n in enumerate(order)}
        df = df.sort_values(by=["impl"], key=lambda s: s.map(lambda x: rank.get(x, len(rank))), kind="stable")
    as_read = [pd.read_csv(io.StringIO(t.to_csv(index=False))) if not t.empty else t for t in (df, reps)]
    return as_read[0], as_read[1]


def set_summaries(out_dir: str | Path, impls: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """What ``summarize_set`` writes, in memory (`plot` draws from it and writes nothing beside the records)."""
    return summaries(out_dir, baseline=impls[0] if impls else None, order=impls)


def summarize_set(out_dir: str | Path, impls: list[str]) -> Path:
    """summary.csv (and repeats.csv) over every record of a result set (each names its point by its stored id; a
    set's folder holds one experiment profile's records), ``impls`` in the experiment's order, the first the
    baseline of speedups."""
    return write_summary(out_dir, baseline=impls[0] if impls else None, order=impls)


def summarize_experiment(sweep) -> Path:
    """After a sweep: its set's summaries (``summarize_set``) and beside them what it set aside
    (``write_infeasible``)."""
    out = summarize_set(sweep.out_dir, sweep.experiment.impls)
    write_infeasible(sweep)
    return out


def write_infeasible(sweep) -> None:
    """The grid points a sweep set aside as unable to fit their budget (frontier.INFEASIBLE) beside its records, when
    any (resolution knows them; `summarize` and `plot` never resolve)."""
    from dataclasses import asdict

    from reproduce.analysis.frontier import INFEASIBLE

    aside = Path(sweep.out_dir) / INFEASIBLE
    if sweep.infeasible:
        pd.DataFrame([asdict(i) for i in sweep.infeasible]).to_csv(refuse_symlink(aside), index=False)
    elif aside.exists():
        aside.unlink()
