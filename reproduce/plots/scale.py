"""The scale model's figures: modeled vs measured step at every measured world size (error on each point), and
the projection to 128 ranks (every line labelled modeled)."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from reproduce.plots import style


def draw_scale(val: pd.DataFrame, proj: pd.DataFrame, cal, out_dir: Path) -> list[Path]:
    style.setup()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    order = list(dict.fromkeys(val["impl"]))
    sns.lineplot(data=val, x="world_size", y="measured_ms", hue="impl", hue_order=order, marker="o", ax=ax)
    pal = dict(zip(order, sns.color_palette("colorblind", len(order))))
    for impl, part in val.groupby("impl"):
        ax.plot(part["world_size"], part["modeled_ms"], ls="--", marker="x", color=pal[impl])
        for _, r in part.iterrows():
            ax.annotate(f"{r['error']:+.0%}", (r["world_size"], r["modeled_ms"]), fontsize=7, xytext=(4, 2),
                        textcoords="offset points", color=pal[impl])
    mape = val["error"].abs().mean()
    ax.set(xscale="log", yscale="log", xlabel="ranks (world size)", ylabel="step ms")
    ax.set_xticks(sorted(val["world_size"].unique()), labels=[str(x) for x in sorted(val["world_size"].unique())])
    ax.set_title(f"Scale model validation: measured (solid) vs modeled (dashed); mean |error| {mape:.0%}\n"
                 f"{cal.machine}, {cal.cores} cores shared by the ranks", fontsize=9)
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    paths = style.save(fig, out_dir, "validation")

    ok = proj[proj["feasible"]]
    g = sns.relplot(data=ok, kind="line", x="world_size", y="step_ms", hue="impl", col="workload", marker="o",
                    height=3.4, aspect=1.2, facet_kws={"sharey": False})
    for ax in g.axes.flat:
        ax.set(xscale="log", yscale="log")
        ax.set_xticks(list(ok["world_size"].unique()), labels=[str(x) for x in ok["world_size"].unique()])
    g.set_axis_labels("ranks, one per core/GPU (modeled)", "modeled step ms")
    g.set_titles("{col_name}")
    g.figure.suptitle("MODELED step time (per-op costs fitted on this machine's records, "
                      f"{1 / cal.beta_ms_per_byte / 1e6:.2f} GB/s per rank fitted); table-wise ends at the table count",
                      y=1.05, fontsize=9)
    paths += style.save(g.figure, out_dir, "projection")

    sp = proj[proj["impl"] == "ecorec"].melt(id_vars=["workload", "world_size"],
                                              value_vars=["ecorec_speedup_over_elrec", "ecorec_speedup_over_ttrec"],
                                              var_name="over", value_name="speedup").dropna()
    sp["over"] = sp["over"].str.replace("ecorec_speedup_over_", "over ")
    g = sns.relplot(data=sp, kind="line", x="world_size", y="speedup", hue="over", col="workload", marker="o",
                    height=3.4, aspect=1.2)
    for ax in g.axes.flat:
        ax.set_xscale("log")
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
    g.set_axis_labels("ranks (modeled)", "EcoRec speedup (×, modeled)")
    g.set_titles("{col_name}")
    g.figure.suptitle("MODELED EcoRec speedup over EL-Rec and TT-Rec (paper, 32 GPUs: 3.1× and 6.82×)", y=1.05,
                      fontsize=9)
    paths += style.save(g.figure, out_dir, "projection_speedup")
    return paths
