"""TT's quality against dense tables on the same data and seeds (reproduce/experiments/tt-quality.toml). Per variant:
its bytes against the dense tables, the held-out AUC after the last epoch and at its best epoch (median [min, max]
over seeds), each gap to the dense model paired by seed (the variant's AUC minus the dense model's at the same seed),
and the final log loss. The finding is computed, never typed: a variant matches the dense model when its paired gap
at the best epoch reaches 0 at some seed, and a variant that holds at least the dense tables' bytes yet loses at every
seed puts the loss on the TT structure or its training, not on too few parameters."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from reproduce.analysis.frontier import TT_IMPLS, reference_label
from reproduce.analysis.run_output import train_output

# the model every gap is taken against (its other dense runs, at other learning rates, are rows of the table); a set
# without it: the one uncompressed label (frontier.reference_label)
REFERENCE = "dense"
# the runs docs/data.md shows as `dlrmbench train`'s output: the dense model and the library's TT default, seed 0
EXAMPLE = ("dense", "TT r32, library defaults")


def _best_auc(curve: Any, final: float) -> float:
    """The highest held-out AUC over a run's evaluations (its final AUC without a curve)."""
    if not isinstance(curve, str) or not curve:
        return final
    return max(float(p["auc"]) for p in json.loads(curve))


def _spread(values: pd.Series) -> tuple[float, float, float]:
    v = values.dropna()
    return (float(v.median()), float(v.min()), float(v.max())) if len(v) else (math.nan,) * 3


def quality_table(reps: pd.DataFrame) -> pd.DataFrame:
    """One row per (data, label): seeds, bytes / dense, AUC (final, best) and the paired gaps, log loss; the dense
    reference first, then the dense model at other rates, then the TT variants from the best AUC at their best epoch."""
    ok = reps[reps["status"] == "ok"].copy()
    for col, default in (("budget", 0.0), ("seed", 0)):
        ok[col] = ok[col].fillna(default) if col in ok else default
    ref = REFERENCE if (ok["label"] == REFERENCE).any() else reference_label(ok)
    curves = ok["eval_curve"] if "eval_curve" in ok else [None] * len(ok)
    ok["best_auc"] = [_best_auc(c, a) for c, a in zip(curves, ok["auc"])]
    dense = ok[ok["label"] == ref].set_index(["data", "seed"])
    rows = []
    for (data, label), g in ok.groupby(["data", "label"], sort=False):
        keys = list(zip(g["data"], g["seed"]))
        row: dict[str, Any] = {"data": data, "label": label, "impl": g["impl"].iloc[0], "reference": label == ref,
                               "seeds": len(g),
                               "bytes_fraction": float((g["weight_bytes"] / g["dense_bytes"]).median())}
        for col in ("auc", "best_auc", "logloss"):
            row[col], row[f"{col}_min"], row[f"{col}_max"] = _spread(g[col])
        for col, gap in (("auc", "gap"), ("best_auc", "best_gap")):
            paired = pd.Series([a - dense[col].get(k, math.nan) for a, k in zip(g[col], keys)])
            row[gap], row[f"{gap}_min"], row[f"{gap}_max"] = _spread(paired)
        rows.append(row)
    out = pd.DataFrame(rows)
    # the dense reference, the dense model at other rates, then the TT variants from the best AUC at their best epoch
    out["kind"] = [0 if ref else 1 if impl not in TT_IMPLS else 2 for ref, impl in zip(out["reference"], out["impl"])]
    out = out.sort_values(["data", "kind", "best_auc"], ascending=[True, True, False], kind="stable")
    return out.drop(columns="kind").reset_index(drop=True)


def _cell(r: pd.Series, col: str, spec: str) -> str:
    if r[col] != r[col]:
        return "–"
    spread = f" [{r[f'{col}_min']:{spec}}, {r[f'{col}_max']:{spec}}]" if r["seeds"] > 1 else ""
    return f"{r[col]:{spec}}{spread}"


def quality_lines(reps: pd.DataFrame) -> list[str]:
    """The README table and the finding under it."""
    table = quality_table(reps)
    lines: list[str] = []
    for data, part in table.groupby("data", sort=False):
        seeds = int(part["seeds"].max())
        lines += [f"Data `{str(data).rsplit('/', 1)[-1]}`: median [min, max] over {seeds} seed(s); gap: the variant's "
                  f"held-out AUC minus the dense model's at the same seed.", "",
                  "| variant | bytes / dense | AUC, last epoch | gap | AUC, best epoch | gap at best | log loss |",
                  "|---|---|---|---|---|---|---|"]
        for _, r in part.iterrows():
            gap = "reference" if r["reference"] else _cell(r, "gap", "+.4f")
            best_gap = "reference" if r["reference"] else _cell(r, "best_gap", "+.4f")
            lines.append(f"| {r['label']} | {r['bytes_fraction']:.3g} | {_cell(r, 'auc', '.4f')} | {gap} | "
                         f"{_cell(r, 'best_auc', '.4f')} | {best_gap} | {_cell(r, 'logloss', '.4f')} |")
        lines += ["", *finding(part), *failed_lines(reps[reps["data"] == data]), ""]
    return lines[:-1] if lines and lines[-1] == "" else lines


