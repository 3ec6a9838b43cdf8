"""The compression frontier: every method's runs at each byte budget beside the uncompressed model's on the same data
and seed - held-out AUC and log loss (spread over seeds), step time, peak memory, and the training samples each run
took to reach a target: the uncompressed model's final held-out AUC at the same seed minus a gap (a fixed quality
target, as MLPerf's; a run that never reaches it counts as not reached, never as its last step). ``TARGETS``: the
tight gap (0.001, the issue's and MLPerf's kind of target) and a loose one (0.01): where the uncompressed model is
still improving at the end of training, only it reaches the tight target, and the loose one still orders the
compressed methods by how fast they learn."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

TARGETS = {"target": 0.001, "loose": 0.01}  # name -> gap below the uncompressed model's final AUC
# beside a sweep's records (a table, as summary.csv: every *.json there is a run's record): the grid points set aside
# as unable to fit their budget
INFEASIBLE = "infeasible.csv"


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
    curves = ok["eval_curve"] if "eval_curve" in ok else [None] * len(ok)
    for name, gap in TARGETS.items():
        ok[name] = [final.get((d, s), math.nan) - gap for d, s in zip(ok["data"], ok["seed"])]
        ok[f"samples_to_{name}"] = [samples_to_target(c, t, b) if t == t else math.nan
                                    for c, t, b in zip(curves, ok[name], ok["batch_size"])]
    ok["bytes_fraction"] = ok["weight_bytes"] / ok["dense_bytes"]
    ok["reference"] = ok["label"] == ref
    return ok


def _spread(values: pd.Series) -> tuple[float, float, float]:
    v = values.dropna()
    return (float(v.median()), float(v.min()), float(v.max())) if len(v) else (math.nan,) * 3


def frontier(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per (data, method, budget): seeds, median [min, max] over seeds of AUC, log loss and step ms; median
    peak memory and embedding weight bytes; per target of ``TARGETS``, samples to it (median over the seeds that reached
    it) and how many did."""
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
        for name in TARGETS:  # over the seeds that reached it
            col = f"samples_to_{name}"
            row[f"reached_{name}"] = int(g[col].notna().sum())
            row[col], row[f"{col}_min"], row[f"{col}_max"] = _spread(g[col])
        rows.append(row)
    out = pd.DataFrame(rows)
    # the reference, then the methods at their own size (fp16), then each budget from the largest, best AUC first
    out["kind"] = [0 if ref else 1 if not b else 2 for ref, b in zip(out["reference"], out["budget"])]
    out = out.sort_values(["data", "kind", "budget", "auc"], ascending=[True, True, False, False], kind="stable")
    return out.drop(columns="kind").reset_index(drop=True)


def read_infeasible(out_dir: Path) -> list[dict[str, Any]]:
    """What a sweep set aside as unable to fit its budget (``INFEASIBLE`` beside its records)."""
    path = Path(out_dir) / INFEASIBLE
    return pd.read_csv(path, keep_default_na=False).to_dict("records") if path.exists() else []


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
        gaps = " / ".join(str(g) for g in TARGETS.values())
        lines += [f"Data `{Path(str(data)).name}`: median [min, max] over {seeds} seed(s); samples to AUC ref - gap: "
                  f"training samples until the held-out AUC first reaches the uncompressed model's final AUC at the "
                  f"same seed minus {gaps} (median over the seeds that reached it; how many did).", "",
                  "| budget | method | bytes / dense | AUC | log loss | step ms | peak RSS MiB | "
                  + " | ".join(f"samples to ref - {g}" for g in TARGETS.values()) + " |",
                  "|---|---|---|---|---|---|---|" + "---|" * len(TARGETS)]
        for _, r in part.iterrows():
            budget = "reference" if r["reference"] else _fraction(r["budget"]) if r["budget"] else "own size"
            targets = [("–" if not r[f"reached_{n}"] else f"{r[f'samples_to_{n}']:,.0f}")
                       + f" ({r[f'reached_{n}']}/{r['seeds']})" for n in TARGETS]
            lines.append(f"| {budget} | {r['method']} | {r['bytes_fraction']:.4g} | {_cell(r, 'auc', '.4f')} | "
                         f"{_cell(r, 'logloss', '.4f')} | {_cell(r, 'total_ms', '.1f')} | "
                         f"{r['peak_rss_delta_bytes'] / 2**20:,.0f} | " + " | ".join(targets) + " |")
        lines.append("")
    for item in infeasible:
        lines.append(f"- {item['label'] or item['impl']} at {_fraction(item['budget'])}: infeasible - {item['reason']}")
    return lines[:-1] if lines and lines[-1] == "" else lines


TT_IMPLS = ("ttrec", "elrec", "ecorec")


def _lead(part: pd.DataFrame, col: str, higher: bool, spec: str, unit: str = "") -> tuple[str, pd.DataFrame]:
    """Who leads ``part`` on ``col`` (median over seeds) and by how much against the runner-up: ahead beyond the seed
    spread only when the two ranges over seeds do not overlap; the methods ranked."""
    ranked = part.dropna(subset=[col]).sort_values(col, ascending=not higher, kind="stable")
    if ranked.empty:
        return "none measured", ranked
    first = ranked.iloc[0]
    text = f"{first['method']} {first[col]:{spec}}{unit}"
    if len(ranked) > 1:
        second = ranked.iloc[1]
        apart = first[f"{col}_min"] > second[f"{col}_max"] if higher else first[f"{col}_max"] < second[f"{col}_min"]
        seeds = int(min(first["seeds"], second["seeds"]))
        how = ("beyond" if apart else "within") + " the spread over seeds" if seeds > 1 else "one seed: no spread"
        text += f", then {second['method']} {second[col]:{spec}}{unit} ({how})"
    return text, ranked


def _first_to(g: pd.DataFrame, name: str) -> str:
    """Who reached target ``name`` in the fewest samples among the methods that reached it on every seed."""
    what = f"fewest samples to ref - {TARGETS[name]}"
    full = g[g[f"reached_{name}"] == g["seeds"]]
    if full.empty:
        return (f"{what}: no method reached it on every seed ({int(g[f'reached_{name}'].sum())} of "
                f"{int(g['seeds'].sum())} runs did)")
    return f"{what}: " + _lead(full, f"samples_to_{name}", False, ",.0f", " samples")[0]


def verdict_lines(summary: pd.DataFrame) -> list[str]:
    """Per data set and budget, from the runs alone: which method leads on held-out AUC, on step time and on samples
    to target, each beside the runner-up and whether their ranges over seeds separate them, and TT's place."""
    table = frontier(summary)
    lines = []
    for data, part in table.groupby("data", sort=False):
        lines.append(f"Data `{Path(str(data)).name}`:")
        for budget, g in part[part["budget"] > 0].groupby("budget", sort=False):
            auc, by_auc = _lead(g, "auc", True, ".4f")
            step, by_step = _lead(g, "total_ms", False, ".1f", " ms")
            target = "; ".join(_first_to(g, name) for name in TARGETS)
            tt = g[g["impl"].isin(TT_IMPLS)]
            where = ""
            if len(tt):
                name = tt["method"].iloc[0]
                place = [list(r["method"]).index(name) + 1 if name in set(r["method"]) else None
                         for r in (by_auc, by_step)]
                where = (f"; {name}: AUC {place[0]} of {len(by_auc)}, step time {place[1]} of {len(by_step)}"
                         if None not in place else "")
            lines.append(f"- **{_fraction(budget)}** of the dense bytes ({len(g)} methods fit): highest AUC: {auc}; "
                         f"fastest step: {step}; {target}{where}.")
    return lines
