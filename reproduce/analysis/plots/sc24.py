"""SC24 (EcoRec) figure family: speedup over the baseline and memory, per dataset and batch size."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import seaborn as sns

from reproduce.analysis.plots import style


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == "ok"].copy()


def speedup(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    style.setup()
    ok = _ok(df)
    order = list(dict.fromkeys(df["impl"]))
    g = sns.catplot(
        data=ok, kind="bar", x="batch_size", y="speedup", hue="impl", hue_order=[i for i in order if i in set(ok["impl"])],
        col="data", sharey=False, height=3.2, aspect=1.3, errorbar=None,
    )
    base = df["baseline"].iloc[0] if "baseline" in df and len(df) else "baseline"
    g.set_axis_labels("batch size", f"speedup over {base} (×)")
    for ax in g.axes.flat:
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
        style.whiskers(ax, ok, "batch_size", "speedup", "speedup_lo", "speedup_hi")
    g.figure.suptitle(f"Training-step speedup (measured; {style.hardware(ok)})\n"
                      f"{style.caption(ok, whiskers=True, paired=True)}", y=1.08,
                      fontsize=9)
    style.footnote(df, g.figure)
    return style.save(g.figure, out_dir, "speedup")


def memory(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    style.setup()
    ok = _ok(df)
    rows = []
    for _, r in ok.iterrows():
        rows.append({**r, "kind": "measured peak RSS Δ", "GiB": r["peak_rss_delta_bytes"] / 2**30})
        rows.append({**r, "kind": "analytic (params+state+intermediates)", "GiB": r["analytic_bytes"] / 2**30})
    long = pd.DataFrame(rows)
    order = list(dict.fromkeys(df["impl"]))
    g = sns.catplot(
        data=long, kind="bar", x="impl", y="GiB", hue="kind", col="data", row="batch_size",
        order=[i for i in order if i in set(ok["impl"])], height=3.0, aspect=1.5, sharey=False,
    )
    g.set_axis_labels("", "memory (GiB)")
    g.figure.suptitle(f"Embedding memory (measured and analytic; {style.hardware(ok)})\n"
                      f"{style.caption(ok, whiskers=False)}",
                      y=1.06, fontsize=9)
    style.footnote(df, g.figure)
    return style.save(g.figure, out_dir, "memory")


def datasets(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    """SC24 Fig 10 analogue: EcoRec's speedup over EL-Rec and over TT-Rec on each dataset, at the world size
    measured on most datasets (full tables, main configurations; ablation variants left out), paired by round with
    the signed-rank interval of the Hodges-Lehmann estimate (the paper's values as reference lines only where the claims call this
    comparable)."""
    style.setup()
    ok = _ok(df)
    ok = ok[(ok["max_rows"] == 0) & (ok["label"] == ok["impl"])]
    runs = style.runs(df)
    keys = ["data", "world_size", "batch_size"]
    rows = []
    for idx, g in ok.groupby(keys):
        totals = style.totals(g, runs)  # labels are the impls here
        for base in ("elrec", "ttrec"):
            if "ecorec" in totals and base in totals:
                v, lo, hi = style.paired_speedups(totals, base, "ecorec")
                rows.append({**dict(zip(keys, idx)), "over": f"over {base}", "speedup": v, "speedup_lo": lo,
                             "speedup_hi": hi})
    sp = pd.DataFrame(rows)
    if sp.empty:
        return []
    worlds = sp.groupby("world_size")["data"].nunique()
    sp = sp[sp["world_size"] == worlds.idxmax()]  # the world size with the most datasets
    g = sns.catplot(data=sp, kind="bar", x="data", y="speedup", hue="over", height=3.4, aspect=1.6, errorbar=None)
    for ax in g.axes.flat:
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
        for c in ax.containers:
            ax.bar_label(c, fmt="%.2f×", fontsize=7, padding=6)
        style.whiskers(ax, sp, "data", "speedup", "speedup_lo", "speedup_hi")
        style.paper_line(ax, "ecorec-vs-elrec", "up to 3.1× over EL-Rec (32 GPUs)", x=0.55)
        style.paper_line(ax, "ecorec-vs-ttrec", "6.82× over TT-Rec")
    n = int(sp["world_size"].iloc[0])
    # the caption describes the points drawn: EcoRec's pairs at this world size, not other sizes' or systems' rounds
    drawn = ok[(ok["world_size"] == n) & ok["data"].isin(sp["data"]) & ok["batch_size"].isin(sp["batch_size"])
               & ok["impl"].isin(["ecorec", "elrec", "ttrec"])]
    g.set_axis_labels("dataset", "EcoRec speedup (×)")
    g.figure.suptitle(f"EcoRec speedup per dataset at {n} ranks, local batch {int(sp['batch_size'].iloc[0])} "
                      f"(measured; {style.hardware(drawn)}; paper Fig 10: 32 GPUs)\n"
                      f"{style.caption(drawn, whiskers=True, paired=True)}", y=1.08,
                      fontsize=9)
    return style.save(g.figure, out_dir, "datasets_speedup")
