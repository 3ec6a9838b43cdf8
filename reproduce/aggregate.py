"""Records -> one flat table (results/<exp>/summary.csv). The only place that does arithmetic on records."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

KEYS = ["data", "max_rows", "rows", "batch_size", "mode", "optimizer", "world_size"]


def flatten(record: dict[str, Any]) -> dict[str, Any]:
    p = record["point"]
    row: dict[str, Any] = {
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
    }
    if record["status"] == "ok":
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
        if d:
            row["comm_bytes_per_step"] = d.get("comm_bytes_per_step")
            row["param_bytes_all_ranks"] = d["param_bytes_all_ranks"]
        row["device"] = record["env"].get("cuda_device") or record["env"].get("cpu")
        row["threads"] = record["env"].get("torch_threads")
        if "eval" in record:
            row["auc"] = record["eval"]["auc"]
            row["logloss"] = record["eval"]["logloss"]
        if record.get("eval_curve"):
            row["eval_curve"] = json.dumps(record["eval_curve"])
    return row


def summarize(records: Iterable[dict[str, Any]], baseline: str | None = None) -> pd.DataFrame:
    """One row per record, plus ``speedup`` = baseline total time / this total time within each
    (data, batch_size, mode, optimizer) group. The baseline is ``baseline`` or the first impl seen."""
    rows = [flatten(r) for r in records]
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    baseline = baseline or df["impl"].iloc[0]
    df["baseline"] = baseline
    if "total_ms" in df:
        base = df[(df["impl"] == baseline) & (df["status"] == "ok")].drop_duplicates(KEYS).set_index(KEYS)["total_ms"]
        joined = df.join(base.rename("baseline_total_ms"), on=KEYS)
        df["speedup"] = joined["baseline_total_ms"] / df["total_ms"]
    return df


def load_records(directory: str | Path, only: set[str] | None = None) -> list[dict[str, Any]]:
    """The records in ``directory`` (only the file names in ``only``, when given)."""
    paths = sorted(Path(directory).glob("*.json"))
    return [json.loads(p.read_text()) for p in paths if only is None or p.name in only]


def write_summary(
    directory: str | Path, baseline: str | None = None, order: list[str] | None = None, only: set[str] | None = None
) -> Path:
    """Summarize the records in ``directory`` into ``directory/summary.csv`` (impls in ``order``)."""
    directory = Path(directory)
    df = summarize(load_records(directory, only), baseline)
    if order and not df.empty:
        rank = {n: i for i, n in enumerate(order)}
        df = df.sort_values(by=["impl"], key=lambda s: s.map(lambda x: rank.get(x, len(rank))), kind="stable")
    out = directory / "summary.csv"
    df.to_csv(out, index=False)
    return out
