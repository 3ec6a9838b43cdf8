"""RecSys'24 (EMBark) figures: measured step time, exchanged bytes and comm share per plan on gloo ranks; the cost
model's predicted step against the measured one (Spearman rank correlation); the modeled speedup of the planner
over table_row_wise at 8-128 GPUs (from reproduce/analysis/recsys24_model.py's CSV)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import seaborn as sns

from reproduce.analysis.plots import style


def measured(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    style.setup()
    ok = df[df["status"] == "ok"].copy()
    ok = ok[ok["world_size"] == ok["world_size"].mode().iloc[0]]  # the world every workload ran at
    ok["comm MB per step"] = ok["comm_bytes_per_step"] / 1e6
    ok["comm share (%)"] = 100 * ok["comm_share"]
    order = list(dict.fromkeys(ok["label"]))
    paths = []
    for y, stem in (("total_ms", "measured_step"), ("comm MB per step", "measured_bytes"),
                    ("comm share (%)", "measured_comm_share")):
        g = sns.catplot(data=ok, kind="bar", x="data", y=y, hue="label", hue_order=order, height=3.2, aspect=2.2,
                        errorbar=None)
        for ax in g.axes.flat:
            style.whiskers(ax, ok, "data", y, f"{y}_lo", f"{y}_hi")
        g.set_axis_labels("workload (scaled)", {"total_ms": "embedding step (ms, median)"}.get(y, y))
        g.figure.suptitle(f"EMBark plans on {int(ok['world_size'].max())} gloo ranks (measured; "
                          f"{style.hardware(ok)})\n{style.caption(ok, whiskers=style.has_whiskers(g.figure))}",
                          y=1.08, fontsize=9)
        style.footnote(df, g.figure)
        paths += style.save(g.figure, out_dir, stem)
    return paths + speedup(df, out_dir) + step_vs_shards(df, out_dir)


def speedup(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Each plan's speedup over table_row_wise per workload and rank count, paired by round with the signed-rank
    interval of the median, and the paper's 1.5x average / 1.77x maximum as reference lines."""
    style.setup()
    ok = df[df["status"] == "ok"]
    runs = style.runs(df)
    rows = []
    for (data, world), g in ok.groupby(["data", "world_size"]):
        totals = style.totals(g, runs)
        base = totals.get("table_row_wise")
        star = "*" if "oversubscribed" in g and g["oversubscribed"].fillna(False).astype(bool).any() else ""
        for lab, mine in totals.items():
            if base and lab != "table_row_wise":
                v, lo, hi = style.paired_speedups(totals, "table_row_wise", lab)
                rows.append({"data": data, "world": f"{data}, {world} ranks{star}", "plan": lab, "speedup": v,
                             "speedup_lo": lo, "speedup_hi": hi})
    sp = pd.DataFrame(rows)
    if sp.empty:
        return []
    g = sns.catplot(data=sp, kind="bar", x="world", y="speedup", hue="plan", height=3.4, aspect=2.6, errorbar=None)
    for ax in g.axes.flat:
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
        style.whiskers(ax, sp, "world", "speedup", "speedup_lo", "speedup_hi")
        style.paper_line(ax, "embark-speedup-mean", "planner 1.5× on average (8-128 H100, end to end)")
        style.paper_line(ax, "embark-speedup-max", "1.77× maximum", x=0.55)
        ax.tick_params(axis="x", labelrotation=20, labelsize=7)
    g.set_axis_labels("", "speedup over table_row_wise (×)")
    g.figure.suptitle(f"EMBark plans over table_row_wise (measured embedding step; {style.hardware(ok)}){planner_ran(ok)}"
                      f"\n{style.caption(ok, whiskers=style.has_whiskers(g.figure), paired=True)}", y=1.08, fontsize=9)
    return style.save(g.figure, out_dir, "measured_speedup")


def planner_ran(ok: pd.DataFrame) -> str:
    """What the planner ran, when that was one simple plan unchanged at every point: its bars are that plan."""
    if "plan_start" not in ok:
        return ""
    mine = ok[(ok["label"] == "embark planner") & ok["plan_start"].notna()]
    moves = mine["plan_moves"].fillna(0) if "plan_moves" in mine else pd.Series(0, index=mine.index)
    if mine.empty or mine["plan_start"].nunique() != 1 or (moves != 0).any():
        return ""
    plan = mine["plan_start"].iloc[0]
    return f"\nthe planner chose {plan} unchanged everywhere: its bars are {plan} as the planner ran it"


