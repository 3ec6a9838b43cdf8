"""What a timed set can tell apart: its A/A control's ratio (the set's resolving power), the one rule for the "within
noise" mark, and where each headline ratio stands against its target (the sweep's rounds until resolved ask it)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from reproduce.analysis.stats import by_round, half_width, is_paired_ci, paired_interval_name, paired_ratio
from reproduce.harness.evidence import GROUP, Rounds, is_twin_label, original_label

Band = tuple[float, float]


@dataclass(frozen=True)
class Ratio:
    """A ratio of two labels' step times in one group, paired by round."""

    group: dict
    num: str
    den: str
    value: float
    lo: float
    hi: float
    rounds: int
    target: float | None = None  # the half-width it is to reach (None: no target, e.g. oversubscribed)

    @property
    def half_width(self) -> float:
        return half_width(self.value, self.lo, self.hi)

    @property
    def met(self) -> bool:
        """Its 95 % interval (6 rounds at least: fewer give only a range of lower confidence) is within target."""
        return self.target is not None and is_paired_ci(self.rounds) and self.half_width <= self.target

    @property
    def interval(self) -> str:
        return paired_interval_name(self.rounds)

    def where(self) -> str:
        """The workload in words: dataset, table rows (a set of one table's sizes) or the cap on them, batch, ranks."""
        g = self.group
        rows = "".join(f", {int(g[k]):,}{said}" for k, said in (("rows", " rows"), ("max_rows", "-row cap"))
                       if pd.notna(g.get(k)) and g.get(k))
        return f"{g['data']}{rows}, batch {g['batch_size']}, {g['world_size']} rank(s)"


def _ok(reps: pd.DataFrame, metric: str = "total_ms") -> pd.DataFrame:
    if reps is None or reps.empty or metric not in reps:
        return pd.DataFrame()
    return reps[(reps["status"] == "ok") & reps[metric].notna()]


def control(reps: pd.DataFrame, metric: str = "total_ms") -> Ratio | None:
    """The A/A control: its twin's ``metric`` over the original's, paired by round (None: the set has none)."""
    ok = _ok(reps, metric)
    if ok.empty or "label" not in ok:
        return None
    twins = ok[ok["label"].map(is_twin_label)]
    if twins.empty:
        return None
    label = str(twins["label"].iloc[0])
    group = twins.iloc[0][[k for k in GROUP if k in twins]].to_dict()
    same = ok
    for k, v in group.items():
        same = same[same[k] == v]
    orig = same[same["label"] == original_label(label)]
    v, lo, hi, n = paired_ratio(by_round(twins, metric), by_round(orig, metric))
    return Ratio(group, label, original_label(label), v, lo, hi, n)


def band(reps: pd.DataFrame) -> Band | None:
    """The A/A control's interval of the step time (None without a control or with one round)."""
    c = control(reps)
    if c is None or c.rounds < 2:
        return None
    return c.lo, c.hi


def within_noise(lo: float, hi: float, aa: Band | None) -> bool:
    """The one rule for the "within noise" mark (†): the ratio's interval holds 1 or overlaps the set's A/A band."""
    if not (lo == lo and hi == hi):
        return False
    low, high = (min(1.0, aa[0]), max(1.0, aa[1])) if aa else (1.0, 1.0)
    return lo <= high and hi >= low


def noise_note(aa: Band | None) -> str:
    """What † means under a table of a set with (or without) an A/A control."""
    if aa is None:
        return "† within noise: the ratio's interval holds 1 (this set has no A/A control)."
    return (f"† within noise: the ratio's interval holds 1 or overlaps the set's A/A control "
            f"[{aa[0]:.3f}, {aa[1]:.3f}] (one point against itself, paired by round): no verdict on it.")