def failed_lines(reps: pd.DataFrame) -> list[str]:
    """The variants with runs that did not end `ok` (a diverged initializer, say): how many, and the first reason."""
    out = []
    for label, g in reps.groupby("label", sort=False):
        bad = g[g["status"] != "ok"]
        if len(bad):
            reason = str(bad["reason"].iloc[0]).split(" (log:")[0] if "reason" in bad else ""
            out.append(f"- {label}: {bad['status'].iloc[0]} at {len(bad)} of {len(g)} seed(s), not in the table: "
                       f"{reason}.")
    return out


def finding(part: pd.DataFrame) -> list[str]:
    """What the sweep says, from its numbers: which variants match the dense model at their best epoch (a paired
    gap that reaches 0 at some seed), and whether a variant holding the dense tables' bytes still loses."""
    variants = part[part["impl"].isin(TT_IMPLS)]  # the TT variants (not the dense model at another learning rate)
    if variants.empty:
        return []
    match = variants[variants["best_gap_max"] >= 0]
    out = [("- Matches the dense model at its best epoch at some seed: " + ", ".join(match["label"]) + ".")
           if len(match) else "- No TT variant matches the dense model at any seed, at its best epoch."]
    best = variants.sort_values("best_gap", ascending=False, kind="stable").iloc[0]
    out.append(f"- Closest: {best['label']}, gap at its best epoch {best['best_gap']:+.4f} "
               f"[{best['best_gap_min']:+.4f}, {best['best_gap_max']:+.4f}].")
    dense = part[~part["impl"].isin(TT_IMPLS)].sort_values("best_auc", ascending=False, kind="stable")
    if len(dense) > 1:  # the dense model at other learning rates too: the closest TT variant against its best
        top = dense.iloc[0]
        out.append(f"- The dense model's best learning rate here: {top['label']} (AUC at its best epoch "
                   f"{top['best_auc']:.4f}); against it the closest TT variant is {best['best_auc'] - top['best_auc']:+.4f}"
                   f" (medians over seeds).")
    full = variants[variants["bytes_fraction"] >= 1]
    for _, r in full.iterrows():
        if r["best_gap_max"] < 0:
            out.append(f"- {r['label']} holds {r['bytes_fraction']:.3g}x the dense tables' bytes and still loses at "
                       f"every seed ({r['best_gap']:+.4f}): the loss is not too few parameters, it is the TT "
                       f"structure or its training.")
        else:
            out.append(f"- {r['label']} holds {r['bytes_fraction']:.3g}x the dense tables' bytes and reaches the dense "
                       f"model at some seed ({r['best_gap']:+.4f} [{r['best_gap_min']:+.4f}, "
                       f"{r['best_gap_max']:+.4f}]): TT trains as well as dense tables once it has their size.")
    return out


def train_example(reps: pd.DataFrame, folder: Path) -> list[str]:
    """`dlrmbench train`'s output for the ``EXAMPLE`` runs at seed 0 of the set in ``folder`` (a markdown text
    block), drawn from their records; none when the set lacks one of them."""
    from reproduce.harness.record_store import records_in

    ok = reps[(reps["status"] == "ok") & (reps["seed"].fillna(0) == 0)]
    rows = [ok[ok["label"] == label] for label in EXAMPLE]
    if any(r.empty for r in rows):
        return []
    names = [f"{r['point_id'].iloc[0]}.r{int(r['repeat'].iloc[0])}.json" for r in rows]
    by_name = {f"{rec.point_id}.r{rec.repeat}.json": rec for rec in records_in(folder, set(names))}
    records = [by_name[n] for n in names]
    data = f"datasets/synth/{Path(str(records[0].point['data'])).name}"
    command = (f"dlrmbench train {' '.join('--impl ' + r.point['impl'] for r in records)} --data {data} "
               f"--epochs {records[0].point['epochs']}" + "".join(
                   f" -o {r.point['impl']}.{k}={v}" for r in records for k, v in (r.point.get('impl_options') or {}).items()))
    return ["```text", *train_output(records, command, data), "```"]
