"""An experiment's specs made into the run points a sweep runs: the one step that touches the world outside the TOML.
It fills ``$DATA`` (``--data``, else the experiment's ``[synth]`` dataset, which must be written: `sweep` writes it),
routes the options to each implementation, sizes each budget point on its data's tables (setting aside a grid point
that cannot fit), checks each point against the registry and its data (options.check_point), and names the machine's
calibration profile for a point that plans on one. `run` and `sweep` call it; `plot` and `report` never do."""
from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from reproduce.harness.experiment import DATA_PLACEHOLDER, Experiment, PointSpec, parse
from reproduce.harness.options import (check_impl, check_point, check_scoped_options, check_shared_options,
                                       options_for)
from reproduce.harness.point import RunPoint

T = TypeVar("T")


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


@dataclass(frozen=True)
class Sweep:
    """An experiment resolved on a machine: its run points, result and figure folders, repeats and what was set
    aside."""

    experiment: Experiment
    points: tuple[RunPoint, ...]
    out_dir: Path
    figures_dir: Path
    machine: str
    repeats: int
    data: str | None = None  # the dataset folder given for $DATA (an experiment on the user's own data)
    infeasible: tuple[Infeasible, ...] = ()  # grid points whose system cannot fit their budget, set aside

    @property
    def name(self) -> str:
        return self.experiment.name

    @property
    def description(self) -> str:
        return self.experiment.description

    @property
    def profile(self) -> str:
        return self.experiment.profile

    @property
    def plots(self) -> tuple[str, ...]:
        return self.experiment.plots

    @property
    def point_timeout_s(self) -> float | None:
        return self.experiment.point_timeout_s

    def on(self, machine: str) -> "Sweep":
        """The same sweep read from (or written to) another machine's result set."""
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


def dataset_for(exp: Experiment, data: str | None, root: str | Path) -> str | None:
    """The folder ``$DATA`` names: ``data`` (a dataset of the user's), else the experiment's ``[synth]`` dataset
    (written by `sweep`); None for an experiment that does not read ``$DATA`` (which refuses ``data``)."""
    if not exp.reads_data:
        if data is not None:
            raise ValueError(f"{exp.path}: --data is for an experiment (profile) whose data is {DATA_PLACEHOLDER!r}; "
                             f"this one names its own")
        return None
    if data is None:
        from reproduce.harness.synth_data import synth_data

        if exp.synth is None:
            raise ValueError(f"{exp.path}: this experiment trains on a dataset of yours: give --data DIR (a folder "
                             f"from `dlrmbench data prepare`)")
        data = synth_data(exp.synth, root, exp.path)
    return str(Path(data).resolve())


def sized_to_budget(fields: dict[str, Any]) -> dict[str, Any]:
    """The impl options that size the point's system to ``fields['budget']`` of its data's dense table bytes
    (options_for_budget on the data's tables); ValueError, naming why, when it cannot fit."""
    from impls.api import get_impl
    from impls.compress.budget import options_for_budget
    from impls.data.sources import open_source

    tables = open_source(fields["data"], seed=int(fields.get("seed", 0)), **fields["data_options"]).tables
    return options_for_budget(get_impl(fields["impl"]), tables, float(fields["budget"]), fields["impl_options"])


def resolve_spec(spec: PointSpec, data: str | None) -> RunPoint:
    """The run point of one spec (ValueError naming the spec when it cannot be made; budgets sized here)."""
    try:
        fields = dict(spec.fields)
        if fields.get("data") == DATA_PLACEHOLDER:
            fields["data"] = data
        if fields.get("nnodes") == "auto":  # a cluster profile: as many nodes as the world needs at L ranks each
            if not fields.get("gpus_per_node"):
                raise ValueError("nnodes = 'auto' needs gpus_per_node")
            nodes = max(1, int(fields.get("world_size", 1)) // int(fields["gpus_per_node"]))
            fields.update(nnodes=nodes, **({"rdzv_endpoint": ""} if nodes == 1 else {}))  # one node: standalone
        check_impl(str(fields.get("impl", "")))
        fields["impl_options"] = {**options_for(fields["impl"], spec.fields["impl_options"],
                                                int(fields.get("world_size", 1))), **spec.own_options}
        if fields.get("budget"):
            try:
                fields["impl_options"].update(sized_to_budget(fields))
            except ValueError as exc:
                raise _DoesNotFit(str(exc)) from None
        return check_point(RunPoint.from_dict(fields))
    except _DoesNotFit:
        raise
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"{spec.where}: {exc}") from None


class _DoesNotFit(ValueError):
    """A system that cannot be sized to its point's budget."""


def resolve(exp: Experiment, root: str | Path = ".", machine: str | None = None, repeats: int | None = None,
            data: str | None = None) -> Sweep:
    """The sweep of ``exp`` on ``machine`` (default: this machine's slug) under ``root``: every spec made a point
    (a grid point that cannot fit its budget set aside), the options checked, calibration profiles named."""
    from reproduce.harness.calibration import with_profile
    from reproduce.harness.machine import this_machine

    filled = dataset_for(exp, data, root)
    points: list[RunPoint] = []
    infeasible: list[Infeasible] = []
    for spec in exp.specs:
        try:
            points.append(resolve_spec(spec, filled))
        except _DoesNotFit as exc:
            if not spec.in_grid:  # a single point that cannot fit its budget is an error, not set aside
                raise ValueError(f"{spec.where}: {exc}") from None
            infeasible.append(Infeasible(spec.impl, spec.fields.get("label", ""), spec.budget, str(exc)))
    if not points:
        raise ValueError(f"{exp.path}: no points to run" + (
            f": every one cannot fit its budget ({infeasible[0].reason})" if infeasible
            else ": give a [grid], [[grids]] or [[points]]"))
    check_scoped_options(exp.impl_options, (p.impl for p in points), f"{exp.path}: [impl_options]")
    check_shared_options(exp.impl_options, points, f"{exp.path}: [impl_options]")
    machine = this_machine(machine)
    points = [with_profile(p, root, machine) for p in points]
    dupes = [pid for pid, n in Counter(p.point_id for p in points).items() if n > 1]
    if dupes:
        raise ValueError(f"{exp.path}: points listed twice (the same measured configuration; a label alone does "
                         f"not make another point): {dupes[:3]}")
    repeats = exp.repeats if repeats is None else int(repeats)
    if repeats < 1:
        raise ValueError(f"{exp.path}: repeats must be >= 1, got {repeats}")
    return Sweep(exp, tuple(points), exp.out_dir(root, machine), exp.figures_dir(root, machine), machine, repeats,
                 str(Path(data).resolve()) if data is not None else None,
                 tuple(dict.fromkeys(infeasible)))  # one entry per (system, budget), whatever the other axes


def load_experiment(path: str | Path, root: str | Path = ".", profile: str | None = None, machine: str | None = None,
                    repeats: int | None = None, data: str | None = None) -> Sweep:
    """``resolve(parse(path, profile), ...)``: the sweep of an experiment file."""
    return resolve(parse(path, profile), root, machine, repeats, data)
