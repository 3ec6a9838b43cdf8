"""Experiments: a grid of run points from a TOML file (point.py: a point; options.py: its options)."""
from __future__ import annotations

import dataclasses
import itertools
import re
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from reproduce.harness.options import (check_impl, check_point, check_scoped_options, check_shared_options,
                                       options_for)
from reproduce.harness.point import RunPoint

T = TypeVar("T")
DEFAULT_PROFILE = "cpu"
DEFAULT_REPEATS = 3  # independent processes per point, interleaved across points (A B C C B A)


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    points: tuple[RunPoint, ...]
    out_dir: Path
    figures_dir: Path
    plots: tuple[str, ...]
    profile: str = DEFAULT_PROFILE
    point_timeout_s: float | None = None  # the per-point time limit (`sweep --timeout` overrides it)
    machine: str = ""  # the result set: out_dir = results/<stem>/<machine>
    repeats: int = DEFAULT_REPEATS
    data: str | None = None  # the dataset folder given for $DATA (an experiment on the user's own data)
    infeasible: tuple[Infeasible, ...] = ()  # grid points whose system cannot fit their budget, set aside

    def on(self, machine: str) -> "Experiment":
        """The same experiment read from (or written to) another machine's result set."""
        from reproduce.harness.machine import check_slug

        return dataclasses.replace(self, machine=check_slug(machine), out_dir=self.out_dir.parent / machine,
                                   figures_dir=self.figures_dir.parent / machine)

    def tasks(self) -> list[tuple[RunPoint, int]]:
        """Every (point, repeat) in the order a sweep runs them: rounds of every point (``interleaved``)."""
        return interleaved(self.points, self.repeats)


def interleaved(items: list[T], repeats: int) -> list[tuple[T, int]]:
    """Every (item, repeat) in rounds: repeat 0 of every item, then repeat 1, ... so that a slow drift of a shared
    machine hits every item alike; odd rounds run in reverse order (A B C C B A A B C), so that no item always runs
    first in its round (right after a round's noise probe, or after the slowest run) or always follows the same
    neighbour: over an even number of repeats every item's mean place in its rounds is the same."""
    return [(item, r) for r in range(repeats) for item in (items if r % 2 == 0 else items[::-1])]


# max_rows / rows: data options; variant: a name from [variants.NAME] (impl, label, impl_options, ... of one
# system setup)
# seed: the run's seed (data stream, initial weights, hashes); budget: a fraction of the dense tables' bytes that sizes
# each system (options_for_budget; a point that cannot fit it is set aside as infeasible, with the reason)
GRID_KEYS = ("impl", "data", "batch_size", "mode", "optimizer", "world_size", "gpus_per_node", "max_rows", "rows",
             "variant", "seed", "budget")


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"experiment file not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: invalid TOML: {exc}") from None


def apply_profile(doc: dict[str, Any], profile: str | None, path: Path) -> tuple[dict[str, Any], str]:
    """Overlay ``[profiles.NAME]`` on the experiment: its ``grid`` and ``defaults`` keys replace those of the
    experiment, its ``grids`` / ``points`` / ``results`` / ``impl_options`` / ``data_options`` (when given) replace
    the experiment's; ``synth = false`` drops the experiment's own dataset (a profile for data of yours: it then
    needs --data). Without ``profile`` an
    experiment with profiles runs its ``cpu`` one; an experiment without a ``cpu`` profile is its own (the file as
    written), whether or not ``cpu`` is named."""
    profiles = doc.get("profiles", {})
    name = profile or DEFAULT_PROFILE
    if name not in profiles:
        if name == DEFAULT_PROFILE:
            return doc, DEFAULT_PROFILE  # no cpu profile: the file as written is the cpu profile
        raise ValueError(f"{path}: no profile {name!r}; it has {sorted(profiles) or 'none'}")
    over = profiles[name]
    bad = sorted(set(over) - {"grid", "defaults", "grids", "points", "description", "results", "repeats",
                              "impl_options", "data_options", "synth"})
    if bad:
        raise ValueError(f"{path}: [profiles.{name}] has unknown keys {bad}")
    if over.get("synth", False) is not False:
        raise ValueError(f"{path}: [profiles.{name}] synth can only be false (the profile trains on --data only)")
    out = dict(doc)
    out["grid"] = {**doc.get("grid", {}), **over.get("grid", {})}
    out["defaults"] = {**doc.get("defaults", {}), **over.get("defaults", {})}
    for k in ("grids", "points", "description", "results", "repeats", "impl_options", "data_options"):
        if k in over:
            out[k] = over[k]
    if "synth" in over:
        out.pop("synth", None)
    return out, name


