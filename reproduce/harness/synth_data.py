"""The dataset an experiment writes for itself: a ``[synth]`` table in its TOML names a preset's synthetic stream
(``dlrmbench data synth``: preset, samples, teacher, seed, data options) that its ``$DATA`` points train on when
``--data`` is not given. `dlrmbench sweep` writes it on first use under ``<root>/datasets/synth/<name>`` (ignored
by git; reused when complete, refused when a folder there was made from anything else: impls/data/staging.py); a
dry run, which writes nothing, needs it written. `plot` and `report` never need it (they read records)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

KEYS = {"name", "preset", "samples", "val_samples", "teacher", "seed", "options"}


def synth_table(doc: dict[str, Any], path: Path) -> dict[str, Any] | None:
    """The experiment's ``[synth]`` table, its keys checked (None when it has none); config.own_dataset also checks
    that its name is one plain folder name under datasets/synth."""
    spec = doc.get("synth")
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise ValueError(f"{path}: [synth] must be a table")
    bad = sorted(set(spec) - KEYS)
    missing = sorted({"name", "preset", "samples"} - set(spec))
    if bad or missing:
        raise ValueError(f"{path}: [synth] " + (f"has unknown keys {bad}" if bad else f"needs {missing}")
                         + f"; its keys: {sorted(KEYS)}")
    if not isinstance(spec.get("options", {}), dict):
        raise ValueError(f"{path}: [synth] options must be a table of data options")
    return spec


def synth_folder(spec: dict[str, Any], root: str | Path) -> Path:
    return (Path(root) / "datasets" / "synth" / spec["name"]).resolve()


def write_synth(spec: dict[str, Any], root: str | Path, progress: Callable[[int], None] | None = None) -> Path:
    """Write (or reuse) the ``[synth]`` dataset; its folder."""
    from impls.data.export import write_synthetic
    from impls.data.presets import get_preset

    out = synth_folder(spec, root)
    out.parent.mkdir(parents=True, exist_ok=True)
    preset = get_preset(spec["preset"], seed=int(spec.get("seed", 0)), **spec.get("options", {}))
    write_synthetic(spec["preset"], preset, out, int(spec["samples"]), spec.get("val_samples"), progress=progress,
                    teacher=spec.get("teacher", "scalar"))
    return out


def synth_data(spec: dict[str, Any], root: str | Path, path: Path) -> str:
    """The folder of a written ``[synth]`` dataset; ValueError saying how to write it when it is not."""
    from impls.data.layout import is_dataset

    out = synth_folder(spec, root)
    if not is_dataset(out):
        raise ValueError(f"{path}: its dataset {out} is not written yet: `dlrmbench sweep {path}` writes it first "
                         f"(or give --data DIR)")
    return str(out)
