"""SC24 (EcoRec) figure family: speedup over the baseline and memory, per dataset and batch size."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import seaborn as sns

from reproduce.plots import style


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == "ok"].copy()


def speedup(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    style.setup()
    ok = _ok(df)
    order = list(dict.fromkeys(df["impl"]))
    g = sns.catplot(
        data=ok, kind="bar", x="batch_size", y="speedup", hue="impl", hue_order=[i for i in order if i in set(ok["impl"])],
        col="data", sharey=False, height=3.2, aspect=1.3,
    )
    base = df["baseline"].iloc[0] if "baseline" in df and len(df) else "baseline"
    g.set_axis_labels("batch size", f"speedup over {base} (×)")
    for ax in g.axes.flat:
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
    g.figure.suptitle(f"Training-step speedup (measured; {style.hardware(ok)})", y=1.04)
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
    g.figure.suptitle(f"Embedding memory (measured and analytic; {style.hardware(ok)})", y=1.03)
    style.footnote(df, g.figure)
    return style.save(g.figure, out_dir, "memory")