DATA_PLACEHOLDER = "$DATA"  # a grid's or point's data that `sweep --data DIR` names (a user's own dataset)


def reads_data(doc: dict[str, Any]) -> bool:
    """Whether a grid or point of the (profiled) experiment reads ``$DATA``."""
    grids = [doc.get("grid", {}), *doc.get("grids", [])]
    return (any(DATA_PLACEHOLDER in g.get("data", []) for g in grids)
            or any(p.get("data") == DATA_PLACEHOLDER for p in doc.get("points", [])))


def read_profiled(path: Path, profile: str | None) -> tuple[dict[str, Any], str]:
    """The experiment file with its profile applied (``apply_profile``), and the profile's name."""
    return apply_profile(_read(path), profile, path)


def own_dataset(doc: dict[str, Any], path: Path) -> dict[str, Any] | None:
    """The experiment's ``[synth]`` table (synth_data.synth_table), its name one plain folder name under
    datasets/synth; None when it has none."""
    from reproduce.harness.synth_data import synth_table

    spec = synth_table(doc, path)
    if spec is not None:
        folder_name(spec["name"], f"{path}: [synth] name")
    return spec


def fill_data(doc: dict[str, Any], data: str | None, path: Path, root: str | Path = ".") -> dict[str, Any]:
    """``doc`` with every ``$DATA`` replaced by ``data`` (a dataset folder, made absolute), else by the dataset of its
    ``[synth]`` table (synth_data.py; written by `dlrmbench sweep`); an experiment that reads ``$DATA`` needs one of
    them, one that does not refuses ``data``."""
    if not reads_data(doc):
        if data is not None:
            raise ValueError(f"{path}: --data is for an experiment (profile) whose data is {DATA_PLACEHOLDER!r}; "
                             f"this one names its own")
        return doc
    if data is None:
        from reproduce.harness.synth_data import synth_data

        spec = own_dataset(doc, path)
        if spec is None:
            raise ValueError(f"{path}: this experiment trains on a dataset of yours: give --data DIR (a folder from "
                             f"`dlrmbench data prepare`)")
        data = synth_data(spec, root, path)
    data = str(Path(data).resolve())
    out = dict(doc)
    out["grid"] = {**doc.get("grid", {})}
    if DATA_PLACEHOLDER in out["grid"].get("data", []):
        out["grid"]["data"] = [data if d == DATA_PLACEHOLDER else d for d in out["grid"]["data"]]
    out["grids"] = [{**g, "data": [data if d == DATA_PLACEHOLDER else d for d in g.get("data", [])]}
                    if "data" in g else g for g in doc.get("grids", [])]
    out["points"] = [{**p, "data": data} if p.get("data") == DATA_PLACEHOLDER else p for p in doc.get("points", [])]
    return out


