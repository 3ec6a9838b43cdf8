"""EcoRec's Figure 11 as ratios: EL-Rec / EcoRec and TT-Rec / EcoRec step time per batch size, ours (per device the
runs were measured on) beside the artifact's (fig11_artifact.py: one GPU). Only a GPU run of ours is comparable with
the artifact; a CPU run is drawn for its shape and labelled as such."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from reproduce.analysis import fig11_artifact
from reproduce.analysis.plots import style

PAIRS = (("elrec", "EL-Rec / EcoRec"), ("ttrec", "TT-Rec (FBTT) / EcoRec"))


def measured_ratios(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (device, batch): each system's step time over EcoRec's, paired by round (the median of the per-round ratios
    and its signed-rank interval: stats.paired_ratio)."""
    from reproduce.analysis.stats import by_round, paired_ratio

    rows = []
    runs = runs.assign(on=runs["device"].astype(str) + ", " + (runs["device_kind"].astype(str) if "device_kind" in runs
                                                                else "cpu"))
    for (device, batch), g in runs.groupby(["on", "batch_size"]):
        eco = by_round(g[g["impl"] == "ecorec"], "total_ms")
        if not eco:
            continue
        for impl, _ in PAIRS:
            mine = by_round(g[g["impl"] == impl], "total_ms")
            if mine:
                v, lo, hi, n = paired_ratio(mine, eco)
                rows.append({"device": device, "batch_size": int(batch), "impl": impl, "ratio": v, "ratio_lo": lo,
                             "ratio_hi": hi, "rounds": n})
    return pd.DataFrame(rows, columns=["device", "batch_size", "impl", "ratio", "ratio_lo", "ratio_hi", "rounds"])


def fig11_ratios(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    style.setup()
    runs = style.runs(df)
    ok = runs if runs is not None else df[df["status"] == "ok"]
    ours = measured_ratios(ok)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), squeeze=False)
    batches = sorted(fig11_artifact.TOTAL_MS)
    for ax, (impl, title) in zip(axes[0], PAIRS):
        ax.plot(batches, [fig11_artifact.ratio(impl, b) for b in batches], marker="s", color="0.4", linestyle="--",
                label="artifact (one GPU, results.txt)")
        for device, g in ours[ours["impl"] == impl].groupby("device"):
            g = g.sort_values("batch_size")
            ax.plot(g["batch_size"], g["ratio"], marker="o", label=f"ours ({device})")
            style.whiskers_xy(ax, g, "batch_size", "ratio", "ratio_lo", "ratio_hi")
        ax.axhline(1.0, color="0.7", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch size")
        ax.set_ylabel("step time ratio (x)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7)
    gpu = bool((ok["device_kind"] == "cuda").any()) if "device_kind" in ok else False
    verdict = "a GPU run: comparable with the artifact" if gpu else "no GPU run: ours are not comparable with the artifact"
    fig.suptitle(f"EcoRec Fig 11 as ratios over EcoRec, 28 Meta-like tables, D 32, R 32 ({verdict})\n"
                 f"{style.caption(df, whiskers=style.has_whiskers(fig), paired=True)}", y=1.04, fontsize=10)
    style.footnote(df, fig)
    return style.save(fig, out_dir, "fig11_ratios")
