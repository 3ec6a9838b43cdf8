"""Table-size sweep: step time and memory against the table's rows, dense vs TT, with the parameter bytes of
every system (known even where a run was refused) and the point where the dense table stops fitting."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from reproduce.analysis.plots import style


def table_size(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    style.setup()
    df = df[df["rows"] > 0].copy()
    ok = df[df["status"] == "ok"].copy()
    ok["step ms"] = ok["total_ms"]
    peak = ok["peak_rss_delta_bytes"].where(ok["cuda_peak_bytes"].isna(), ok["cuda_peak_bytes"]) \
        if "cuda_peak_bytes" in ok else ok["peak_rss_delta_bytes"]
    ok["peak memory GiB"] = peak / 2**30
    ok["step ms_lo"], ok["step ms_hi"] = ok.get("total_ms_lo"), ok.get("total_ms_hi")
    if "cuda_peak_bytes" not in ok or ok["cuda_peak_bytes"].isna().all():  # the interval of the peak RSS measured
        for end in ("lo", "hi"):
            if f"peak_rss_delta_bytes_{end}" in ok:
                ok[f"peak memory GiB_{end}"] = ok[f"peak_rss_delta_bytes_{end}"] / 2**30
    ok["parameters GiB"] = ok["param_bytes"] / 2**30
    order = [i for i in dict.fromkeys(df["impl"]) if i in set(ok["impl"])]
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for ax, col in zip(axes, ("step ms", "peak memory GiB", "parameters GiB")):
        sns.lineplot(data=ok, x="rows", y=col, hue="impl", hue_order=order, marker="o", errorbar=None, ax=ax)
        ax.set(xscale="log", yscale="log", xlabel="rows of the table")
        style.whiskers_xy(ax, ok, "rows", col, f"{col}_lo", f"{col}_hi")
        style.legend_on_last(ax, axes)
    refused = df[df["status"] == "oom"]
    for _, r in refused.iterrows():
        for ax in axes:
            ax.axvline(r["rows"], color="red", lw=0.8, ls=":")
        axes[1].annotate(f"{r['impl']} does not fit", (r["rows"], axes[1].get_ylim()[1]), fontsize=7, rotation=90,
                         va="top", ha="right", color="red")
    fig.suptitle(f"One table of 1e5…1e9 rows, dense vs TT (measured; {style.hardware(ok)}; red: refused, "
                 f"parameters larger than the memory available)\n"
                 f"{style.caption(ok, whiskers=style.has_whiskers(fig))}", y=1.05, fontsize=9)
    fig.subplots_adjust(wspace=0.3)
    style.footnote(df, fig)
    return style.save(fig, out_dir, "table_size")
