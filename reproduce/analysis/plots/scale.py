"""The scale model's figures: modeled vs measured step at every measured world size (error on each point), and
the projection to 128 ranks (every line labelled modeled)."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from reproduce.analysis.plots import style


def _ranks_axis(ax, worlds) -> None:
    """A log2 axis with a labelled tick at each world size."""
    from matplotlib.ticker import NullLocator

    ticks = sorted(int(x) for x in pd.unique(worlds))
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, labels=[str(x) for x in ticks])
    ax.xaxis.set_minor_locator(NullLocator())


def draw_scale(val: pd.DataFrame, proj: pd.DataFrame, cal, out_dir: Path) -> list[Path]:
    style.setup()
    datas = list(dict.fromkeys(val["data"]))
    widths = [3 if val[val["data"] == d]["world_size"].nunique() > 1 else 1.4 for d in datas]
    fig, axes = plt.subplots(1, len(datas), figsize=(2.2 * sum(widths) + 2, 4.2), squeeze=False,
                             gridspec_kw={"width_ratios": widths}, sharey=True)
    order = list(dict.fromkeys(val["impl"]))
    pal = dict(zip(order, sns.color_palette("colorblind", len(order))))
    for ax, data in zip(axes[0], datas):
        part = val[val["data"] == data]
        for impl, rows in part.groupby("impl", sort=False):
            rows = rows.sort_values("world_size")
            ax.plot(rows["world_size"], rows["measured_ms"], marker="o", color=pal[impl], label=f"{impl} measured")
            ax.plot(rows["world_size"], rows["modeled_ms"], marker="x", ls="--", color=pal[impl],
                    label=f"{impl} modeled")
            for _, r in rows[rows["error"].notna()].iterrows():
                ax.annotate(f"{r['error']:+.0%}", (r["world_size"], r["modeled_ms"]), fontsize=7, xytext=(4, 2),
                            textcoords="offset points", color=pal[impl])
        ax.set(yscale="log", xlabel="ranks (world size)", ylabel="step ms", title=data)
        _ranks_axis(ax, part["world_size"])
    seen: dict = {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    axes[0][-1].legend(seen.values(), seen.keys(), loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False,
                       fontsize=7)
    mape = val["error"].abs().mean()
    inside = val["in_sample_error"].abs().mean() if "in_sample_error" in val else float("nan")
    fig.suptitle(f"Scale model validation, leave one world size out: measured (solid) vs predicted by a fit on the "
                 f"other world sizes (dashed); mean |error| {mape:.0%} out of sample ({inside:.0%} in sample)\n"
                 f"{cal.machine}, {cal.cores} cores shared by the ranks; each point one run of the sc24 set "
                 f"(its median step over the run's timed steps), {len(val)} runs; no intervals drawn", fontsize=9,
                 y=1.02)
    paths = style.save(fig, out_dir, "validation")

    ok = proj[proj["feasible"]]
    g = sns.relplot(data=ok, kind="line", x="world_size", y="step_ms", hue="impl", col="workload", marker="o",
                    height=3.4, aspect=1.2, facet_kws={"sharey": False})
    for ax in g.axes.flat:
        ax.set(yscale="log")
        _ranks_axis(ax, ok["world_size"])
    g.set_axis_labels("ranks, one per core/GPU (modeled)", "modeled step ms")
    g.set_titles("{col_name}")
    g.figure.suptitle("MODELED step time (per-op costs fitted on this machine's records, "
                      f"{1 / cal.beta_ms_per_byte / 1e6:.2f} GB/s per rank fitted); table-wise ends at the table "
                      "count; point values, no intervals",
                      y=1.05, fontsize=9)
    paths += style.save(g.figure, out_dir, "projection")

    sp = proj[proj["impl"] == "ecorec"].melt(id_vars=["workload", "world_size"],
                                              value_vars=["ecorec_speedup_over_elrec", "ecorec_speedup_over_ttrec"],
                                              var_name="over", value_name="speedup").dropna()
    sp["over"] = sp["over"].str.replace("ecorec_speedup_over_", "over ")
    g = sns.relplot(data=sp, kind="line", x="world_size", y="speedup", hue="over", col="workload", marker="o",
                    height=3.4, aspect=1.2)
    for ax in g.axes.flat:
        _ranks_axis(ax, sp["world_size"])
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
    g.set_axis_labels("ranks (modeled)", "EcoRec speedup (×, modeled)")
    g.set_titles("{col_name}")
    g.figure.suptitle("MODELED EcoRec speedup over EL-Rec and TT-Rec (point values, no intervals; the out-of-sample "
                      "error of the model is in the validation figure)", y=1.05, fontsize=9)
    paths += style.save(g.figure, out_dir, "projection_speedup")
    return paths