def _point(fields: dict[str, Any]) -> RunPoint:
    """The point of a grid combination or a [[points]] entry; ``nnodes = "auto"`` (a cluster profile) becomes as
    many nodes as the world size needs at ``gpus_per_node`` ranks each."""
    if fields.get("nnodes") == "auto":
        if not fields.get("gpus_per_node"):
            raise ValueError("nnodes = 'auto' needs gpus_per_node")
        nodes = max(1, int(fields.get("world_size", 1)) // int(fields["gpus_per_node"]))
        fields = {**fields, "nnodes": nodes, **({"rdzv_endpoint": ""} if nodes == 1 else {})}  # one node: standalone
    check_impl(fields.get("impl", ""))
    return check_point(RunPoint.from_dict(fields))


@dataclass(frozen=True)
class Infeasible:
    """A grid point set aside: its system cannot be sized to its budget (``reason`` says why, by the method's rule)."""

    impl: str
    label: str
    budget: float
    reason: str

    @property
    def name(self) -> str:
        return self.label or self.impl


def sized_to_budget(fields: dict[str, Any], data_options: dict[str, Any]) -> dict[str, Any]:
    """The impl options that size the point's system to ``fields['budget']`` of its data's dense table bytes
    (options_for_budget on the data's tables); ValueError, naming why, when it cannot fit."""
    from impls.api import get_impl
    from impls.compress.budget import options_for_budget
    from impls.data.sources import open_source

    tables = open_source(fields["data"], seed=int(fields.get("seed", 0)), **data_options).tables
    return options_for_budget(get_impl(fields["impl"]), tables, float(fields["budget"]), fields["impl_options"])


def _expand(grid: dict[str, Any], where: str, base: dict[str, Any], variants: dict[str, Any],
            infeasible: list[Infeasible] | None = None) -> list[RunPoint]:
    """The grid's points; a point whose system cannot fit its ``budget`` goes to ``infeasible`` (required then)."""
    bad = sorted(set(grid) - set(GRID_KEYS))
    if bad:
        raise ValueError(f"{where}: unknown grid keys {bad}; allowed: {GRID_KEYS}")
    for k in ("data", "batch_size"):
        if k not in grid:
            raise ValueError(f"{where} needs a list for {k!r}")
    if "impl" not in grid and "variant" not in grid:
        raise ValueError(f"{where} needs a list for 'impl' (or 'variant')")
    unknown = sorted(set(grid.get("variant", [])) - set(variants))
    if unknown:
        raise ValueError(f"{where}: variant(s) {unknown} have no [variants.NAME] table")
    keys = list(grid)
    points = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        try:
            fields = {**base, **dict(zip(keys, combo))}
            own: dict = {}
            if "variant" in fields:
                v = dict(variants[fields.pop("variant")])
                own = dict(v.pop("impl_options", {}))
                fields.update(v)
            data_options = dict(base["data_options"])
            if "max_rows" in fields:  # the table-size axis: a cap on every table (0 = the preset's sizes)
                cap = fields.pop("max_rows")
                data_options.update({"max_rows": cap} if cap else {})
            if "rows" in fields:  # the row count of presets that take one (sc24-f4, uniform)
                data_options["rows"] = fields.pop("rows")
            fields["data_options"] = data_options
            fields["impl_options"] = {**options_for(fields["impl"], base["impl_options"],
                                                    int(fields.get("world_size", 1))), **own}
            if fields.get("budget"):
                check_impl(fields["impl"])
                try:
                    fields["impl_options"].update(sized_to_budget(fields, data_options))
                except ValueError as exc:
                    if infeasible is None:
                        raise
                    infeasible.append(Infeasible(fields["impl"], fields.get("label", ""), float(fields["budget"]),
                                                 str(exc)))
                    continue
            points.append(_point(fields))
        except (TypeError, ValueError, KeyError) as exc:
            raise ValueError(f"{where}: bad point {dict(zip(keys, combo))}: {exc}") from None
    return points


FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def folder_name(value: object, what: str) -> str:
    """``value`` when it can name one folder under results/ and figures/ (letters, digits, '.', '-', '_'; no path
    separator, no leading dot): an experiment's name or results folder never writes outside ``--root``."""
    if not isinstance(value, str) or not FOLDER_NAME.fullmatch(value):
        raise ValueError(f"{what} = {value!r} must name one folder: letters, digits, '.', '-' or '_', starting with a "
                         f"letter or digit (at most 100)")
    return value


def load_experiment(path: str | Path, root: str | Path = ".", profile: str | None = None, machine: str | None = None,
                    repeats: int | None = None, data: str | None = None, expand: bool = True) -> Experiment:
    """Expand ``[grid]`` and each ``[[grids]]`` (lists) over ``[defaults]``; ``[data_options]`` apply to all
    points and ``[impl_options]`` as resolved by ``options_for``; ``[[points]]`` add single points (their own
    ``impl_options`` overlay the resolved ones). ``profile`` picks a ``[profiles.NAME]`` overlay (default cpu);
    a profile other than cpu writes to results/NAME_PROFILE unless it names its ``results`` folder. Records go to
    that folder's ``machine`` subfolder (default: this machine's slug); ``repeats`` (default: the experiment's or
    its profile's ``repeats``, else 3) processes measure each point; ``data`` fills the ``$DATA`` of an experiment
    that trains on the user's own dataset (else its ``[synth]`` one). With ``expand`` False: no points, only the
    experiment's name, folders and plots."""
    from reproduce.harness.machine import this_machine

    path = Path(path)
    doc, profile = read_profiled(path, profile)
    if not expand:  # its folders and figures only (no points: nothing checked or read beyond the file)
        doc = {**doc, "grid": {}, "grids": [], "points": [], "impl_options": {}}
    else:
        doc = fill_data(doc, data, path, root)
    name = doc.get("name") or path.stem
    variants = doc.get("variants", {})
    base = dict(doc.get("defaults", {}))
    base["data_options"] = dict(doc.get("data_options", {}))
    base["impl_options"] = dict(doc.get("impl_options", {}))
    infeasible: list[Infeasible] = []
    points = _expand(doc["grid"], f"{path}: [grid]", base, variants, infeasible) if doc.get("grid") else []
    for i, grid in enumerate(doc.get("grids", [])):  # [[grids]]: further grids over the same defaults
        points += _expand(grid, f"{path}: [[grids]] #{i + 1}", base, variants, infeasible)
    for extra in doc.get("points", []):  # [[points]]: single points beside the grid (e.g. option variants)
        try:
            fields = {**base, **{k: v for k, v in extra.items() if k != "impl_options"}}
            own = dict(extra.get("impl_options", {}))
            fields["impl_options"] = {**options_for(fields["impl"], base["impl_options"],
                                                    int(fields.get("world_size", 1))), **own}
            fields["data_options"] = {**base["data_options"], **extra.get("data_options", {})}
            if fields.get("budget"):  # a single point that cannot fit its budget is an error, not set aside
                check_impl(fields["impl"])
                fields["impl_options"].update(sized_to_budget(fields, fields["data_options"]))
            points.append(_point(fields))
        except (TypeError, ValueError, KeyError) as exc:
            raise ValueError(f"{path}: bad [[points]] entry {extra}: {exc}") from None
    if expand and not points:
        raise ValueError(f"{path}: no points to run" + (f": every one cannot fit its budget ({infeasible[0].reason})"
                                                         if infeasible else ": give a [grid], [[grids]] or [[points]]"))
    check_scoped_options(base["impl_options"], (p.impl for p in points), f"{path}: [impl_options]")
    check_shared_options(base["impl_options"], points, f"{path}: [impl_options]")
    machine = this_machine(machine)
    from reproduce.harness.calibration import with_profile

    points = [with_profile(p, root, machine) for p in points]
    root = Path(root)
    dupes = [pid for pid, n in Counter(p.point_id for p in points).items() if n > 1]
    if dupes:
        raise ValueError(f"{path}: points listed twice: {dupes[:3]}")
    name = folder_name(name, f"{path}: name")
    stem = folder_name(doc.get("results") or (name if profile == DEFAULT_PROFILE else f"{name}_{profile}"),
                       f"{path}: results")
    repeats = int(repeats if repeats is not None else doc.get("repeats", DEFAULT_REPEATS))
    if repeats < 1:
        raise ValueError(f"{path}: repeats must be >= 1, got {repeats}")
    return Experiment(
        name=name,
        description=doc.get("description", ""),
        points=tuple(points),
        out_dir=root / "results" / stem / machine,
        figures_dir=root / "figures" / stem / machine,
        plots=tuple(doc.get("plots", [])),
        point_timeout_s=doc.get("point_timeout_s"),
        profile=profile,
        machine=machine,
        repeats=repeats,
        data=str(Path(data).resolve()) if data is not None else None,
        infeasible=tuple(dict.fromkeys(infeasible)),  # one entry per (system, budget), whatever the other axes
    )
