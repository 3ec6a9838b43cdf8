"""The work model's CPU time, validated on a machine's committed reference sets (sc24, sc24_fig11, sc24_table1,
table_size, recsys24): every measured point predicted from the work layer (impls/work: each table's expected work
under the set's id law, each system's placement and exchange) and the machine's micro-measurements only (make
bench's TT kernel roofline, dlrmbench calibrate's profile: impls/work/cpu_time.py) and each system's cost apart from
its work (per step and per table, from the dispatch_calibration set: tiny tables at batch 8, a configuration no
validated set has). No step time of any validated set is used to fit anything. Per point: predicted and measured ms (the summary's median over repeats) and the error; per set,
its headline ratios (the experiment's ``headline``) predicted against measured in every group, and whether their
order is right.

Not modeled: EMBark and TorchRec steps (recsys24): their time here would be EMBark's own calibrated cost model,
not this one; those points are listed as not modeled."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

SETS = ("sc24", "sc24_fig11", "sc24_table1", "table_size", "recsys24")
TT_SYSTEMS = ("ttrec", "elrec", "ecorec")
DENSE = {"dense-torch": "dense", "dense-fbgemm": "fbgemm"}
MEDIAN_TARGET, WORST_TARGET, RATIO_TARGET = 0.15, 0.35, 0.15
COMPONENTS = ("dispatch", "stages", "pooling", "dedup", "lookup", "exchange")


def profile(root: Path, machine: str):
    from impls.work.cpu_time import CPUProfile

    bench = root / "results" / "bench" / machine / "benchmarks.json"
    calib = root / "results" / "calibration" / machine / "gloo.json"
    for p, how in ((bench, "make bench"), (calib, "dlrmbench calibrate")):
        if not p.exists():
            raise ValueError(f"the CPU time model needs {p} ({how} on {machine})")
    return CPUProfile.from_bench(bench, calib, machine)


DISPATCH_SET = "dispatch_calibration"


def dispatch(root: Path, machine: str) -> dict[str, dict[str, float]]:
    """Per system, seconds per step and per table apart from the work: from the dispatch_calibration set (1 and 26
    tables of at most 1,000 rows, batch 8, one id per bag): per table = (t26 - t1) / 25, per step = t1 - per table."""
    path = root / "results" / DISPATCH_SET / machine / "summary.csv"
    if not path.exists():
        raise ValueError(f"the CPU time model needs {path}: run `dlrmbench sweep reproduce/experiments/"
                         f"{DISPATCH_SET}.toml` on {machine}")
    d = _measured(pd.read_csv(path)).set_index(["impl", "data"])
    out = {}
    for impl in sorted({i for i, _ in d.index}):
        one, many = d.loc[(impl, "sc24-f4"), "total_ms"] / 1e3, d.loc[(impl, "criteo-kaggle"), "total_ms"] / 1e3
        per_table = max(0.0, (many - one) / 25)
        out[impl] = {"per_step_s": max(0.0, one - per_table), "per_table_s": per_table}
    return out


def _measured(d: pd.DataFrame) -> pd.DataFrame:
    """A set's finished points, less the A/A control's twin (a repeat of its original: the set's noise floor)."""
    from reproduce.analysis.aggregate import without_twins

    return without_twins(d[d["status"] == "ok"])


def _record(root: Path, name: str, machine: str, point_id: str) -> dict:
    return json.loads((root / "results" / name / machine / f"{point_id}.r0.json").read_text())


def predict_point(rec: dict, row: pd.Series, prof, calib, fixed: dict) -> dict:
    """(components in ms, predicted ms) of one measured point."""
    from impls.data.sources import open_source
    from impls.data.synthetic import mean_bag
    from impls.data.zipf import expected_unique
    from impls.work.counts import table_step, tt_shapes
    from impls.work.cpu_time import dense_seconds, exchange_seconds, table_seconds
    from impls.work.exchange import ExpectedKeys, rank_sizes, sharding, system_exchange

    point = rec["point"]
    impl, G, b = point["impl"], int(point["world_size"]), int(point["batch_size"])
    opts = dict(point.get("impl_options") or {})
    data_opts = dict(point.get("data_options") or {})
    if row.get("max_rows") and "max_rows" not in data_opts:
        data_opts["max_rows"] = int(row["max_rows"])
    src = open_source(point["data"], seed=int(point.get("seed", 0)), **data_opts)
    spec = src.spec
    tables = list(spec.tables)
    occ = rec["occupancy"]
    threads = min(float(occ["threads_per_rank"]), occ["cores"] / max(1, occ["ranks_on_node"]))
    per_rank = [b * mean_bag(t.hotness, spec.bag_sizes) for t in tables]
    comp = {"dispatch": 0.0, "stages": 0.0, "pooling": 0.0, "dedup": 0.0, "lookup": 0.0, "exchange": 0.0}
    if impl in DENSE:
        ranks = [list(range(len(tables)))] if G == 1 else sharding(impl, opts, G, tables)[1]
        batch = b if G == 1 else b * G
        per = []
        for owned in ranks:
            s = 0.0
            for t in owned:
                n = batch * mean_bag(tables[t].hotness, spec.bag_sizes)
                s += dense_seconds(DENSE[impl], batch, n, expected_unique(tables[t].num_embeddings, n, spec.alpha),
                                   tables[t].dim, calib, threads)
            per.append(s)
        busiest = int(np.argmax(per))
        comp["lookup"] = per[busiest]
        comp["dispatch"] = fixed["per_step_s"] + fixed["per_table_s"] * len(ranks[busiest])
        ex = system_exchange(impl, tables, opts, rank_sizes(b * G, G), ExpectedKeys(tables, [per_rank] * G,
                                                                                     spec.alpha)) if G > 1 else None
        hidden = frozenset()
        calls = {}
    else:
        costs = [expected_unique(t.num_embeddings, n * G, spec.alpha) for t, n in zip(tables, per_rank)]
        dist_opts, owned = sharding(impl, opts, G, tables, costs) if G > 1 else ({}, None)
        local = {k: v for k, v in opts.items() if k not in dist_opts and k not in ("sharding", "placement", "pipeline",
                 "pipeline_groups", "skew", "reorder", "pipeline_micro_batches", "overlap", "capacity_bytes")}
        shapes = tt_shapes(impl, tables, local)
        ranks = [list(range(len(tables)))] if owned is None else owned
        batch = b if owned is None else b * G
        per = []
        for tabs in ranks:
            acc = {"stages": 0.0, "pooling": 0.0, "dedup": 0.0, "lookup": 0.0}
            for t in tabs:
                if t not in shapes:
                    n = batch * mean_bag(tables[t].hotness, spec.bag_sizes)
                    acc["lookup"] += dense_seconds("dense", batch, n, expected_unique(tables[t].num_embeddings, n,
                                                                                      spec.alpha), tables[t].dim,
                                                   calib, threads)
                    continue
                st = table_step(impl, spec, t, batch, local)
                for k, v in table_seconds(st, shapes[t], tables[t].dim, st.work.unique > 0, prof, calib,
                                          threads).items():
                    acc[k] += v
            per.append(acc)
        busiest = int(np.argmax([sum(a.values()) for a in per]))
        comp.update(per[busiest])
        comp["dispatch"] = fixed["per_step_s"] + fixed["per_table_s"] * len(ranks[busiest])
        ex = None
        hidden, share, calls = frozenset(), 0.0, {}
        if G > 1:
            ex = system_exchange(impl, tables, opts, rank_sizes(b * G, G), ExpectedKeys(tables, [per_rank] * G,
                                                                                        spec.alpha), costs=costs)
            if dist_opts.get("pipeline") == "table":
                g = int(dist_opts.get("pipeline_groups", 4))
                calls = {"emb.fwd": g, "emb.bwd": g}
                hidden, share = frozenset({"emb.fwd", "emb.bwd"}), (g - 1) / g
            elif dist_opts.get("pipeline") == "batch":
                m = int(dist_opts.get("pipeline_micro_batches", 4))
                calls = {p: m for p in ("emb.ids.header", "emb.ids.lengths", "emb.ids.values", "emb.fwd", "emb.bwd")}
                hidden, share = frozenset({"emb.fwd", "emb.bwd"}), (m - 1) / m
    if G > 1:
        comp["exchange"] = exchange_seconds(ex, calls, calib, G, busiest, hidden, share if impl not in DENSE else 0.0)
    total = sum(comp.values())
    return {**{f"{k}_ms": v * 1e3 for k, v in comp.items()}, "predicted_ms": total * 1e3}


def validate(root: Path, machine: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(every point, every headline ratio) of the sets present."""
    from impls.embark.calibrated import Profile
    from reproduce.harness.experiment import parse

    prof = profile(root, machine)
    calib = Profile.load(root / "results" / "calibration" / machine / "gloo.json")
    fixed = dispatch(root, machine)
    rows, ratios = [], []
    for name in SETS:
        path = root / "results" / name / machine / "summary.csv"
        if not path.exists():
            continue
        d = _measured(pd.read_csv(path))
        for _, row in d.iterrows():
            base = {"set": name, "point_id": row["point_id"], "impl": row["impl"], "label": row["label"],
                    "data": row["data"], "batch_size": int(row["batch_size"]), "world_size": int(row["world_size"]),
                    "rows": int(row.get("rows", 0) or 0), "max_rows": int(row.get("max_rows", 0) or 0),
                    "measured_ms": float(row["total_ms"])}
            if row["impl"] not in TT_SYSTEMS and row["impl"] not in DENSE:
                rows.append({**base, "modeled": False})
                continue
            pred = predict_point(_record(root, name, machine, row["point_id"]), row, prof, calib, fixed[row["impl"]])
            rows.append({**base, "modeled": True, **pred, "error": pred["predicted_ms"] / base["measured_ms"] - 1})
        exp = parse(root / "reproduce" / "experiments" / f"{name}.toml")
        pts = pd.DataFrame([r for r in rows if r["set"] == name and r.get("modeled")])
        for num, den in getattr(exp, "headline", None) or []:
            if pts.empty:
                break
            keys = ["data", "batch_size", "world_size", "rows", "max_rows"]
            a = pts[pts["label"] == num].set_index(keys)
            z = pts[pts["label"] == den].set_index(keys)
            for key in a.index.intersection(z.index):
                m = a.loc[[key], "measured_ms"].iloc[0] / z.loc[[key], "measured_ms"].iloc[0]
                p = a.loc[[key], "predicted_ms"].iloc[0] / z.loc[[key], "predicted_ms"].iloc[0]
                ratios.append({"set": name, "ratio": f"{num} / {den}", **dict(zip(keys, key)), "measured": m,
                               "predicted": p, "error": p / m - 1, "order_right": bool((m > 1) == (p > 1))})
    return pd.DataFrame(rows), pd.DataFrame(ratios)


def write(out: Path, root: Path, machine: str) -> dict[str, Path]:
    out = out / machine
    out.mkdir(parents=True, exist_ok=True)
    points, ratios = validate(root, machine)
    paths = {"cpu_points": out / "cpu_points.csv", "cpu_ratios": out / "cpu_ratios.csv",
             "cpu_profile": out / "cpu_profile.json"}
    points.to_csv(paths["cpu_points"], index=False, float_format="%.6g")
    ratios.to_csv(paths["cpu_ratios"], index=False, float_format="%.6g")
    paths["cpu_profile"].write_text(json.dumps(profile(root, machine).to_dict(), indent=1) + "\n")
    return paths


def draw(out: Path, figures: Path, machine: str | None = None) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = out / str(machine) / "cpu_points.csv"
    if machine is None or not path.exists():
        return []
    p = pd.read_csv(path)
    p = p[p["modeled"]]
    fig, ax = plt.subplots(figsize=(5.4, 4.6))
    for (s, g), color in zip(p.groupby("impl"), ("C0", "C1", "C2", "C3", "C4")):
        ax.scatter(g["measured_ms"], g["predicted_ms"], s=14, color=color, label=s)
    lo, hi = p[["measured_ms", "predicted_ms"]].min().min() / 1.5, p[["measured_ms", "predicted_ms"]].max().max() * 1.5
    ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8)
    ax.fill_between([lo, hi], [lo * (1 - WORST_TARGET), hi * (1 - WORST_TARGET)],
                    [lo * (1 + WORST_TARGET), hi * (1 + WORST_TARGET)], color="grey", alpha=0.12)
    ax.set(xscale="log", yscale="log", xlabel=f"measured ms per step ({machine}, committed sets)",
           ylabel="modeled ms (micro-measurements only)",
           title=f"work model on CPU, nothing fitted; band ±{WORST_TARGET:.0%}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    from reproduce.analysis.plots.style import save

    return save(fig, figures / machine, "cpu_validation")


def table(out: Path, machine: str) -> list[str]:
    path = out / str(machine) / "cpu_points.csv"
    if not path.exists():
        return []
    p = pd.read_csv(path)
    r = pd.read_csv(out / machine / "cpu_ratios.csv")
    m = p[p["modeled"]]
    lines = [f"CPU time on {machine}: every point of the committed sets predicted from `make bench`'s roofline and "
             f"`dlrmbench calibrate`'s profile, nothing fitted (STALE sets are predicted as committed):", "",
             "| set | points | median abs. error | worst | ratios | worst ratio error | order right |",
             "|---|---|---|---|---|---|---|"]
    for name, g in m.groupby("set", sort=False):
        rr = r[r["set"] == name] if len(r) else r
        lines.append(f"| {name} | {len(g)} | {g['error'].abs().median():.0%} | {g['error'].abs().max():.0%} | "
                     f"{len(rr)} | {rr['error'].abs().max() if len(rr) else float('nan'):.0%} | "
                     f"{int(rr['order_right'].sum()) if len(rr) else 0} of {len(rr)} |")
    skipped = p[~p["modeled"]]
    worst = m.loc[m["error"].abs().idxmax()] if len(m) else None
    ok = (m["error"].abs().median() <= MEDIAN_TARGET and m["error"].abs().max() <= WORST_TARGET
          and (r["error"].abs() <= RATIO_TARGET).all() and r["order_right"].all())
    lines += ["", f"All {len(m)} points: median |error| {m['error'].abs().median():.0%} (target "
              f"{MEDIAN_TARGET:.0%}), worst {m['error'].abs().max():.0%} (target {WORST_TARGET:.0%}: {worst['impl']} on "
              f"{worst['set']}, {worst['data']}, batch {worst['batch_size']:,}, {worst['world_size']} rank(s)); "
              f"ratios within {RATIO_TARGET:.0%}: {int((r['error'].abs() <= RATIO_TARGET).sum())} of {len(r)}. "
              f"Targets: {'met' if ok else '**not met**'}."
              + (f" Not modeled: {len(skipped)} points of {', '.join(sorted(set(skipped['impl'])))} (recsys24)."
                 if len(skipped) else "")]
    lines += ["", "| set | system | data | batch | ranks | measured ms | modeled ms | " + " / ".join(COMPONENTS)
              + " ms | error |", "|---|---|---|---|---|---|---|---|---|"]
    for _, x in m.iterrows():
        parts = " / ".join(f"{x[f'{c}_ms']:.1f}" for c in COMPONENTS)
        lines.append(f"| {x['set']} | {x['label']} | {x['data']}{f' ({x.rows:,} rows)' if x['rows'] else ''} | "
                     f"{x['batch_size']:,} | {x['world_size']} | {x['measured_ms']:.1f} | {x['predicted_ms']:.1f} | "
                     f"{parts} | {x['error']:+.0%} |")
    return lines
