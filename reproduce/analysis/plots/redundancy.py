"""Redundancy figure (SC24's deleted Figure 4 analogue): U/nnz and E1/nnz against the batch size, per
preset, from results/redundancy/redundancy.csv (total rows)."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from reproduce.analysis.plots import style


def redundancy(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    style.setup()
    tot = df[df["table"] == "*"]
    long = pd.concat([
        tot.assign(ratio="U / nnz", value=tot["unique_per_nnz"]),
        tot.assign(ratio="E1 / nnz", value=tot["e1_per_nnz"]),
    ])
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    sns.lineplot(data=long, x="batch_size", y="value", hue="data", style="ratio", marker="o", ax=ax)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size")
    ax.set_ylabel("fraction of lookups")
    ax.set_title("Distinct ids (U) and TT prefix groups (E1) per lookup, synthetic presets")
    return style.save(fig, out_dir, "redundancy")
