"""Batch-size scaling (SC24 Fig 11 / Table 1 analogues): time per step and peak memory against the
batch size, one line per implementation; points that did not run (oom, failed) are marked on the axis."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from reproduce.analysis.plots import style


def batch_scaling(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    style.setup()
    ok = df[df["status"] == "ok"].copy()
    ok["step ms"] = ok["total_ms"]
    ok["forward ms"] = ok["forward_ms"]
    peak = ok["peak_rss_delta_bytes"].where(ok["cuda_peak_bytes"].isna(), ok["cuda_peak_bytes"])
    ok["peak memory GiB"] = peak / 2**30
    ok["step ms_lo"], ok["step ms_hi"] = ok.get("total_ms_lo"), ok.get("total_ms_hi")
    if ok["cuda_peak_bytes"].isna().all() and "peak_rss_delta_bytes_lo" in ok:  # the measured peak's interval
        ok["peak memory GiB_lo"] = ok["peak_rss_delta_bytes_lo"] / 2**30
        ok["peak memory GiB_hi"] = ok["peak_rss_delta_bytes_hi"] / 2**30
    order = [i for i in dict.fromkeys(df["impl"]) if i in set(ok["impl"])]
    datas = list(dict.fromkeys(df["data"]))
    fig, axes = plt.subplots(len(datas), 3, figsize=(13, 3.4 * len(datas)), squeeze=False)
    for row, data in zip(axes, datas):
        part = ok[ok["data"] == data]
        for ax, col in zip(row, ("forward ms", "step ms", "peak memory GiB")):
            sns.lineplot(data=part, x="batch_size", y=col, hue="impl", hue_order=order, marker="o", errorbar=None, ax=ax)
            style.whiskers_xy(ax, part, "batch_size", col, f"{col}_lo", f"{col}_hi")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("batch size")
            ax.set_ylabel(col)
            ax.set_title(data, fontsize=9)
            style.legend_on_last(ax, row)
        for _, r in df[(df["status"] != "ok") & (df["data"] == data)].iterrows():
            row[1].annotate(f"{r['impl']}: {r['status']}", (r["batch_size"], row[1].get_ylim()[1]), fontsize=7,
                            rotation=90, va="top")
    fig.subplots_adjust(hspace=0.5, wspace=0.3)
    fig.suptitle(f"Step time and peak memory vs batch size (measured medians; {style.hardware(ok)})\n"
                 f"{style.caption(ok, whiskers=style.has_whiskers(fig))}", y=1.01,
                 fontsize=10)
    style.footnote(df, fig)
    return style.save(fig, out_dir, "batch_scaling")
