"""The models an experiment runs after its sweep (its TOML's ``models``), each under one name for `dlrmbench model`:
``sc24``, the scale model fitted on a machine's sc24 records (scale_model.py), ``recsys24``, EMBark's cost model
at 8-128 GPUs (recsys24_model.py), and ``work``, the work model validated on the EcoRec artifact's published GPU
results (work_model.py). Each says where it writes, how to run and redraw it, and the report table it
contributes."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd


@dataclass(frozen=True)
class Model:
    name: str
    set_name: str  # its outputs' folder under results/ (freshness: bench and the scale model are sets of their own)
    block: str  # the report table it contributes
    run: Callable[[Path, str], dict[str, Path]]  # (root, machine) -> what it wrote
    redraw: Callable[[Path, str], list[Path]]  # (root, machine) -> its figures, from what it wrote
    table: Callable[[Path, str], list[str]]  # (root, machine) -> the report table's lines
    # a result set `report --check` holds to the code; the work model is not one yet: it measures nothing and is
    # rewritten from the committed facts in seconds (`dlrmbench model work`)
    reference_set: bool = True


def _sc24_run(root: Path, machine: str) -> dict[str, Path]:
    from reproduce.analysis.scale_model import run

    return run(root / "results" / "sc24" / machine, root / "results" / "scale_model" / machine,
               root / "figures" / "scale_model" / machine)


def _sc24_redraw(root: Path, machine: str) -> list[Path]:
    from reproduce.analysis.scale_model import redraw

    return redraw(root / "results" / "scale_model" / machine, root / "figures" / "scale_model" / machine)


def _sc24_table(root: Path, machine: str) -> list[str]:
    """The scale model's error per system: out of sample (leave one world size out) and in sample."""
    path = Path(root) / "results" / "scale_model" / machine / "validation.csv"
    if not path.exists():
        return []
    v = pd.read_csv(path)
    if "in_sample_error" not in v:
        return []
    lines = ["| system | points | mean abs. error, out of sample (leave one world size out) | in sample |",
             "|---|---|---|---|"]
    for impl, g in v.groupby("impl", sort=False):
        lines.append(f"| {impl} | {len(g)} | {g['error'].abs().mean():.0%} | {g['in_sample_error'].abs().mean():.0%} |")
    lines.append(f"| all | {len(v)} | {v['error'].abs().mean():.0%} | {v['in_sample_error'].abs().mean():.0%} |")
    return lines


def _recsys24_run(root: Path, machine: str) -> dict[str, Path]:
    from reproduce.analysis.recsys24_model import draw, write

    _, csv = write(root)
    return {"modeled": csv, **{p.name: p for p in draw(root)}}


def _recsys24_redraw(root: Path, machine: str) -> list[Path]:
    from reproduce.analysis.recsys24_model import draw

    return draw(root)


def _recsys24_table(root: Path, machine: str) -> list[str]:
    """The EMBark cost model's speedups of the planner over table_row_wise (modeled, DGX-H100, 8-128 GPUs)."""
    path = Path(root) / "results" / "recsys24_model" / "modeled.csv"
    if not path.exists():
        return []
    m = pd.read_csv(path)
    lines = ["| workload (modeled, 8-128 H100) | planner with clusters: mean / max | all-RB planner: mean / max |",
             "|---|---|---|"]
    for w, g in m.groupby("workload", sort=False):
        rb = f"{g['speedup_rb'].mean():.2f}× / {g['speedup_rb'].max():.2f}×" if "speedup_rb" in g else "–"
        lines.append(f"| {w} | {g['speedup'].mean():.2f}× / {g['speedup'].max():.2f}× | {rb} |")
    rb = f"{m['speedup_rb'].mean():.2f}× / {m['speedup_rb'].max():.2f}×" if "speedup_rb" in m else "–"
    lines.append(f"| all | {m['speedup'].mean():.2f}× / {m['speedup'].max():.2f}× | {rb} |")
    return lines


# each: write(out, root, machine), draw(out, figures, machine), table(out, machine); the GPU validation and the
# scale counts are machine-independent, the memory (and time) validations against a machine's committed sets are not
WORK_PARTS = ("reproduce.analysis.work_model", "reproduce.analysis.work_scale", "reproduce.analysis.work_memory",
              "reproduce.analysis.work_cpu")


def _work_parts():
    import importlib

    return [importlib.import_module(m) for m in WORK_PARTS]


def _work_run(root: Path, machine: str) -> dict[str, Path]:
    out, figures = root / "results" / "work_model", root / "figures" / "work_model"
    paths: dict[str, Path] = {}
    for part in _work_parts():
        paths.update(part.write(out, root, machine))
        paths.update({p.name: p for p in part.draw(out, figures, machine)})
    return paths


def _work_redraw(root: Path, machine: str) -> list[Path]:
    return [p for part in _work_parts()
            for p in part.draw(root / "results" / "work_model", root / "figures" / "work_model", machine)]


def _work_table(root: Path, machine: str) -> list[str]:
    lines: list[str] = []
    for part in _work_parts():
        block = part.table(Path(root) / "results" / "work_model", machine)
        if block:
            lines += ([""] if lines else []) + block
    return lines


MODELS = {
    "sc24": Model("sc24", "scale_model", "scale-model", _sc24_run, _sc24_redraw, _sc24_table),
    "recsys24": Model("recsys24", "recsys24_model", "recsys24-model", _recsys24_run, _recsys24_redraw,
                      _recsys24_table),
    # the work model against the EcoRec artifact's published GPU results (machine-independent: no run of ours)
    "work": Model("work", "work_model", "work-model", _work_run, _work_redraw, _work_table, reference_set=False),
}
