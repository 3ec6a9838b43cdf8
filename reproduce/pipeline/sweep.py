"""A sweep end to end on the local launcher: every run not yet recorded, round by round; then, when the experiment
has headline ratios or an A/A control and a rounds budget, rounds of the points whose intervals are still wider than
their target; then the set's summary, the headline table and the figures. SIGTERM (a scheduler, `kill`) stops the
running point's processes as Ctrl-C does."""
from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable


class SetUnreadable(ValueError):
    """A record of the set that the summary cannot read: named, with what to do."""


@dataclass
class SweepResult:
    summary: Path  # the set's summary.csv (repeats.csv beside it)
    headline: list[str]  # the headline ratios and the A/A control as a markdown table (empty: the set has none)
    figures: list[Path]
    failed: list[str] = field(default_factory=list)  # "<point id>.r<repeat> (why)" of the runs that did not finish


def adaptive(exp) -> bool:
    """Whether ``exp`` (a resolved Sweep) runs rounds until its headline ratios resolve after its first rounds."""
    e = exp.experiment
    return (e.rounds.budget_s > 0 or e.rounds.min_rounds > exp.repeats) and bool(e.headline or e.control)


def run_sweep(exp, force: bool = False, timeout_s: float | None = None, probe: bool = True,
              on_start: Callable | None = None, on_point: Callable | None = None) -> SweepResult:
    """Run ``exp`` here (``reproduce.harness.sweep.run_experiment``, its callbacks passed through), then summarize and
    draw it. DiskFull propagates (nothing of the run that hit it is recorded); SetUnreadable when a record of the set
    cannot be summarized."""
    import pandas as pd

    from reproduce.analysis.aggregate import summarize_experiment
    from reproduce.analysis.plots import draw
    from reproduce.analysis.resolving import headline_lines, points_to_resolve
    from reproduce.harness.sweep import machine_cores, run_experiment

    cores = len(machine_cores())
    failed: list[str] = []

    def done(i, n, point, repeat, outcome):
        if not outcome.finished:
            why = outcome.kind if outcome.record is None else outcome.record.status.value
            failed.append(f"{point.point_id}.r{repeat} ({why})")
        if on_point is not None:
            on_point(i, n, point, repeat, outcome)

    stopped: list[int] = []  # the signal, once one came: an exception raised where Python swallows it (a
    # destructor running when the signal lands) must not let the sweep start another run or end as if it finished

    def terminate(signum, frame):
        stopped.append(signum)
        raise KeyboardInterrupt(f"signal {signum}")

    def start(point, repeat, progress):
        if stopped:
            raise KeyboardInterrupt(f"signal {stopped[0]}")
        if on_start is not None:
            on_start(point, repeat, progress)

    before = signal.signal(signal.SIGTERM, terminate)
    try:
        run_experiment(exp, force=force, timeout_s=timeout_s, on_point=done, on_start=start, probe=probe,
                       more=points_to_resolve(exp, cores) if adaptive(exp) else None)
    finally:
        signal.signal(signal.SIGTERM, before)
    if stopped:
        raise KeyboardInterrupt(f"signal {stopped[0]}")
    try:
        summary = summarize_experiment(exp)
    except ValueError as exc:
        raise SetUnreadable(str(exc)) from None
    lines = headline_lines(pd.read_csv(summary.with_name("repeats.csv")), exp.experiment.headline,
                           exp.experiment.rounds, cores)
    return SweepResult(summary, lines, draw(list(exp.plots), summary, exp.figures_dir), failed)
