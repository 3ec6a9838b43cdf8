"""Records -> flat tables: repeats.csv (one row per run) and summary.csv (one row per point: medians over its repeats,
bootstrap 95 % intervals of the step time, throughput, memory and the speedup over the baseline)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from reproduce.harness.records import read_record
from reproduce.analysis.stats import median_ci, ratio_ci

KEYS = ["data", "max_rows", "rows", "batch_size", "mode", "optimizer", "world_size"]


def flatten(record: dict[str, Any]) -> dict[str, Any]:
    p = record["point"]
    row: dict[str, Any] = {
        # a record handed over without its id (not read from a result set): its point's own hash
        "point_id": record.get("point_id") or hashlib.sha1(json.dumps(p, sort_keys=True, default=str).encode()
                                                           ).hexdigest()[:10],
        "repeat": record.get("repeat", 0),
        "machine": (record.get("env") or {}).get("machine_slug"),
        "impl": p["impl"],
        "label": p.get("label") or p["impl"],
        "data": p["data"],
        "batch_size": p["batch_size"],
        "mode": p.get("mode"),
        "optimizer": p.get("optimizer"),
        "iters": p.get("iters"),
        "max_rows": (p.get("data_options") or {}).get("max_rows", 0),  # 0: the preset's table sizes
        "rows": (p.get("data_options") or {}).get("rows", 0),  # 0: the preset's own row counts
        "world_size": p.get("world_size", 1),
        "global_batch": p["batch_size"] * p.get("world_size", 1),
        "status": record["status"],
        "reason": record.get("reason"),
        "wall_s": record.get("wall_s"),  # the run's process, start to record (launch, data, build, steps)
    }
    if record.get("timing_ms"):  # ok, or diverged after some timed steps
        for phase, s in record["timing_ms"].items():
            row[f"{phase}_ms"] = s["median"]
            row[f"{phase}_iqr_ms"] = s["iqr"]
        mem = record["memory"]
        row["samples_per_s"] = record["samples_per_s"]
        row["peak_rss_delta_bytes"] = mem.get("peak_rss_delta_bytes")
        row["cuda_peak_bytes"] = mem.get("cuda_peak_bytes")
        row["analytic_bytes"] = mem["analytic"]["total"]
        row["param_bytes"] = record["param_bytes"]
        row["dense_bytes"] = record["tables"]["dense_bytes"]
        work = record["work"]
        row["nnz"] = work["nnz"]
        for key in ("unique", "e1", "gemms", "flops", "intermediate_bytes"):
            row[key] = work.get(key)
        for key in ("flops_fwd", "flops_bwd", "micro_batches"):
            row[key] = work.get("extra", {}).get(key)
        d = record.get("dist")
        if d and d.get("comm_blocked_ms") is not None:  # the busiest rank's exposed communication per step
            row["comm_blocked_ms"] = d["comm_blocked_ms"]
            # of medians, so approximate: what is neither blocked communication nor the update phase
            row["compute_ms"] = row["total_ms"] - d["comm_blocked_ms"] - row["update_ms"]
            row["comm_share"] = d["comm_blocked_ms"] / row["total_ms"] if row.get("total_ms") else None
        if d and d.get("plan"):
            row["plan_strategy"] = d["plan"].get("strategy")
            row["predicted_step_ms"] = d["plan"].get("predicted_step_ms")
            row["plan_shards"] = d["plan"].get("shards")
        if d:
            row["comm_bytes_per_step"] = d.get("comm_bytes_per_step")
            row["param_bytes_all_ranks"] = d["param_bytes_all_ranks"]
        row["device"] = record["env"].get("cuda_device") or record["env"].get("cpu")
        row["threads"] = record["env"].get("torch_threads")
        if record.get("train"):
            row["steps"] = record["train"]["steps"]
            row["epochs"] = record["train"]["epochs"]
    if record.get("eval"):
        row["auc"] = record["eval"]["auc"]
        row["logloss"] = record["eval"]["logloss"]
    if record.get("eval_curve"):
        row["eval_curve"] = json.dumps(record["eval_curve"])
    return row


CI_METRICS = ("total_ms", "samples_per_s", "peak_rss_delta_bytes")


def by_point(reps: pd.DataFrame) -> pd.DataFrame:
    """One row per point from its repeats: every numeric column the median over the `ok` repeats, the others from
    the first repeat; ``repeats`` (ok) and ``runs`` (all); ``<metric>_lo`` / ``_hi``: bootstrap 95 % interval of
    the median for the CI_METRICS."""
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
                _, row[f"{m}_lo"], row[f"{m}_hi"] = median_ci(ok[m].tolist())
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
    """One row per point (medians over its repeats), plus ``speedup`` = baseline total time / this total time
    within each (data, batch_size, mode, optimizer, world size) group, with its bootstrap 95 % interval
    (``speedup_lo`` / ``speedup_hi``) over both sides' repeats. The baseline is ``baseline`` or the first impl."""
    if reps.empty:
        return reps
    df = by_point(reps)
    baseline = baseline or df["impl"].iloc[0]
    df["baseline"] = baseline
    if "total_ms" in df:
        ok = reps[reps["status"] == "ok"]
        runs = ok.groupby("point_id")["total_ms"].apply(list).to_dict()
        base_ids = df[(df["impl"] == baseline) & (df["status"] == "ok")].drop_duplicates(KEYS)
        base = {tuple(r[k] for k in KEYS): runs.get(r["point_id"]) for _, r in base_ids.iterrows()}
        speedups = []
        for _, r in df.iterrows():
            b, mine = base.get(tuple(r[k] for k in KEYS)), runs.get(r["point_id"])
            speedups.append(ratio_ci(b, mine) if b and mine else (float("nan"),) * 3)
        df[["speedup", "speedup_lo", "speedup_hi"]] = pd.DataFrame(speedups, index=df.index)
    return df


def load_records(directory: str | Path, only: set[str] | None = None) -> list[dict[str, Any]]:
    """The records in ``directory`` (only the file names in ``only``, when given); a record from before repeats
    gets its point id from its file name and repeat 0."""
    out = []
    for p in sorted(Path(directory).glob("*.json")):
        if only is not None and p.name not in only:
            continue
        rec = read_record(p)  # an unreadable one raises, naming the file
        stem, dot, rep = p.stem.rpartition(".r")
        rec.setdefault("point_id", stem if dot and rep.isdigit() else p.stem)
        rec.setdefault("repeat", int(rep) if dot and rep.isdigit() else 0)
        out.append(rec)
    return out


def write_summary(
    directory: str | Path, baseline: str | None = None, order: list[str] | None = None, only: set[str] | None = None
) -> Path:
    """Summarize the records in ``directory`` into ``directory/summary.csv`` (impls in ``order``) and every run
    into ``directory/repeats.csv``."""
    directory = Path(directory)
    reps = flat_repeats(load_records(directory, only))
    if "machine" in reps:  # records from before fingerprints: the result set's folder names their machine
        reps["machine"] = reps["machine"].fillna(directory.name)
    df = summarize_runs(reps, baseline)
    if order and not df.empty:
        rank = {n: i for i, n in enumerate(order)}
        df = df.sort_values(by=["impl"], key=lambda s: s.map(lambda x: rank.get(x, len(rank))), kind="stable")
    reps.to_csv(directory / "repeats.csv", index=False)
    out = directory / "summary.csv"
    df.to_csv(out, index=False)
    return out
