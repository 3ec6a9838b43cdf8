"""Accuracy beside speed: held-out AUC and log loss against the training step, one line per run label
(implementation or option variant, e.g. an initializer; per implementation too when several share a label), from
each record's eval curve."""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from reproduce.analysis.plots import style


def auc_vs_step(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    style.setup()
    rows = []
    ok = df[(df["status"] == "ok")]
    if "eval_curve" not in ok:
        raise ValueError("no record has an eval curve: run the experiment with eval_every > 0")
    for _, r in ok[ok["eval_curve"].notna()].iterrows():
        for point in json.loads(r["eval_curve"]):
            rows.append({"run": r["label"], "impl": r["impl"], "data": Path(str(r["data"])).name,
                         "step": point["step"], "AUC": point["auc"], "log loss": point["logloss"]})
    curves = pd.DataFrame(rows)
    # a label several implementations share (an option variant run by each): one line per implementation
    shared = curves.groupby("run")["impl"].nunique().max() > 1
    datas = list(dict.fromkeys(curves["data"]))
    fig, axes = plt.subplots(len(datas), 2, figsize=(11, 3.6 * len(datas)), squeeze=False)
    for row, data in zip(axes, datas):
        part = curves[curves["data"] == data]
        for ax, col in zip(row, ("AUC", "log loss")):
            sns.lineplot(data=part, x="step", y=col, hue="run", style="impl" if shared else None, marker="o",
                         markersize=3, ax=ax)
            ax.set_title(data, fontsize=9)
            style.legend_on_last(ax, row)
    fig.subplots_adjust(hspace=0.45, wspace=0.3)
    fig.suptitle("Held-out AUC and log loss vs training step (same batches and steps for every run)", y=0.99)
    style.footnote(df, fig)
    return style.save(fig, out_dir, "auc_vs_step")
