"""The measured tables of the report and the README, computed from one machine's runs (repeats.csv): every ratio
is the median over rounds of the ratio within each round, with its order-statistic interval (stats.py; the table says
what it is), every time a median with its interval. Under each table: what its intervals are, the repeat-to-repeat
spread of the step time, which time ratios the set cannot tell from 1 (†: the interval holds 1 or overlaps the set's
A/A control) and which rows ran more ranks x threads than the machine has cores (*). Nothing here is typed in: a table row exists only
where its records do."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from reproduce.analysis.claims import repeats_of
from reproduce.analysis.freshness import RECORD_SETS
from reproduce.analysis.frontier import frontier_lines, read_infeasible, verdict_lines
from reproduce.analysis.aggregate import without_twins
from reproduce.analysis.resolving import band, noise_note, within_noise
from reproduce.harness.records import read_record
from reproduce.analysis.stats import (NAN3, by_round, interval_name, median_interval, ordered_pairs, paired_ratio,
                                      predicted_vs_measured, spearman_ci)

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
    what = interval_name(lo) if lo == hi else f"{interval_name(lo)} to {interval_name(hi)}"
    notes = [f"Ratios: the median over rounds of the ratio within each round; intervals: {what}."]
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


SC24 = [Col("EL-Rec / EcoRec time", "elrec", den="ecorec"), Col("TT-Rec / EcoRec time", "ttrec", den="ecorec"),
        Col("EL-Rec / EcoRec CPU time", "elrec", "cpu_ms", den="ecorec"),
        Col("TT-Rec / EcoRec CPU time", "ttrec", "cpu_ms", den="ecorec"),
        Col("EcoRec / EL-Rec peak memory", "ecorec", "peak_rss_delta_bytes", "elrec", unit=""),
        Col("EcoRec / TT-Rec peak memory", "ecorec", "peak_rss_delta_bytes", "ttrec", unit="")]
ABLATION = [Col("batch-wise (bwp) ms", "ablation: batch-wise pipeline (bwp)", unit=""),
            Col("table-wise (twp) ms", "ablation: table-wise pipeline (twp)", unit=""),
            Col("twp + reordering ms", "ablation: twp + reordering", unit=""),
            Col("+ slope (default) ms", "ecorec", unit=""),
            Col("bwp / twp", "ablation: batch-wise pipeline (bwp)", den="ablation: table-wise pipeline (twp)")]
TABLE1 = [Col("EL-Rec / EcoRec time", "elrec", den="ecorec"), Col("EL-Rec / EcoRec FLOPs", "elrec", "flops", "ecorec"),
          Col("EL-Rec time ratio / FLOP ratio", "elrec", den="ecorec", unit="", per="flops"),
          Col("TT-Rec / EcoRec time", "ttrec", den="ecorec"), Col("TT-Rec / EcoRec FLOPs", "ttrec", "flops", "ecorec"),
          Col("TT-Rec time ratio / FLOP ratio", "ttrec", den="ecorec", unit="", per="flops"),
          Col("EcoRec / EL-Rec peak memory", "ecorec", "peak_rss_delta_bytes", "elrec", unit=""),
          Col("TT-Rec peak MiB", "ttrec", "peak_rss_delta_bytes", unit="", scale=2**20)]
RECSYS24 = [Col("table_row_wise / planner time", "table_row_wise", den="embark planner"),
            Col("uniform / planner time", "uniform", den="embark planner"),
            Col("round_robin / planner time", "round_robin", den="embark planner"),
            Col("planner / TorchRec table-wise time", "embark planner", den="torchrec table-wise"),
            Col("round_robin (our table-wise) / TorchRec table-wise time", "round_robin", den="torchrec table-wise"),
            Col("planner step ms", "embark planner", unit=""),
            Col("TorchRec step ms", "torchrec table-wise", unit="")]


# the result set each generated block reads (freshness.set_state names)
# blocks that are not an experiment's: `make bench`'s sets and the models' outputs (their sets' names)
BENCH_BLOCKS = {"roofline": "bench", "tt-step": "bench", "step-profile": "bench", "prepare": "bench"}


def _sc24(reps: pd.DataFrame, root: Path, set_name: str, machine: str) -> list[str]:
    main = reps[~reps["label"].astype(str).str.startswith("ablation")]
    return ratio_table(main, [("data", "dataset"), ("max_rows", "tables"), ("world_size", "ranks")], SC24)


def _sc24_ablation(reps: pd.DataFrame, root: Path, set_name: str, machine: str) -> list[str]:
    eco = reps[reps["impl"] == "ecorec"]
    keys = ["data", "max_rows", "world_size"]
    ablated = eco[eco["label"].astype(str).str.startswith("ablation")][keys].drop_duplicates()
    return ratio_table(eco.merge(ablated, on=keys), [("data", "dataset"), ("max_rows", "tables"),
                                                     ("world_size", "ranks")], ABLATION)


def _sc24_table1(reps: pd.DataFrame, root: Path, set_name: str, machine: str) -> list[str]:
    return ratio_table(reps, [("data", "ids"), ("batch_size", "batch")], TABLE1)


def _recsys24(reps: pd.DataFrame, root: Path, set_name: str, machine: str) -> list[str]:
    return (ratio_table(reps, [("data", "workload"), ("world_size", "ranks")], RECSYS24) + planner_choices(reps)
            + spearman(root, machine, band(reps)))


def _compression(reps: pd.DataFrame, root: Path, set_name: str, machine: str) -> list[str]:
    # one run per point (the seeds are points): the runs are the summary
    return frontier_lines(reps, read_infeasible(Path(root) / "results" / set_name / machine))


def _compression_verdict(reps: pd.DataFrame, root: Path, set_name: str, machine: str) -> list[str]:
    return verdict_lines(reps)


def _tt_quality(reps: pd.DataFrame, root: Path, set_name: str, machine: str) -> list[str]:
    from reproduce.analysis.tt_quality import quality_lines

    return quality_lines(reps)


def _train_output(reps: pd.DataFrame, root: Path, set_name: str, machine: str) -> list[str]:
    from reproduce.analysis.tt_quality import train_example

    return train_example(reps, Path(root) / "results" / set_name / machine)


# the tables an experiment can name in its TOML's ``report`` list, each drawn from that experiment's result set
def _aa_schedule(reps: pd.DataFrame, root: Path, set_name: str, machine: str) -> list[str]:
    from reproduce.analysis.resolving import schedule_lines

    return schedule_lines(root, machine)


def _evidence(exp_name: str):
    """A block of the headline ratios and the A/A control of experiment ``exp_name`` (cpu profile): value, interval,
    rounds and the half-width each reached against its target."""
    def block(reps: pd.DataFrame, root: Path, set_name: str, machine: str) -> list[str]:
        from reproduce.analysis.resolving import headline_lines
        from reproduce.harness.experiment import experiment

        exp = experiment(exp_name)
        cores = _cores(reps)
        return headline_lines(reps, exp.headline, exp.rounds, cores) if cores else []
    return block


def _cores(reps: pd.DataFrame) -> int | None:
    """The cores of the machine the runs ran on (its fingerprint's count, as recorded), or None."""
    return int(reps["cores"].dropna().iloc[0]) if "cores" in reps and reps["cores"].notna().any() else None


SET_BLOCKS = {"sc24": _sc24, "sc24-ablation": _sc24_ablation, "sc24-table1": _sc24_table1, "recsys24": _recsys24,
              "compression": _compression, "compression-verdict": _compression_verdict, "tt-quality": _tt_quality,
              "train-output": _train_output, "aa-schedule": _aa_schedule, "sc24-evidence": _evidence("sc24"),
              "recsys24-evidence": _evidence("recsys24")}


def measured_tables(root: Path, machine: str, states: dict | None = None) -> dict[str, list[str]]:
    """The named tables (markdown lines) that ``machine``'s records support, each opened by the line that names
    its result set, the commit(s) it was measured at and, when the code moved since, STALE (``states``: set name ->
    freshness.SetState): each experiment's ``report`` blocks (SET_BLOCKS), `make bench`'s, each model's and the
    durations."""
    from reproduce.analysis.models import MODELS
    from reproduce.harness.experiment import report_blocks

    out: dict[str, list[str]] = {}
    sets: dict[str, str] = dict(BENCH_BLOCKS)
    for block, set_name in report_blocks():
        reps = repeats_of(root, set_name, machine)
        if reps is not None:
            out[block] = SET_BLOCKS[block](reps, root, set_name, machine)
            sets[block] = set_name
    for name, lines in (("roofline", roofline(root, machine)), ("tt-step", tt_step(root, machine)),
                        ("step-profile", step_profile(root, machine)), ("prepare", prepare_rates(root, machine))):
        out[name] = lines
    for model in MODELS.values():
        out[model.block] = model.table(root, machine)
        sets[model.block] = model.set_name
    out["durations"] = durations(root, machine, states)
    out["quickstart"] = quickstart(root, machine)
    verdict = out.pop("compression-verdict", [])
    out = {k: v for k, v in out.items() if len(v) > 2}  # a table beyond its header
    if verdict:  # a data set's line and one per budget
        out["compression-verdict"] = verdict
    for name, lines in out.items():
        st = (states or {}).get(sets.get(name, ""))
        if st is not None:
            out[name] = [f"Set `results/{st.name}/{machine}`: {st.line()}.", "", *lines]
    return out


def planner_choices(reps: pd.DataFrame) -> list[str]:
    """What the planner ran per workload and world size: the candidate it started from, the moves it kept, and a
    searched plan the risk margin set aside. Where it ran a simple plan unchanged, its ratio to that plan measures
    the same plan twice (the set's noise)."""
    if "plan_start" not in reps:
        return []
    ok = reps[(reps["status"] == "ok") & (reps["label"] == "embark planner") & reps["plan_start"].notna()]
    parts = []
    for (data, world), g in ok.groupby(["data", "world_size"], sort=True):
        row = g.iloc[0]
        moves = int(row["plan_moves"]) if row["plan_moves"] == row["plan_moves"] else 0
        chose = f"{row['plan_start']}" + (f" + {moves} moves" if moves else "")
        aside = row.get("plan_set_aside")
        parts.append(f"{data} x{world}: {chose}" + (f" ({aside} set aside)" if isinstance(aside, str) else ""))
    if not parts:
        return []
    simple = ok[ok["plan_moves"].fillna(0) == 0]["plan_start"] if "plan_moves" in ok else ok["plan_start"]
    same = ""
    if len(simple) == len(ok) and simple.nunique() == 1:  # one simple plan everywhere: say what was compared
        plan = simple.iloc[0]
        same = (f" The planner chose {plan} unchanged everywhere: its bars are {plan} as the planner ran it, so "
                f"{plan} / planner measures one plan twice (an A/A pair) and table_row_wise / planner is "
                f"table_row_wise / {plan}.")
    return ["", "The planner's plan (candidate it started from; a searched plan the risk margin set aside): "
            + "; ".join(parts) + "." + same]


def spearman(root: Path, machine: str, aa=None) -> list[str]:
    """How well the cost model the plans were predicted with ranks the measured plans (and, calibrated, its error per
    term)."""
    path = Path(root) / "results" / "recsys24" / machine / "summary.csv"
    if not path.exists():
        return []
    ok, _ = predicted_vs_measured(pd.read_csv(path))
    if len(ok) < 3:
        return []
    rho, lo, hi = spearman_ci(ok["predicted_step_ms"], ok["total_ms"])
    agree, pairs = ordered_pairs(ok, ["data", "world_size"])
    beyond = ""
    if aa is not None:  # the A/A control's reach: a difference inside it is not one the set can see
        noise = max(1 - aa[0], aa[1] - 1, 0.0)
        a, n = ordered_pairs(ok, ["data", "world_size"], gap=noise)
        beyond = (f" Of the {n} pairs whose medians differ by more than the set's A/A control ({noise:.0%}), it "
                  f"orders {a} as measured.")
    by = sorted(set(ok["predicted_by"].dropna())) if "predicted_by" in ok else []
    model = {"calibrated": "the calibrated cost model (this machine's profile)",
             "hugectr": "HugeCTR's cost model (cpu-gloo profile)"}
    what = " and ".join(model.get(b, b) for b in by) or "HugeCTR's cost model (cpu-gloo profile)"
    return ["", f"Predicted by {what}: the {len(ok)} measured EMBark plans rank with Spearman ρ = "
                f"{rho:.2f} [bootstrap 95 % interval {lo:.2f}, {hi:.2f}] "
                f"(figures/recsys24/{machine}/predicted_vs_measured); most of that is workload size. Within one "
                f"workload and world (the choice a planner makes) it orders {agree} of {pairs} pairs of plans as "
                f"measured." + beyond + term_errors(ok)]


def term_errors(ok: pd.DataFrame) -> str:
    """The calibrated model's error per term over the plans it predicted: communication against the busiest rank's
    blocked communication, compute against the rest of the step, and the whole step."""
    if "predicted_by" not in ok:
        return ""
    cal = ok[ok["predicted_by"] == "calibrated"]
    parts = []
    for pred, meas, what in (("predicted_comm_ms", "comm_blocked_ms", "communication"),
                             ("predicted_compute_ms", "compute_ms", "compute"), ("predicted_step_ms", "total_ms", "step")):
        both = cal[[pred, meas]].dropna() if pred in cal and meas in cal else cal[:0]
        if len(both) >= 2:
            err = (both[pred] - both[meas]).abs()
            parts.append(f"{what} {err.mean():.2f} ms mean absolute error ({(err / both[meas]).median():.0%} median "
                         f"relative)")
    return f" The calibrated model over its {len(cal)} plans: " + "; ".join(parts) + "." if parts else ""


def durations(root: Path, machine: str, states: dict | None = None) -> list[str]:
    """Wall time of each experiment's runs on the machine (the sum of its runs' processes), its sweep from the first
    noise probe to the last (runs, probes and the sweep's own work), the commit(s) they ran at, and what `make
    reproduce` took end to end (calibration, the sc24 and recsys24 sweeps)."""
    lines = ["| experiment | runs | rounds per point | wall time of the runs | sweep, first to last probe | measured at |",
             "|---|---|---|---|---|---|"]
    sweeps: dict[str, float] = {}
    for exp in RECORD_SETS:
        reps = repeats_of(root, exp, machine)
        if reps is None or "wall_s" not in reps or reps["wall_s"].isna().all():
            continue
        per = reps.groupby("point_id")["repeat"].nunique()
        n = f"{per.min()}" if per.min() == per.max() else f"{per.min()}-{per.max()}"
        st = (states or {}).get(exp)
        at = "–" if st is None else st.commit_label() + (" (STALE)" if st.is_stale else "")
        span = sweep_span_s(Path(root) / "results" / exp / machine)
        if span is not None:
            sweeps[exp] = span
        lines.append(f"| {exp} | {len(reps)} | {n} | {_minutes(reps['wall_s'].sum())} | "
                     f"{'–' if span is None else _minutes(span)} | {at} |")
    cal = calibration_s(root, machine)
    if cal is not None and {"sc24", "recsys24"} <= set(sweeps):
        total = cal + sweeps["sc24"] + sweeps["recsys24"]
        lines += ["", f"`make reproduce` on this machine: calibration {_minutes(cal)} + sc24 {_minutes(sweeps['sc24'])} "
                      f"+ recsys24 {_minutes(sweeps['recsys24'])} = **{_minutes(total)}** (plus the install and the "
                      f"native build on a fresh clone)."]
    return lines


def quickstart(root: Path, machine: str) -> list[str]:
    """How long each `make reproduce*` command took on the machine: its sweep from the first noise probe to the last
    (recsys24: after the calibration it needs), and `make reproduce` as the sum of its parts."""
    from reproduce.harness.experiment import experiment, experiment_names

    lines = ["| command | what | took on the reference machine |", "|---|---|---|"]
    spans = {}
    for name in experiment_names():
        span = sweep_span_s(experiment(name).out_dir(root, machine))
        if span is None:
            continue
        extra = calibration_s(root, machine) if name == "recsys24" else None
        spans[name] = span + (extra or 0.0)
        what = experiment(name).description + (" (after this machine's calibration)" if extra else "")
        lines.append(f"| `dlrmbench reproduce {name}` | {what} | {_minutes(spans[name])} |")
    if {"sc24", "recsys24"} <= set(spans):
        lines.insert(2, f"| `make reproduce` | sc24 and recsys24: their sweeps and the calibration (not the models and "
                        f"figures drawn after them) | "
                        f"**{_minutes(spans['sc24'] + spans['recsys24'])}** |")
    return lines if len(lines) > 2 else []


def _minutes(s: float) -> str:
    s = int(round(s))
    return f"{s // 60} min {s % 60:02d} s"


def sweep_span_s(out_dir: Path) -> float | None:
    """Seconds a set's sweeps ran: each sweep from its first noise probe ("before") to its last (a set measured over
    several sweeps, resumed, sums them; the time between them does not count). None: under two probes."""
    from datetime import datetime

    from reproduce.harness.noise import load_probes

    probes = sorted((datetime.fromisoformat(p["when"]), p.get("stage")) for p in load_probes(out_dir) if p.get("when"))
    if len(probes) < 2:
        return None
    total, start, last = 0.0, probes[0][0], probes[0][0]
    for when, stage in probes[1:]:
        if stage == "before":  # a new sweep: close the one before
            total += (last - start).total_seconds()
            start = when
        last = when
    return total + (last - start).total_seconds()


def calibration_s(root: Path, machine: str) -> float | None:
    """How long the machine's calibration took (None: a profile from before it said)."""
    path = Path(root) / "results" / "calibration" / machine / "gloo.json"
    return json.loads(path.read_text()).get("wall_s") if path.exists() else None


def bench_entries(root: Path, machine: str, key: str) -> list[dict]:
    """The benchmarks of `make bench` (results/bench/<machine>/benchmarks.json) whose extra_info holds ``key``, in file
    order (none when the set is missing)."""
    path = Path(root) / "results" / "bench" / machine / "benchmarks.json"
    if not path.exists():
        return []
    return [b for b in json.loads(path.read_text())["benchmarks"] if key in b.get("extra_info", {})]


def roofline(root: Path, machine: str) -> list[str]:
    """The TT kernel roofline of `make bench` (results/bench/<machine>/benchmarks.json): each kernel's median
    GFLOP/s over interleaved rounds and its share of the SGEMM of the same round (median and range)."""
    table = next((b["extra_info"]["kernels"] for b in bench_entries(root, machine, "kernels")), None)
    if table is None:
        return []
    lines = ["| kernel | GFLOP/s (median of rounds) | share of the same round's SGEMM: median (range) |",
             "|---|---|---|"]
    for name, e in table.items():
        lines.append(f"| {name} | {e['GFLOP/s']:.1f} | {e['of SGEMM']:.2f} ({e['of SGEMM min']:.2f}-"
                     f"{e['of SGEMM max']:.2f}, {e['rounds']} rounds) |")
    return lines


def prepare_rates(root: Path, machine: str) -> list[str]:
    """`data prepare` throughput of `make bench` (benchmarks/test_prepare.py): raw MiB per second of wall time over
    the whole two-pass prepare, median of its rounds."""
    rows = bench_entries(root, machine, "file_mib")
    lines = ["| format | rows | file MiB | median s | raw MiB/s |", "|---|---|---|---|---|"]
    for b in rows:
        e, med = b["extra_info"], b["stats"]["median"]
        lines.append(f"| {e['format']} | {e['rows']:,} | {e['file_mib']:.1f} | {med:.2f} | {e['file_mib'] / med:.1f} "
                     f"|")
    return lines


def tt_step(root: Path, machine: str) -> list[str]:
    """The step benchmark of `make bench` (benchmarks/test_tt_step.py): each system's median step, its step over
    its FLOP-time at the same round's SGEMM rate and over dense-fbgemm's step in the same round (median and
    range of the per-round ratios), per table size."""
    runs = [b["extra_info"] for b in bench_entries(root, machine, "systems")]
    if not runs:
        return []

    def ratio(e, key):
        lo, hi = e[f"{key}_range"]
        return "–" if e[key] != e[key] or lo is None else f"{e[key]:.2f} ({lo:.2f}-{hi:.2f})"

    lines = ["| rows | system | step ms (median) | step / FLOP-time | step / dense-fbgemm step | parameters |",
             "|---|---|---|---|---|---|"]
    for run in sorted(runs, key=lambda r: r["rows"]):
        for name, e in run["systems"].items():
            lines.append(f"| {run['rows']:.0e} | {name} | {e['step_ms']:.0f} | {ratio(e, 'over_flop_time')} | "
                         f"{ratio(e, 'over_dense')} | {e['param_bytes'] / 2**20:,.1f} MiB |")
    return lines


def step_profile(root: Path, machine: str) -> list[str]:
    """The step profile of `make bench` (benchmarks/test_tt_step.py): per TT system and table size, one profiled
    step (the median of three by wall time): milliseconds inside the TT stage kernels, outside them, the share
    outside, and the ops that take the most of it."""
    runs = [b["extra_info"] for b in bench_entries(root, machine, "profiles")]
    lines = ["| rows | system | step ms (profiled) | in the TT kernels ms | outside ms | outside share | "
             "largest outside (self ms) |", "|---|---|---|---|---|---|---|"]
    for run in sorted(runs, key=lambda r: r["rows"]):
        for name, e in run["profiles"].items():
            top = ", ".join(f"{op} {ms:.1f}" for op, ms in e["top_outside"][:4])
            lines.append(f"| {run['rows']:.0e} | {name} | {e['step_ms']:.0f} | {e['tt_kernels_ms']:.0f} | "
                         f"{e['outside_ms']:.0f} | {e['outside_share']:.0%} | {top} |")
    return lines


def machine_line(root: Path, machine: str) -> str:
    """The fingerprint of a result set, from one of its records."""
    for exp in RECORD_SETS:
        for f in sorted((Path(root) / "results" / exp / machine).glob("*.json")):
            env = read_record(f).env
            fp = env.get("machine")
            if fp:
                mem = f", {fp['memory_bytes'] / 2**30:.0f} GiB" if fp.get("memory_bytes") else ""
                gpu = f", {fp['gpu_count']}x {fp['gpu']}" if fp.get("gpu_count") else ""
                return (f"{machine}: {fp['cpu']}, {fp['cores']} cores ({fp['isa']}){mem}{gpu}; torch {fp['torch']}"
                        f"{', CUDA ' + fp['cuda'] if fp.get('cuda') else ''}"
                        f"{', fbgemm ' + fp['fbgemm_gpu'] if fp.get('fbgemm_gpu') else ''}")
            if env.get("cpu"):
                return f"{machine}: {env['cpu']}, {env.get('cpu_count')} cores; torch {env.get('torch')}"
    return f"{machine}: no records"