def step_vs_shards(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Each EMBark plan's measured step against its shard count, per workload at its most common rank count:
    with one fused lookup per cluster per rank the step should follow the work, not the number of shards."""
    style.setup()
    if "plan_shards" not in df:
        return []
    ok = df[(df["status"] == "ok") & df["plan_shards"].notna()].copy()
    if ok.empty:
        return []
    ok = ok[ok["world_size"] == ok["world_size"].mode().iloc[0]]
    g = sns.relplot(data=ok, kind="scatter", x="plan_shards", y="total_ms", hue="label", col="data", s=60,
                    height=3.0, aspect=1.1, facet_kws={"sharey": False, "sharex": False})
    for (data,), ax in zip([(d,) for d in g.col_names], g.axes.flat):
        style.whiskers_xy(ax, ok[ok["data"] == data], "plan_shards", "total_ms", "total_ms_lo", "total_ms_hi")
        ax.set_xscale("log", base=2)
    g.set_axis_labels("shards in the plan", "embedding step (ms, median)")
    g.figure.suptitle(f"Step time vs shard count, {int(ok['world_size'].iloc[0])} gloo ranks (measured; "
                      f"{style.hardware(ok)})\n{style.caption(ok, whiskers=True)}", y=1.1, fontsize=9)
    style.footnote(df, g.figure)
    return style.save(g.figure, out_dir, "step_vs_shards")


def predicted(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Predicted (cost model, cpu-gloo profile) vs measured step time of every EMBark plan."""
    import matplotlib.pyplot as plt

    style.setup()
    from reproduce.analysis.stats import predicted_vs_measured, spearman_ci

    ok, rho = predicted_vs_measured(df)
    if len(ok) < 2:
        return []
    rho, lo, hi = spearman_ci(ok["predicted_step_ms"], ok["total_ms"])
    fig, ax = plt.subplots(figsize=(5.5, 4))
    sns.scatterplot(data=ok, x="predicted_step_ms", y="total_ms", hue="label", style="data", ax=ax, s=60)
    from matplotlib.ticker import NullFormatter

    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("predicted embedding step (ms, cost model)")
    ax.set_ylabel("measured step (ms)")
    ax.set_title(f"Cost model vs measurement: Spearman ρ = {rho:.2f} [{lo:.2f}, {hi:.2f}] over {len(ok)} plans\n"
                 f"{style.caption(ok, whiskers=False)}", fontsize=8)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return style.save(fig, out_dir, "predicted_vs_measured")


def modeled(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    style.setup()
    g = sns.catplot(data=df, kind="bar", x="gpus", y="speedup", hue="workload", height=3.2, aspect=1.8)
    g.set_axis_labels("GPUs (DGX-H100 nodes of 8)", "planner / table_row_wise (×, modeled)")
    for ax in g.axes.flat:
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
    for ax in g.axes.flat:
        style.paper_line(ax, "embark-speedup-mean", "1.5× average, 1.77× max (end to end, measured on H100s)")
    g.figure.suptitle("EMBark planner over table_row_wise, embedding step (cost model, not measured)", y=1.04)
    paths = style.save(g.figure, out_dir, "modeled_speedup")
    if "planner_comm_share" in df:
        long = df.melt(id_vars=["workload", "gpus"], value_vars=["planner_comm_share", "table_row_wise_comm_share"],
                       var_name="plan", value_name="share")
        long["plan"] = long["plan"].str.replace("_comm_share", "")
        long["comm share (%)"] = 100 * long["share"]
        g = sns.relplot(data=long, kind="line", x="gpus", y="comm share (%)", hue="workload", style="plan",
                        marker="o", height=3.2, aspect=1.6)
        for ax in g.axes.flat:
            ax.set_xscale("log", base=2)
        g.set_axis_labels("GPUs (DGX-H100 nodes of 8)", "communication, % of the embedding step (modeled)")
        g.figure.suptitle("Communication share vs GPU count (cost model, embedding step only; the paper's 25 % -> "
                          "51 % is of the whole training step)", y=1.04, fontsize=9)
        paths += style.save(g.figure, out_dir, "modeled_comm_share")
    return paths


def world(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Step time and comm share against the number of ranks, for the workloads measured at several."""
    style.setup()
    ok = df[df["status"] == "ok"].copy()
    multi = ok.groupby("data")["world_size"].nunique()
    ok = ok[ok["data"].isin(multi[multi > 1].index)]
    ok = ok[ok.groupby(["data", "label"])["world_size"].transform("nunique") > 1]
    if ok.empty:
        return []
    for k in ("", "_lo", "_hi"):
        if f"comm_share{k}" in ok:
            ok[f"comm share (%){k}"] = 100 * ok[f"comm_share{k}"]
    paths = []
    for y, stem, ylabel in (("total_ms", "world_step", "embedding step (ms, median)"),
                            ("comm share (%)", "world_comm_share", "blocked in communication (% of step)")):
        g = sns.relplot(data=ok, kind="line", x="world_size", y=y, hue="label", col="data", marker="o",
                        errorbar=None, height=3.0, aspect=1.3, facet_kws={"sharey": False})
        for data, ax in g.axes_dict.items():
            style.whiskers_xy(ax, ok[ok["data"] == data], "world_size", y, f"{y}_lo", f"{y}_hi")
        g.set_axis_labels("gloo ranks", ylabel)
        g.figure.suptitle(f"EMBark plans over ranks (measured medians; {style.hardware(ok)})\n"
                          f"{style.caption(ok, whiskers=style.has_whiskers(g.figure))}",
                          y=1.08, fontsize=9)
        paths += style.save(g.figure, out_dir, stem)
    return paths