def headline(reps: pd.DataFrame, pairs, rounds: Rounds, cores: int) -> list[Ratio]:
    """Every headline ratio (``pairs`` of labels) in every group where both sides ran, and the A/A control, each with
    the half-width target its points' cores give it (``rounds.target_for``)."""
    ok = _ok(reps)
    out: list[Ratio] = []
    if ok.empty:
        return out
    keys = [k for k in GROUP if k in ok]
    c = control(reps)
    wanted = [*pairs, *([(c.num, c.den)] if c else [])]
    for key, g in ok.groupby(keys, sort=True):
        group = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        for num, den in wanted:
            a, b = g[g["label"] == num], g[g["label"] == den]
            if a.empty or b.empty:
                continue
            used = int(group.get("world_size", 1)) * int(max(a["threads"].max(), b["threads"].max()) or 1) \
                if "threads" in g else int(group.get("world_size", 1))
            over = bool(pd.concat([a, b])["oversubscribed"].fillna(False).astype(bool).any()) \
                if "oversubscribed" in g else False
            target = None if over else rounds.target_for(used, cores)
            v, lo, hi, n = paired_ratio(by_round(a, "total_ms"), by_round(b, "total_ms"))
            out.append(Ratio(group, num, den, v, lo, hi, n, target))
    return out


def unresolved_labels(reps: pd.DataFrame, pairs, rounds: Rounds, cores: int,
                      required: bool = False) -> list[tuple[dict, set[str]]]:
    """(group, labels) of every headline ratio (and the A/A control) with a target it has not reached: the points
    another round runs. ``required``: only those with fewer than ``rounds.min_rounds`` rounds (run whatever the
    budget)."""
    rows = headline(reps, pairs, rounds, cores)
    if required:
        return [(r.group, {r.num, r.den}) for r in rows if r.rounds < rounds.min_rounds]
    return [(r.group, {r.num, r.den}) for r in rows
            if (r.target is not None and not r.met) or r.rounds < rounds.min_rounds]


