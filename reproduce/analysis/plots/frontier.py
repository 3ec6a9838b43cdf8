"""The compression frontier (reproduce/analysis/frontier.py): per data set, held-out AUC and step time against the
embedding weight bytes (log scale), one marker per method at each budget, whiskers over seeds, the uncompressed
model as a reference line."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from reproduce.analysis import frontier as fr
from reproduce.analysis.plots import style

MARKERS = "osD^vP*Xh<>"


def _caption(df: pd.DataFrame, seeds: int, drawn: bool) -> str:
    machine = df["machine"].dropna().iloc[0] if "machine" in df and df["machine"].notna().any() else "?"
    if seeds <= 1:
        what = "one seed per point: no whiskers drawn"
    else:
        what = f"{seeds} seeds per point, one run each; medians over seeds, " + (
            "whiskers: range over seeds" if drawn else "no spread over seeds to draw")
    return f"machine {machine}; {style.commits(df)}; {what}"


def _draw(df: pd.DataFrame, out_dir: Path, col: str, ylabel: str, stem: str, title: str) -> list[Path]:
    style.setup()
    table = fr.frontier(df)
    datas = list(dict.fromkeys(table["data"]))
    fig, axes = plt.subplots(1, len(datas), figsize=(6.5 * len(datas), 4.2), squeeze=False)
    methods = list(dict.fromkeys(table.loc[~table["reference"], "method"]))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    drawn = False
    for ax, data in zip(axes[0], datas):
        part = table[table["data"] == data]
        ref = part[part["reference"]].iloc[0]
        ax.axhline(ref[col], color="0.35", lw=1.0, ls="--")
        ax.plot([ref["weight_bytes"]], [ref[col]], marker="o", color="0.35", ls="--", lw=1.0,
                label=f"{ref['method']} (uncompressed; dashed: its level)")
        for i, m in enumerate(methods):
            g = part[part["method"] == m].sort_values("weight_bytes")
            if g.empty:
                continue
            ax.plot(g["weight_bytes"], g[col], marker=MARKERS[i % len(MARKERS)], color=colors[i % len(colors)],
                    lw=0.8, label=m)
            spread = g[g[f"{col}_min"] < g[f"{col}_max"]]
            if len(spread):
                ax.errorbar(spread["weight_bytes"], spread[col],
                            yerr=[spread[col] - spread[f"{col}_min"], spread[f"{col}_max"] - spread[col]],
                            fmt="none", ecolor=colors[i % len(colors)], elinewidth=0.8, capsize=2)
                drawn = True
        ax.set_xscale("log")
        ax.set_xlabel("embedding weight bytes (log)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"data: {Path(str(data)).name}", fontsize=9, loc="left")
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.suptitle(f"{title}\n{_caption(df, int(table['seeds'].max()), drawn)}", fontsize=9, y=1.02)
    return style.save(fig, out_dir, stem)


def auc_frontier(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    return _draw(df, out_dir, "auc", "held-out AUC (whole split)", "compression_frontier",
                 "Held-out AUC against embedding bytes, each method at each budget")


def step_time(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    return _draw(df, out_dir, "total_ms", "training step ms (median)", "compression_step_time",
                 "Training step time against embedding bytes, each method at each budget")
