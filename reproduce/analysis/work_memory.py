"""The work model's peak-RSS model, validated on the committed table_size and sc24_table1 sets of a machine.

A run's peak RSS over its pre-build baseline (the records' peak_rss_delta_bytes) is modeled as the bytes the work
layer counts (params, optimizer state, intermediates: the collection's memory_report, which impls/work reproduces
exactly on sampled batches; the records' analytic_bytes) plus what it does not count, per system:

    c0 + c_nnz * lookups + c_u * distinct ids + c_p * parameter bytes

c0 the process constant (what a first step touches: code pages, thread pools, allocator arenas), c_nnz and c_u the
bytes each lookup and each distinct id hold beyond the counted ones (the batch's ids and offsets, sort and unique
buffers), c_p the temporaries that scale with the parameters (the update's). The four constants are fitted (non-
negative least squares on relative error) on the memory_calibration set only: the same systems on 1e4-, 3e6- and
3e7-row tables, sizes neither validated set measures, at batch 1,024-65,536. Every point of table_size and
sc24_table1 is then predicted; the target is 5 % at every point."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

CALIBRATION_SET = "memory_calibration"
VALIDATION_SETS = ("table_size", "sc24_table1")
TERMS = ("constant", "per_lookup", "per_unique", "per_param_byte")
TARGET = 0.05


def _terms(d: pd.DataFrame) -> np.ndarray:
    return np.c_[np.ones(len(d)), d["nnz"], d["unique"].fillna(0), d["param_bytes"]]


def _ok(d: pd.DataFrame) -> pd.DataFrame:
    """The measured points, less the A/A control's twin (it repeats its original; it is the set's noise floor)."""
    from reproduce.analysis.aggregate import without_twins

    return without_twins(d[(d["status"] == "ok") & d["peak_rss_delta_bytes"].notna()])


def fit(root: Path, machine: str) -> dict[str, dict[str, float]]:
    """Per system, the four constants, fitted on the calibration set's runs (every repeat)."""
    from scipy.optimize import nnls

    path = root / "results" / CALIBRATION_SET / machine / "repeats.csv"
    if not path.exists():
        raise ValueError(f"no memory calibration runs at {path}: run `dlrmbench sweep "
                         f"reproduce/experiments/{CALIBRATION_SET}.toml` on this machine")
    cal = _ok(pd.read_csv(path))
    out = {}
    for impl, g in cal.groupby("impl"):
        w = g["peak_rss_delta_bytes"].to_numpy(dtype=np.float64)
        k, _ = nnls(_terms(g) / w[:, None], (w - g["analytic_bytes"].to_numpy()) / w)
        out[impl] = dict(zip(TERMS, map(float, k)))
    return out


def validate(root: Path, machine: str) -> pd.DataFrame:
    """Every measured point of the validation sets (their summaries: the median over repeats), predicted."""
    constants = fit(root, machine)
    rows = []
    for name in VALIDATION_SETS:
        path = root / "results" / name / machine / "summary.csv"
        if not path.exists():
            continue
        d = _ok(pd.read_csv(path))
        d = d[d["impl"].isin(constants)]
        k = np.array([[constants[i][t] for t in TERMS] for i in d["impl"]])
        pred = d["analytic_bytes"].to_numpy() + (_terms(d) * k).sum(1)
        for (_, x), p in zip(d.iterrows(), pred):
            rows.append({"set": name, "impl": x["impl"], "data": x["data"], "rows": int(x.get("rows", 0) or 0),
                         "batch_size": int(x["batch_size"]), "measured_bytes": float(x["peak_rss_delta_bytes"]),
                         "counted_bytes": float(x["analytic_bytes"]), "modeled_bytes": float(p),
                         "error": float(p / x["peak_rss_delta_bytes"] - 1)})
    return pd.DataFrame(rows)


def write(out: Path, root: Path, machine: str) -> dict[str, Path]:
    out = out / machine
    out.mkdir(parents=True, exist_ok=True)
    v = validate(root, machine)
    paths = {"memory_points": out / "memory_points.csv", "memory_fit": out / "memory_fit.json"}
    v.to_csv(paths["memory_points"], index=False, float_format="%.6g")
    paths["memory_fit"].write_text(json.dumps({
        "calibration": f"results/{CALIBRATION_SET}/{machine} (every repeat)", "terms": TERMS,
        "constants": fit(root, machine), "target": TARGET,
        "worst": float(v["error"].abs().max()) if len(v) else None,
        "within": bool((v["error"].abs() <= TARGET).all()) if len(v) else None}, indent=1) + "\n")
    return paths


def draw(out: Path, figures: Path, machine: str | None = None) -> list[Path]:
    """No figure: the report's table lists every point."""
    return []


def table(out: Path, machine: str) -> list[str]:
    path = out / machine / "memory_points.csv"
    if not path.exists():
        return []
    v = pd.read_csv(path)
    j = json.loads((out / machine / "memory_fit.json").read_text())
    lines = [f"Peak RSS on {machine}, modeled (counted bytes + the constants fitted on `{j['calibration']}`) against "
             f"measured, every point of {' and '.join(VALIDATION_SETS)}:", "",
             "| set | system | data | rows | batch | measured MiB | counted MiB | modeled MiB | error |",
             "|---|---|---|---|---|---|---|---|---|"]
    for _, x in v.iterrows():
        lines.append(f"| {x['set']} | {x['impl']} | {x['data']} | {x['rows']:,} | {x['batch_size']:,} | "
                     f"{x['measured_bytes'] / 2**20:.1f} | {x['counted_bytes'] / 2**20:.1f} | "
                     f"{x['modeled_bytes'] / 2**20:.1f} | {x['error']:+.1%} |")
    met = "met" if j["within"] else "**not met**"
    lines += ["", f"Target: within {j['target']:.0%} at every point: {met} (worst {j['worst']:.1%}, median "
              f"{v['error'].abs().median():.1%})."]
    return lines
