"""Figures (seaborn + matplotlib), one module per figure family. An experiment's figures (``draw``, by the names
its TOML lists) read its summary.csv, and repeats.csv beside it for the intervals of ratios they compute; the
modeled figures (scale.py, redundancy.py, recsys24's modeled speedup) read the CSV their model wrote."""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Callable

import pandas as pd


# each figure by name: the module of this package that draws it and its function there (imported when drawn: the
# figure families import seaborn and scipy, seconds a sweep without figures need not spend)
PLOTS: dict[str, str] = {
    "sc24-speedup": "sc24:speedup", "sc24-memory": "sc24:memory", "sc24-datasets": "sc24:datasets",
    "batch-scaling": "scaling:batch_scaling", "auc-vs-step": "accuracy:auc_vs_step",
    "world-speedup": "world:world_speedup", "world-memory": "world:world_memory",
    "pipeline-ablation": "world:pipeline_ablation", "recsys24-measured": "recsys24:measured",
    "recsys24-predicted": "recsys24:predicted", "recsys24-world": "recsys24:world",
    "table-size": "table_size:table_size", "fig11-ratios": "fig11:fig11_ratios",
    "compression-frontier": "frontier:auc_frontier", "compression-step-time": "frontier:step_time"}


def _plot(name: str) -> Callable[[pd.DataFrame, Path], list[Path]]:
    module, function = PLOTS[name].split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)


def plot_names() -> list[str]:
    return sorted(PLOTS)


class Runs:
    """The runs behind a summary, carried in its ``attrs``: one shared object (pandas copies and compares attrs as
    frames are derived; a frame there would be deep-copied and compared element-wise)."""

    def __init__(self, frame: pd.DataFrame | None) -> None:
        self.frame = frame

    def __deepcopy__(self, memo) -> "Runs":
        return self

    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = object.__hash__


def draw(names: list[str], summary: Path | pd.DataFrame, out_dir: Path, runs: pd.DataFrame | None = None) -> list[Path]:
    """Draw the figures ``names`` into ``out_dir`` from a summary (summary.csv, with repeats.csv beside it; or the
    frames of aggregate.summaries)."""
    unknown = sorted(set(names) - set(PLOTS))
    if unknown:
        raise ValueError(f"unknown plots {unknown}; known: {plot_names()}")
    if isinstance(summary, pd.DataFrame):
        df = summary.copy()
    else:
        df = pd.read_csv(summary)
        reps = Path(summary).with_name("repeats.csv")
        runs = pd.read_csv(reps) if reps.exists() else None
    df.attrs["runs"] = Runs(runs)  # every run, for intervals of ratios
    out: list[Path] = []
    for n in names:
        out += _plot(n)(df, Path(out_dir))
    return out
