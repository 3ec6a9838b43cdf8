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
                    style.paper_line(ax, "ecorec-vs-ttrec", "EcoRec over TT-Rec 6.82× (setting unpublished)")
        g.set_titles(f"{', '.join(sorted(set(ok['data'])))}: " + "{col_name}, local batch {row_name}")
        g.figure.suptitle(f"Training step over world size (measured; {style.hardware(ok)})\n"
                          f"{style.caption(ok, whiskers=True, paired=y == 'speedup')}",
                          y=1.06, fontsize=9)
        style.footnote(df, g.figure)
        paths += style.save(g.figure, out_dir, stem)
    return paths + world_step_parts(df, out_dir)


def world_step_parts(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    """What each world size's step is made of, per system: compute (the step less the busiest rank's time blocked in
    communication and the update phase), exposed communication, and the update; with the per-process CPU time of
    the step as a marker where recorded. A rank's compute at N ranks against 1 rank shows what the world size
    costs besides the exchange (e.g. ranks sharing cores)."""
    import matplotlib.pyplot as plt
    import numpy as np

    style.setup()
    ok = _main(df)
    if ok.empty:
        return []
    ok["comm"] = ok["comm_blocked_ms"].fillna(0.0) if "comm_blocked_ms" in ok else 0.0
    ok["update"] = ok["update_ms"].fillna(0.0)
    ok["compute"] = ok["total_ms"] - ok["comm"] - ok["update"]
    labels, worlds = _order(ok), sorted(ok["world_size"].unique())
    panels = list(dict.fromkeys(ok["tables"]))
    fig, axes = plt.subplots(1, len(panels), figsize=(max(6.0, 1.6 * len(worlds) * len(labels) / 2) * len(panels),
                                                      3.6), squeeze=False)
    colors = dict(zip(labels, sns.color_palette("colorblind", len(labels))))
    width = 0.8 / len(labels)
    for ax, panel in zip(axes[0], panels):
        part = ok[ok["tables"] == panel]
        for i, lab in enumerate(labels):
            rows = part[part["label"] == lab].set_index("world_size").reindex(worlds)
            x = np.arange(len(worlds)) + (i - (len(labels) - 1) / 2) * width
            ax.bar(x, rows["compute"], width, color=colors[lab], label=lab)
            ax.bar(x, rows["comm"], width, bottom=rows["compute"], color=colors[lab], alpha=0.45, hatch="//")
            ax.bar(x, rows["update"], width, bottom=rows["compute"] + rows["comm"], color="0.6")
            if "cpu_ms" in rows and rows["cpu_ms"].notna().any():
                ax.scatter(x, rows["cpu_ms"], marker="_", s=120, color="black", zorder=3)
        ax.set_xticks(np.arange(len(worlds)), [str(w) for w in worlds])
        ax.set_xlabel("ranks (world size)")
        ax.set_ylabel("step (ms, median)")
        ax.set_title(f"{', '.join(sorted(set(part['data'])))}: {panel}", fontsize=9)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    parts = [Patch(facecolor="white", edgecolor="0.3", label="compute (solid)"),
             Patch(facecolor="white", edgecolor="0.3", hatch="//", label="blocked in communication"),
             Patch(facecolor="0.6", label="update"),
             Line2D([], [], color="black", marker="_", ls="none", markersize=12, label="process CPU time")]
    handles, _ = axes[0][-1].get_legend_handles_labels()
    axes[0][-1].legend(handles=handles + parts, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1),
                       frameon=False)
    over = ok[ok["oversubscribed"].fillna(False).astype(bool)]["world_size"].unique() if "oversubscribed" in ok \
        else []
    note = (f"; {', '.join(str(int(w)) for w in sorted(over))} ranks oversubscribe the cores" if len(over) else "")
    fig.suptitle(f"What the step is made of over world size (measured; {style.hardware(ok)}; black tick: the "
                 f"slowest rank's process CPU time per step{note})\n{style.caption(ok, whiskers=False)}", y=1.02,
                 fontsize=9)
    style.footnote(df, fig)
    return style.save(fig, out_dir, "world_step_parts")


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
    g.figure.suptitle(f"Memory per rank over world size (measured; {style.hardware(ok)})\n"
                      f"{style.caption(ok, whiskers=True)}",
                      y=1.06, fontsize=9)
    style.footnote(df, g.figure)
    paths += style.save(g.figure, out_dir, "world_memory")
    multi = ok[ok["world_size"] > 1].copy()
    if not multi.empty:
        for k in ("", "_lo", "_hi"):
            if f"comm_share{k}" in multi:
                multi[f"comm share (%){k}"] = 100 * multi[f"comm_share{k}"]
        g = sns.catplot(data=multi, kind="bar", x="world_size", y="comm share (%)", hue="label",
                        hue_order=_order(multi), col="tables", row="batch_size", height=3.0, aspect=1.4,
                        errorbar=None)
        for ax in g.axes.flat:
            style.whiskers(ax, multi, "world_size", "comm share (%)", "comm share (%)_lo", "comm share (%)_hi")
        g.set_axis_labels("ranks (world size)", "blocked in communication (% of step)")
        g.set_titles("{col_name}, local batch {row_name}")
        g.figure.suptitle(f"Exposed communication of the busiest rank (measured, median over repeats)\n"
                          f"{style.caption(multi, whiskers=style.has_whiskers(g.figure))}", y=1.06, fontsize=9)
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
                      f"{style.caption(both, whiskers=True)}", y=1.08, fontsize=9)
    return style.save(g.figure, out_dir, "pipeline_ablation")
