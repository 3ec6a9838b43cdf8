"""The compression frontier: every method's runs at each byte budget beside the uncompressed model's on the same data
and seed - held-out AUC and log loss (spread over seeds), step time, peak memory, and the training samples each run
took to reach the target: the uncompressed model's final held-out AUC at the same seed minus ``TARGET_GAP`` (a fixed
quality target, as MLPerf's; a run that never reaches it counts as not reached, never as its last step)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

TARGET_GAP = 0.001
INFEASIBLE = "infeasible.json"  # beside a sweep's records: the grid points set aside as unable to fit their budget


def reference_label(ok: pd.DataFrame) -> str:
    """The uncompressed model: the one label whose runs hold every table whole in fp32 (embedding weight bytes
    equal to the dense tables' bytes, no budget); ValueError when there is none or more than one."""
    whole = ok[(ok["weight_bytes"] == ok["dense_bytes"]) & (ok["budget"].fillna(0) == 0)]
    labels = sorted(whole["label"].unique())
    if len(labels) != 1:
        raise ValueError(f"a frontier needs exactly one uncompressed reference (weight bytes = dense bytes, no budget);"
                         f" found {labels or 'none'}")
    return labels[0]


def samples_to_target(curve: Any, target: float, batch_size: int) -> float:
    """Training samples at the first evaluation whose AUC reaches ``target`` (NaN: never reached)."""
    if not isinstance(curve, str) or not curve:
        return math.nan
    for point in json.loads(curve):
        if point["auc"] >= target:
            return float(point["step"]) * batch_size
    return math.nan


def run_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per ok run: its method (label), budget, seed and data, quality, step time, memory, bytes, the target
    of its (data, seed) and the samples it took to reach it."""
    ok = summary[summary["status"] == "ok"].copy()
    for col, default in (("budget", 0.0), ("seed", 0)):
        if col not in ok:
            ok[col] = default
        ok[col] = ok[col].fillna(default)
    ref = reference_label(ok)
    final = ok[ok["label"] == ref].set_index(["data", "seed"])["auc"]
    dupes = final.index[final.index.duplicated()].tolist()
    if dupes:
        raise ValueError(f"the reference {ref!r} has more than one run at (data, seed) {dupes[:3]}")
    ok["target"] = [final.get((d, s), math.nan) - TARGET_GAP for d, s in zip(ok["data"], ok["seed"])]
    ok["samples_to_target"] = [samples_to_target(c, t, b) if t == t else math.nan
                               for c, t, b in zip(ok.get("eval_curve", [None] * len(ok)), ok["target"],
                                                  ok["batch_size"])]
    ok["bytes_fraction"] = ok["weight_bytes"] / ok["dense_bytes"]
    ok["reference"] = ok["label"] == ref
    return ok


def _spread(values: pd.Series) -> tuple[float, float, float]:
    v = values.dropna()
    return (float(v.median()), float(v.min()), float(v.max())) if len(v) else (math.nan,) * 3


def frontier(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per (data, method, budget): seeds, median [min, max] over seeds of AUC, log loss and step ms; median
    peak memory and embedding weight bytes; samples to target (median over the seeds that reached it) and how many did."""
    runs = run_rows(summary)
    rows = []
    for (data, label, budget), g in runs.groupby(["data", "label", "budget"], sort=False):
        row: dict[str, Any] = {"data": data, "method": label, "budget": budget, "seeds": len(g),
                               "reference": bool(g["reference"].iloc[0]), "impl": g["impl"].iloc[0]}
        for col in ("auc", "logloss", "total_ms"):
            row[col], row[f"{col}_min"], row[f"{col}_max"] = _spread(g[col])
        row["peak_rss_delta_bytes"] = float(g["peak_rss_delta_bytes"].median())
        row["weight_bytes"] = float(g["weight_bytes"].median())
        row["bytes_fraction"] = float(g["bytes_fraction"].median())
        reached = g["samples_to_target"].dropna()
        row["reached"] = len(reached)
        row["samples_to_target"] = float(reached.median()) if len(reached) else math.nan
        rows.append(row)
    out = pd.DataFrame(rows)
    # the reference, then the methods at their own size (fp16), then each budget from the largest, best AUC first
    out["kind"] = [0 if ref else 1 if not b else 2 for ref, b in zip(out["reference"], out["budget"])]
    out = out.sort_values(["data", "kind", "budget", "auc"], ascending=[True, True, False, False], kind="stable")
    return out.drop(columns="kind").reset_index(drop=True)


def read_infeasible(out_dir: Path) -> list[dict[str, Any]]:
    """What a sweep set aside as unable to fit its budget (``INFEASIBLE`` beside its records)."""
    path = Path(out_dir) / INFEASIBLE
    return json.loads(path.read_text()) if path.exists() else []


def _fraction(x: float) -> str:
    return f"1/{round(1 / x):,}" if 0 < x < 1 and abs(1 / x - round(1 / x)) < 1e-6 else f"{x:.3g}"


def _cell(r: pd.Series, col: str, spec: str) -> str:
    if r[col] != r[col]:
        return "–"
    spread = f" [{r[f'{col}_min']:{spec}}, {r[f'{col}_max']:{spec}}]" if r["seeds"] > 1 else ""
    return f"{r[col]:{spec}}{spread}"


def frontier_lines(summary: pd.DataFrame, infeasible: Iterable[dict[str, Any]] = ()) -> list[str]:
    """The README table: at each budget each method's held-out AUC and log loss (median [min, max] over seeds), step
    time, peak memory, bytes against the dense tables and samples to target; the budgets a method cannot fit, with
    its reason."""
    table = frontier(summary)
    lines = []
    for data, part in table.groupby("data", sort=False):
        seeds = int(part["seeds"].max())
        lines += [f"Data `{Path(str(data)).name}`: median [min, max] over {seeds} seed(s); target = the uncompressed "
                  f"model's final AUC at the same seed - {TARGET_GAP}.", "",
                  "| budget | method | bytes / dense | AUC | log loss | step ms | peak RSS MiB | samples to target "
                  "(seeds reaching it) |",
                  "|---|---|---|---|---|---|---|---|"]
        for _, r in part.iterrows():
            budget = "reference" if r["reference"] else _fraction(r["budget"]) if r["budget"] else "own size"
            target = ("–" if not r["reached"] else f"{r['samples_to_target']:,.0f}") + f" ({r['reached']}/{r['seeds']})"
            lines.append(f"| {budget} | {r['method']} | {r['bytes_fraction']:.4g} | {_cell(r, 'auc', '.4f')} | "
                         f"{_cell(r, 'logloss', '.4f')} | {_cell(r, 'total_ms', '.1f')} | "
                         f"{r['peak_rss_delta_bytes'] / 2**20:,.0f} | {target} |")
        lines.append("")
    for item in infeasible:
        lines.append(f"- {item['label'] or item['impl']} at {_fraction(item['budget'])}: infeasible - {item['reason']}")
    return lines[:-1] if lines and lines[-1] == "" else lines
