"""Figures (seaborn + matplotlib), one module per figure family. An experiment's figures (``draw``, by the names
its TOML lists) read its summary.csv, and repeats.csv beside it for the intervals of ratios they compute; the
modeled figures (scale.py, redundancy.py, recsys24's modeled speedup) read the CSV their model wrote."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import pandas as pd


def _registry() -> dict[str, Callable[[pd.DataFrame, Path], list[Path]]]:
    from reproduce.analysis.plots import accuracy, fig11, frontier, recsys24, sc24, scaling, table_size, world

    return {"sc24-speedup": sc24.speedup, "sc24-memory": sc24.memory, "batch-scaling": scaling.batch_scaling,
            "auc-vs-step": accuracy.auc_vs_step, "world-speedup": world.world_speedup,
            "world-memory": world.world_memory, "pipeline-ablation": world.pipeline_ablation,
            "recsys24-measured": recsys24.measured, "recsys24-predicted": recsys24.predicted,
            "recsys24-world": recsys24.world, "table-size": table_size.table_size, "sc24-datasets": sc24.datasets,
            "fig11-ratios": fig11.fig11_ratios, "compression-frontier": frontier.auc_frontier,
            "compression-step-time": frontier.step_time}


def plot_names() -> list[str]:
    return sorted(_registry())


def draw(names: list[str], summary_csv: Path, out_dir: Path) -> list[Path]:
    plots = _registry()
    unknown = sorted(set(names) - set(plots))
    if unknown:
        raise ValueError(f"unknown plots {unknown}; known: {sorted(plots)}")
    df = pd.read_csv(summary_csv)
    reps = Path(summary_csv).with_name("repeats.csv")
    df.attrs["repeats_csv"] = str(reps) if reps.exists() else ""  # every run, for intervals of ratios
    out: list[Path] = []
    for n in names:
        out += plots[n](df, Path(out_dir))
    return out