def headline_lines(reps: pd.DataFrame, pairs, rounds: Rounds, cores: int, split: str | None = None) -> list[str]:
    """A markdown table of the headline ratios and the A/A control: value, interval, rounds, half-width vs target;
    where one fell short, a note of the rounds it would need and (``split``: durations.run_split's words) where a
    run's wall time went."""
    rows = headline(reps, pairs, rounds, cores)
    if not rows:
        return []
    lines = ["| ratio | where | value [interval] | rounds | half-width | target | reached |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        target = "–" if r.target is None else f"{r.target:.0%}"
        reached = ("– (oversubscribed: no headline)" if r.target is None else "yes" if r.met else
                   f"no (~{rounds_needed(r)} rounds would)" if is_paired_ci(r.rounds) else "no")
        lines.append(f"| {r.num} / {r.den} | {r.where()} | {r.value:.3f} [{r.lo:.3f}, {r.hi:.3f}] | {r.rounds} | "
                     f"{shown_half_width(r.half_width)} | {target} | {reached} |")
    if any(r.target is not None and not r.met and is_paired_ci(r.rounds) for r in rows):
        lines += ["", f"A ratio not reached stopped at the rounds' budget ({rounds.budget_s:.0f} s of added rounds) or "
                  f"at {rounds.max_rounds} rounds; the rounds it would need at the same spread: its rounds x "
                  "(half-width / target)^2 (a half-width shrinks as one over the square root of the rounds)."
                  + (f" Where a run's wall time went: {split}." if split else "")]
    return lines


def shown_half_width(w: float) -> str:
    """A half-width as a percentage to 0.1, rounded up: one just over its target never reads as equal to it."""
    return f"{math.ceil(round(w * 1000, 6)) / 10:.1f}%"


def rounds_needed(r: Ratio) -> int:
    """About how many rounds ratio ``r`` would need for its half-width to reach its target at the same spread."""
    return max(r.rounds, math.ceil(r.rounds * (r.half_width / r.target) ** 2))


def _holds(point, group: dict, labels: set[str]) -> bool:
    """Whether run point ``point`` is one of ``labels`` in ``group`` (a headline ratio's side)."""
    opts = point.data_options or {}
    mine = {"data": point.data, "max_rows": opts.get("max_rows", 0), "rows": opts.get("rows", 0),
            "batch_size": point.batch_size, "mode": point.mode, "optimizer": point.optimizer,
            "world_size": point.world_size}
    return (point.label or point.impl) in labels and all(mine[k] == v for k, v in group.items() if k in mine)


def points_to_resolve(sweep, cores: int):
    """For the sweep's rounds until resolved: a callable naming the run points of every headline ratio (and the A/A
    control) whose interval is still wider than its target or that has fewer than ``min_rounds`` rounds, read from
    the set's records each time it is asked (``more(required=True)``: only the latter)."""
    from reproduce.analysis.aggregate import flat_repeats, load_records
    from reproduce.harness.sweep import experiment_records

    exp = sweep.experiment

    def more(required: bool = False) -> list:
        """The points of the next round (``required``: only those below the minimum of rounds)."""
        reps = flat_repeats(load_records(sweep.out_dir, experiment_records(sweep)))
        wanted = unresolved_labels(reps, exp.headline, exp.rounds, cores, required)
        return [p for p in sweep.points if any(_holds(p, g, labels) for g, labels in wanted)]
    return more


SCHEDULE_SETS = {"sequential": "aa-schedule", "duet": "aa-schedule_duet"}  # the aa-schedule experiment's two sets


def schedule_comparison(root: Path, machine: str) -> list[tuple[str, Ratio, float]]:
    """(schedule, its A/A control, the wall time its runs took) of each set of the aa-schedule experiment that has
    records on ``machine`` (a duet's two runs overlap: its wall time is half their sum)."""
    out = []
    for schedule, name in SCHEDULE_SETS.items():
        path = Path(root) / "results" / name / machine / "repeats.csv"
        if not path.exists():
            continue
        reps = pd.read_csv(path)
        c = control(reps)
        if c is not None:
            wall = float(reps["wall_s"].sum()) / (2 if schedule == "duet" else 1)
            out.append((schedule, c, wall))
    return out


def tighter_schedule(root: Path, machine: str) -> str | None:
    """The schedule whose A/A interval measured narrower on ``machine`` with the same wall time (None: not measured
    both ways)."""
    rows = schedule_comparison(root, machine)
    if len(rows) < 2:
        return None
    return min(rows, key=lambda r: r[1].half_width)[0]


def schedule_lines(root: Path, machine: str) -> list[str]:
    """The aa-schedule report block: the A/A control measured sequentially and in duet rounds, and the choice."""
    rows = schedule_comparison(root, machine)
    if not rows:
        return []
    lines = ["| schedule | rounds | wall time of the runs | A/A ratio [interval] | half-width | interval |",
             "|---|---|---|---|---|---|"]
    for schedule, c, wall in rows:
        lines.append(f"| {schedule} | {c.rounds} | {wall / 60:.1f} min | {c.value:.3f} [{c.lo:.3f}, {c.hi:.3f}] | "
                     f"{c.half_width:.1%} | {c.interval} |")
    choice = tighter_schedule(root, machine)
    if choice:
        lines += ["", f"The A/A interval is narrower with **{choice}** rounds on this machine, for two runs that are "
                      f"each other's partner. " + ("A co-scheduled run's time depends on its partner, so a ratio is "
                      "paired fairly in duet rounds only when its two sides run as partners; where one point is a "
                      "side of several ratios (EcoRec of EL-Rec / EcoRec, TT-Rec / EcoRec and the A/A control; the "
                      "planner of its three), they cannot all be, and the profile runs sequential rounds "
                      "(`chosen_schedule`; tests/reproduce/test_evidence.py holds the profiles to it)."
                      if choice == "duet" else "The timed profiles run sequential rounds.")]
    return lines


def chosen_schedule(exp, tighter: str | None) -> str:
    """The schedule an experiment's timed profile should run: ``tighter`` (what the aa-schedule comparison measured)
    when it is duet and every headline ratio's sides (and the A/A pair) can run as each other's partners in one round
    (no label is a side of two pairs), else sequential."""
    if tighter != "duet":
        return "sequential"
    pairs = [*exp.headline, *([(f"{exp.control} (A/A twin)", exp.control)] if exp.control else [])]
    sides = [label for pair in pairs for label in pair]
    return "duet" if len(sides) == len(set(sides)) else "sequential"
