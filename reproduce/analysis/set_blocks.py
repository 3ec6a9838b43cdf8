"""The report blocks an experiment names in its TOML's ``report`` list (``SET_BLOCKS``), each drawn from that
experiment's result set: the ratio columns of sc24, its ablation, sc24_table1 and recsys24 (their labels are the
experiment's: ``BLOCK_COLUMNS``, held to the TOMLs by a test, so a renamed label cannot empty a column unnoticed), the
compression frontier and verdict, tt-quality, the A/A schedule and each experiment's headline evidence."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from reproduce.analysis.durations import run_split
from reproduce.analysis.frontier import frontier_lines, read_infeasible, verdict_lines
from reproduce.analysis.resolving import band
from reproduce.analysis.stats import ordered_pairs, predicted_vs_measured, spearman_ci
from reproduce.analysis.ratio_tables import Col, ratio_table


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
    rounds and the half-width each reached against its target (where one fell short, where a run's wall time went)."""
    def block(reps: pd.DataFrame, root: Path, set_name: str, machine: str) -> list[str]:
        from reproduce.analysis.resolving import headline_lines
        from reproduce.harness.experiment import experiment

        exp = experiment(exp_name)
        cores = _cores(reps)
        split = run_split(Path(root) / "results" / set_name / machine)
        return headline_lines(reps, exp.headline, exp.rounds, cores, split) if cores else []
    return block


def _cores(reps: pd.DataFrame) -> int | None:
    """The cores of the machine the runs ran on (its fingerprint's count, as recorded), or None."""
    return int(reps["cores"].dropna().iloc[0]) if "cores" in reps and reps["cores"].notna().any() else None


SET_BLOCKS = {"sc24": _sc24, "sc24-ablation": _sc24_ablation, "sc24-table1": _sc24_table1, "recsys24": _recsys24,
              "compression": _compression, "compression-verdict": _compression_verdict, "tt-quality": _tt_quality,
              "train-output": _train_output, "aa-schedule": _aa_schedule, "sc24-evidence": _evidence("sc24"),
              "recsys24-evidence": _evidence("recsys24"), "sc24-table1-evidence": _evidence("sc24_table1"),
              "sc24-fig11-evidence": _evidence("sc24_fig11"), "table-size-evidence": _evidence("table_size")}


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


# the ratio columns of each block, by the experiment labels they name
BLOCK_COLUMNS = {"sc24": SC24, "sc24-ablation": ABLATION, "sc24-table1": TABLE1, "recsys24": RECSYS24}

