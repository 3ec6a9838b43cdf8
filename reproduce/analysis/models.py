"""The models an experiment runs after its sweep (its TOML's ``models``), each under one name for `dlrmbench model`:
``sc24``, the scale model fitted on a machine's sc24 records (scale_model.py), and ``recsys24``, EMBark's cost model
at 8-128 GPUs (recsys24_model.py). Each says where it writes, how to run and redraw it, and the report table it
contributes."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class Model:
    name: str
    set_name: str  # its outputs' folder under results/ (freshness: bench and the scale model are sets of their own)
    block: str  # the report table it contributes
    run: Callable[[Path, str], dict[str, Path]]  # (root, machine) -> what it wrote
    redraw: Callable[[Path, str], list[Path]]  # (root, machine) -> its figures, from what it wrote
    table: Callable[[Path, str], list[str]]  # (root, machine) -> the report table's lines


def _sc24_run(root: Path, machine: str) -> dict[str, Path]:
    from reproduce.analysis.scale_model import run

    return run(root / "results" / "sc24" / machine, root / "results" / "scale_model" / machine,
               root / "figures" / "scale_model" / machine)


def _sc24_redraw(root: Path, machine: str) -> list[Path]:
    from reproduce.analysis.scale_model import redraw

    return redraw(root / "results" / "scale_model" / machine, root / "figures" / "scale_model" / machine)


def _sc24_table(root: Path, machine: str) -> list[str]:
    from reproduce.analysis.tables import scale_model

    return scale_model(root, machine)


def _recsys24_run(root: Path, machine: str) -> dict[str, Path]:
    from reproduce.analysis.recsys24_model import draw, write

    _, csv = write(root)
    return {"modeled": csv, **{p.name: p for p in draw(root)}}


def _recsys24_redraw(root: Path, machine: str) -> list[Path]:
    from reproduce.analysis.recsys24_model import draw

    return draw(root)


def _recsys24_table(root: Path, machine: str) -> list[str]:
    from reproduce.analysis.tables import recsys24_model

    return recsys24_model(root)


MODELS = {
    "sc24": Model("sc24", "scale_model", "scale-model", _sc24_run, _sc24_redraw, _sc24_table),
    "recsys24": Model("recsys24", "recsys24_model", "recsys24-model", _recsys24_run, _recsys24_redraw,
                      _recsys24_table),
}
