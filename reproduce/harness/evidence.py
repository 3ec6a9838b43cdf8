"""What a timed experiment states about its evidence (experiment.py parses it; the sweep and the report read it):

- ``control``: the set's A/A control, one of its points selected by fields (``{ label = "ecorec", world_size = 1 }``;
  label defaults to the impl). The sweep runs it twice in every round, the second copy (its *twin*) under its own id
  and the label ``<label> (A/A twin)``; the ratio of the two, paired by round, is what the set can resolve.
- ``headline``: the ratios the set is about, ``[numerator, denominator]`` labels compared within each group of
  points that share a workload and world size (``GROUP``); with the A/A control they are what ``[rounds]`` resolves.
- ``[rounds]``: rounds until resolved. After the profile's ``repeats`` rounds of every point, the sweep adds rounds of
  the headline points alone until every headline ratio's interval half-width is at most ``target`` of its value (a
  point that uses at most half the machine's cores) or ``target_full`` (one that fills them; an oversubscribed point
  is never a headline), or ``budget_s`` of adaptive rounds are spent, or ``max_rounds`` are run. ``schedule``:
  ``sequential`` (one run at a time) or ``duet`` (where both fit in half the cores each, the two sides of a pair at
  once on disjoint cores, the cores swapped every round). ``min_rounds`` (6): the A/A control and every headline
  ratio get at least that many rounds whatever the budget (fewer give no 95 % interval). ``probe_s``: seconds of
  fixed work per core and kind in each noise probe's window drift (2 s; a smoke sweep may take less)."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

TWIN_SUFFIX = " (A/A twin)"
GROUP = ["data", "max_rows", "rows", "batch_size", "mode", "optimizer", "world_size"]  # one workload on one world
SCHEDULES = ("sequential", "duet")


def twin_label(label: str) -> str:
    return f"{label}{TWIN_SUFFIX}"


def is_twin_label(label: Any) -> bool:
    return str(label).endswith(TWIN_SUFFIX)


def original_label(label: str) -> str:
    return label[:-len(TWIN_SUFFIX)] if is_twin_label(label) else label


@dataclass(frozen=True)
class Rounds:
    """``[rounds]`` of an experiment (or its profile): see the module's text."""

    target: float = 0.05
    target_full: float = 0.10
    budget_s: float = 0.0  # seconds of adaptive rounds (0: none are added, but for min_rounds)
    max_rounds: int = 40
    # the A/A control and every headline ratio get at least this many rounds, whatever the budget: fewer cannot
    # give a 95 % interval (stats.is_paired_ci), so a set could not say what it resolves
    min_rounds: int = 6
    schedule: str = "sequential"
    # seconds of fixed work per core and kind in each noise probe's window drift (noise.window_drift); less: a
    # quicker smoke sweep whose probes see less
    probe_s: float = 2.0

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ValueError(f"[rounds] schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        for name in ("target", "target_full"):
            if not 0 < getattr(self, name) < 1:
                raise ValueError(f"[rounds] {name} must lie in (0, 1), got {getattr(self, name)!r}")
        if not self.probe_s > 0:
            raise ValueError(f"[rounds] probe_s must be > 0, got {self.probe_s!r}")
        if self.min_rounds < 1 or self.min_rounds > self.max_rounds:
            raise ValueError(f"[rounds] min_rounds must lie in [1, max_rounds], got {self.min_rounds!r}")
        if self.budget_s < 0 or self.max_rounds < 1:
            raise ValueError(f"[rounds] budget_s must be >= 0 and max_rounds >= 1, got {self.budget_s!r}, "
                             f"{self.max_rounds!r}")

    @classmethod
    def parse(cls, table: dict[str, Any] | None, where: str) -> "Rounds":
        table = dict(table or {})
        bad = sorted(set(table) - {f.name for f in fields(cls)})
        if bad:
            raise ValueError(f"{where}: [rounds] has unknown keys {bad}")
        try:
            return cls(**table)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None

    def target_for(self, cores_used: int, cores: int) -> float | None:
        """The half-width a ratio of points using ``cores_used`` cores must reach (None: oversubscribed, no
        headline)."""
        if cores_used > cores:
            return None
        return self.target if 2 * cores_used <= cores else self.target_full


def parse_headline(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    """``headline = [[numerator, denominator], ...]`` (labels)."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in value):
        raise ValueError(f"{where}: headline must be a list of [numerator, denominator] labels, got {value!r}")
    return tuple((a, b) for a, b in value)


def select_control(specs: list, selector: Any, where: str) -> int:
    """The index of the one spec the ``control`` selector names (every key of it equal to the spec's field; label
    defaults to the impl)."""
    if not isinstance(selector, dict) or not selector:
        raise ValueError(f"{where}: control must be a table of point fields, e.g. {{ label = \"ecorec\", "
                         f"world_size = 1 }}, got {selector!r}")

    def field(spec, key):
        if key == "label":
            return spec.fields.get("label") or spec.impl
        if key in ("max_rows", "rows"):
            return spec.fields.get("data_options", {}).get(key, 0)
        return spec.fields.get(key)

    hits = [i for i, s in enumerate(specs) if all(field(s, k) == v for k, v in selector.items())]
    if len(hits) != 1:
        raise ValueError(f"{where}: control {selector} must name exactly one point of the profile; it names "
                         f"{len(hits)}")
    return hits[0]
