"""The ratio-table engine of the report and the README, over one machine's runs (repeats.csv): every ratio is the median over rounds of the ratio within each round, with its order-statistic interval (stats.py; the table says
what it is), every time a median with its interval. Under each table: what its intervals are, the repeat-to-repeat
spread of the step time, which time ratios the set cannot tell from 1 (†: the interval holds 1 or overlaps the set's
A/A control) and which rows ran more ranks x threads than the machine has cores (*). Nothing here is typed in: a table row exists only
where its records do."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from reproduce.analysis.aggregate import without_twins
from reproduce.analysis.resolving import band, noise_note, within_noise
from reproduce.analysis.stats import NAN3, by_round, median_interval, paired_interval_name, paired_ratio


TIME_METRICS = ("total_ms", "cpu_ms")


@dataclass(frozen=True)
class Col:
    """One column: median(metric of `num`) / median(metric of `den`) with its interval, or, without `den`, the
    median of `num` divided by `scale`. With `per`, the ratio is divided by the same ratio of that metric (e.g. a
    time ratio over the FLOP ratio: 1 when both run at the same FLOP rate)."""
    title: str
    num: str
    metric: str = "total_ms"
    den: str | None = None
    unit: str = "×"
    scale: float = 1.0
    by: str = "label"
    per: str | None = None


def _cell(v: tuple[float, float, float], unit: str, runs: int) -> str:
    value, lo, hi = v
    if value != value:
        return "–"
    digits = ".0f" if abs(value) >= 100 else ".2f"
    if runs < 2 or lo == hi:  # one run, or a ratio that is the same in every round (a system over itself): no interval
        return f"{value:{digits}}{unit}"
    return f"{value:{digits}}{unit} [{lo:{digits}}, {hi:{digits}}]"


def ratio_table(reps: pd.DataFrame, keys: list[tuple[str, str]], cols: list[Col]) -> list[str]:
    """A markdown table: one row per setting of the ``keys`` (column, title) where any column has a value, then its
    notes (``table_notes``). A ratio is paired by round (stats.paired_ratio); a time ratio whose interval holds 1 or
    overlaps the set's A/A control is marked † (resolving.within_noise). The A/A twin is no row of its own."""
    aa = band(reps)
    ok = without_twins(reps[reps["status"] == "ok"])
    names = [k for k, _ in keys]
    lines = ["| " + " | ".join([t for _, t in keys] + [c.title for c in cols]) + " |",
             "|" + "---|" * (len(keys) + len(cols))]
    all_runs: list[int] = []
    marks = {"noise": False, "over": False}
    for key, g in ok.groupby(names, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        cells, runs = [], []
        for c in cols:
            num = _rounds(g, c.by, c.num, c.metric)
            if c.den is None:
                v = median_interval([x / c.scale for x in num.values()]) if num else NAN3
                runs.append(len(num))
            else:
                den = _rounds(g, c.by, c.den, c.metric)
                *v, n = paired_ratio(num, den) if num and den else (*NAN3, 0)
                if c.per is not None:
                    base = paired_ratio(_rounds(g, c.by, c.num, c.per), _rounds(g, c.by, c.den, c.per))[0]
                    v = [x / base if base else float("nan") for x in v]
                v = tuple(v)
                runs.append(n)
            cell = _cell(v, c.unit, runs[-1])
            if (c.den is not None and c.per is None and c.metric in TIME_METRICS and v[0] == v[0]
                    and runs[-1] > 1 and v[1] < v[2] and within_noise(v[1], v[2], aa)):
                cell += " †"
                marks["noise"] = True
            cells.append(cell)
            if v[0] == v[0]:
                all_runs.append(runs[-1])
        if all(c == "–" for c in cells):
            continue
        fmt = [_key(n, k) for n, k in zip(names, key)]
        if "world_size" in names and "oversubscribed" in g and g["oversubscribed"].fillna(False).astype(bool).any():
            fmt[names.index("world_size")] += "*"
            marks["over"] = True
        lines.append("| " + " | ".join(fmt + cells) + " |")
    return lines + table_notes(ok, all_runs, aa, marks)


def _rounds(g: pd.DataFrame, by: str, name: str, metric: str) -> dict[int, float]:
    """round -> the ``metric`` of ``name``'s run in that round (none when the records predate the metric)."""
    return by_round(g[g[by] == name], metric)


def table_notes(ok: pd.DataFrame, runs: list[int], aa, marks: dict[str, bool]) -> list[str]:
    """What a reader needs under a measured table: the kind of its intervals, the repeat-to-repeat spread of the
    step time (wall, and per-process CPU time where recorded), and the meaning of its marks."""
    if not runs:
        return []
    lo, hi = min(runs), max(runs)
    what = paired_interval_name(lo) if lo == hi else f"{paired_interval_name(lo)} to {paired_interval_name(hi)}"
    notes = [f"Ratios: the Hodges-Lehmann estimate over rounds of the (log) ratio within each round; intervals: "
             f"{what}."]
    spread = repeat_spread(ok)
    if spread:
        notes.append(spread)
    if "schedule" in ok and (ok["schedule"] == "duet").any():
        duet = int((ok["schedule"] == "duet").sum())
        notes.append(f"{duet} of these {len(ok)} runs ran co-scheduled (duet rounds: two runs at once, one per core): "
                     f"their ratios are paired as any, their absolute times are not solo times.")
    if marks["noise"]:
        notes.append(noise_note(aa))
    if marks["over"]:
        notes.append("* ranks × threads exceed the machine's cores (oversubscribed): the ranks time each other's "
                     "compute as much as their own; no headline value comes from such a row.")
    return ["", *(" ".join(notes),)]


def repeat_spread(ok: pd.DataFrame) -> str:
    """The median and largest repeat-to-repeat spread (max / min - 1 over a point's repeats) of the step time, in
    wall time and, where the records have it, in per-process CPU time."""
    parts = []
    for col, name in (("total_ms", "wall time"), ("cpu_ms", "CPU time")):
        if col not in ok or ok[col].isna().all():
            continue
        per = ok.dropna(subset=[col]).groupby("point_id")[col].agg(["min", "max", "count"])
        per = per[per["count"] > 1]
        if per.empty:
            continue
        sp = per["max"] / per["min"] - 1
        parts.append(f"{name} median {sp.median():.0%}, max {sp.max():.0%}")
    if not parts:
        return ""
    return ("Repeat-to-repeat spread of the step time (max / min − 1 over a point's repeats): " + "; ".join(parts)
            + ".")


def _key(name: str, value) -> str:
    if name == "max_rows":
        return f"≤ {int(value):,}" if value else "full"
    if name == "batch_size":
        return f"{int(value):,}"
    return str(value)
