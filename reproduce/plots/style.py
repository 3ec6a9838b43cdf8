"""The one figure style, and saving to PNG + PDF."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402


def setup() -> None:
    sns.set_theme(context="paper", style="whitegrid", palette="colorblind", font_scale=1.1)


def save(fig: "plt.Figure", out_dir: Path, stem: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.pdf"]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight", metadata={"Software": None})
    fig.savefig(paths[1], bbox_inches="tight", metadata={"CreationDate": None, "Producer": None})
    plt.close(fig)
    return paths


def footnote(df, fig) -> None:
    """Name the implementations that have no measured bar, and why (skipped / failed)."""
    missing = df[df["status"] != "ok"].groupby("status")["impl"].unique()
    notes = [f"{status}: {', '.join(sorted(impls))}" for status, impls in missing.items()]
    if notes:
        fig.text(0.01, -0.02, "no bar — " + "; ".join(notes), fontsize=8, ha="left", va="top")


def hardware(df) -> str:
    devs = df.get("device")
    if devs is None or devs.dropna().empty:
        return ""
    threads = df["threads"].dropna()
    n = int(threads.iloc[0]) if not threads.empty else 0
    t = f", {n} thread{'s' if n > 1 else ''}" + (" per rank" if "world_size" in df and (df["world_size"] != 1).any() else "") if n else ""
    return f"{devs.dropna().iloc[0]}{t}"


def legend_on_last(ax, row) -> None:
    """One legend per row of axes: outside the last axis, removed from the others."""
    import seaborn as sns

    if ax.get_legend() is None:
        return
    if ax is row[-1]:
        sns.move_legend(ax, "upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    else:
        ax.get_legend().remove()
