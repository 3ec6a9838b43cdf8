"""Figures over world size (ranks: GPUs, or gloo processes on a CPU machine): speedup over the baseline,
throughput, per-rank memory and the share of step time spent blocked in communication; and EcoRec's pipeline
ablation (batch-wise vs table-wise, + reordering, + slope), the Fig 16 analogue.

Ablation points carry labels that start with ``ABLATION``; the main figures leave them out."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import seaborn as sns

from reproduce.analysis.plots import style

ABLATION = "ablation: "


def _main(df: pd.DataFrame) -> pd.DataFrame:
    """The main points of the datasets measured at more than one world size (one bar per system and size; the
    datasets measured at one size are the per-dataset figure's)."""
    ok = df[(df["status"] == "ok") & ~df["label"].astype(str).str.startswith(ABLATION)].copy()
    ok = ok[ok.groupby("data")["world_size"].transform("nunique") > 1]
    ok["tables"] = ok["max_rows"].map(lambda m: f"rows ≤ {int(m):,}" if m else "full tables")
    return ok


def _order(df: pd.DataFrame, col: str = "label") -> list[str]:
    return list(dict.fromkeys(df[col]))


def world_speedup(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Speedup over the baseline at each world size, and throughput (samples/s of the global batch)."""
    style.setup()
    ok = _main(df)
    paths = []
    base = df["baseline"].iloc[0] if "baseline" in df and len(df) else "baseline"
    for y, stem, label in (("speedup", "world_speedup", f"speedup over {base} (×)"),
                           ("samples_per_s", "world_throughput", "samples / s (global batch)")):
        g = sns.catplot(data=ok, kind="bar", x="world_size", y=y, hue="label", hue_order=_order(ok),
                        col="tables", row="batch_size", sharey=False, height=3.0, aspect=1.4, errorbar=None)
        g.set_axis_labels("ranks (world size)", label)
        for ax in g.axes.flat:
            style.whiskers(ax, ok, "world_size", y, f"{y}_lo", f"{y}_hi")
            if y == "speedup":
                ax.axhline(1.0, color="black", lw=0.8, ls="--")
                if base == "ttrec" and "ecorec" in set(ok["label"]):
                    style.paper_line(ax, 6.82, "EcoRec over TT-Rec 6.82× (setting unpublished)")
        g.set_titles(f"{', '.join(sorted(set(ok['data'])))}: " + "{col_name}, local batch {row_name}")
        g.figure.suptitle(f"Training step over world size (measured; {style.hardware(ok)})\n{style.caption(ok)}",
                          y=1.06, fontsize=9)
        style.footnote(df, g.figure)
        paths += style.save(g.figure, out_dir, stem)
    return paths


def world_memory(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Per-rank memory (the largest rank's peak RSS Δ) and the comm share of the step."""
    style.setup()
    ok = _main(df)
    for k in ("", "_lo", "_hi"):
        if f"peak_rss_delta_bytes{k}" in ok:
            ok[f"peak GiB per rank{k}"] = ok[f"peak_rss_delta_bytes{k}"] / 2**30
    paths = []
    g = sns.catplot(data=ok, kind="bar", x="world_size", y="peak GiB per rank", hue="label", hue_order=_order(ok),
                    col="tables", row="batch_size", sharey=False, height=3.0, aspect=1.4, errorbar=None)
    for ax in g.axes.flat:
        style.whiskers(ax, ok, "world_size", "peak GiB per rank", "peak GiB per rank_lo",
                       "peak GiB per rank_hi")
    g.set_axis_labels("ranks (world size)", "peak RSS Δ of the largest rank (GiB)")
    g.set_titles("{col_name}, local batch {row_name}")
    g.figure.suptitle(f"Memory per rank over world size (measured; {style.hardware(ok)})\n{style.caption(ok)}",
                      y=1.06, fontsize=9)
    style.footnote(df, g.figure)
    paths += style.save(g.figure, out_dir, "world_memory")
    multi = ok[ok["world_size"] > 1].copy()
    if not multi.empty:
        multi["comm share (%)"] = 100 * multi["comm_share"]
        g = sns.catplot(data=multi, kind="bar", x="world_size", y="comm share (%)", hue="label",
                        hue_order=_order(multi), col="tables", row="batch_size", height=3.0, aspect=1.4,
                        errorbar=None)
        g.set_axis_labels("ranks (world size)", "blocked in communication (% of step)")
        g.set_titles("{col_name}, local batch {row_name}")
        g.figure.suptitle(f"Exposed communication of the busiest rank (measured, median over repeats)\n"
                          f"{style.caption(multi)}", y=1.06, fontsize=9)
        paths += style.save(g.figure, out_dir, "world_comm_share")
    return paths


def pipeline_ablation(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    """EcoRec's embedding pipeline variants: step time per world size (Fig 16 analogue)."""
    style.setup()
    ok = df[df["status"] == "ok"]
    abl = ok[ok["label"].astype(str).str.startswith(ABLATION)].copy()
    if abl.empty:
        return []
    abl["variant"] = abl["label"].str[len(ABLATION):]
    keys = set(zip(abl["data"], abl["world_size"], abl["batch_size"], abl["max_rows"]))
    full = ok[(ok["impl"] == "ecorec") & (ok["label"] == "ecorec")].copy()  # the default: all of them on
    full = full[[k in keys for k in zip(full["data"], full["world_size"], full["batch_size"], full["max_rows"])]]
    full["variant"] = "twp + reordering + slope (default)"
    both = pd.concat([abl, full])
    # the paper's order: batch-wise, table-wise, + reordering, + slope; others after them
    paper = ["batch-wise", "table-wise", "twp + reordering", "twp + reordering + slope"]
    rank = {v: next((i for i, k in enumerate(paper) if v.startswith(k) and not v.startswith(k + " +")), len(paper))
            for v in both["variant"].unique()}
    order = sorted(_order(both, "variant"), key=lambda v: rank[v])
    g = sns.catplot(data=both, kind="bar", x="world_size", y="total_ms", hue="variant", hue_order=order,
                    height=3.2, aspect=1.6, errorbar=None)
    for ax in g.axes.flat:
        style.whiskers(ax, both, "world_size", "total_ms", "total_ms_lo", "total_ms_hi")
    g.set_axis_labels("ranks (world size)", "step time (ms, median)")
    g.figure.suptitle(f"EcoRec embedding pipeline ablation (measured; {style.hardware(both)})\n"
                      f"{style.caption(both)}", y=1.08, fontsize=9)
    return style.save(g.figure, out_dir, "pipeline_ablation")
