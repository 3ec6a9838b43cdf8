"""`dlrmbench sweep` (an experiment grid, locally or as an sbatch script), `dlrmbench plot` (its figures) and
`dlrmbench report` (REPORT.md, claims.csv and README's generated blocks from the records)."""
from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape

from reproduce.cli.options import impl_slot_option, resolve_systems, stack, writable_folder
from reproduce.cli.output import console


def _point_line(point, outcome) -> str:
    head = f"{point.impl}{' (' + point.label + ')' if point.label else ''} {point.data} b={point.batch_size}" + (
        f" x{point.world_size}" if point.world_size > 1 else "")
    if outcome.kind == "earlier":
        return f"{head}: recorded earlier, skipped (resume)"
    if outcome.kind in ("locked", "elsewhere"):
        return f"{head}: [yellow]{escape(outcome.note)}[/]"
    record = outcome.record
    if outcome.note:  # a finished record this run replaced (--force)
        head += f" ({escape(outcome.note)})"
    if record.ok:
        return f"{head}: ok, {record.total_ms:.1f} ms/iter, {record.body.samples_per_s:,.0f} samples/s"
    if record.status.value == "skipped":
        return f"{head}: [yellow]{escape(str(record.reason))}[/]"
    return f"{head}: [red]{record.status.value}[/]: {escape(str(record.reason))} (log: {record.log})"


def _duration(s: float | None) -> str:
    if s is None:
        return "?"
    s = int(s)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


@click.command()
@click.argument("experiment", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--profile", default=None, help="a [profiles.NAME] of the experiment (default cpu)")
@click.option("--dry-run", is_flag=True, help="list the points (done / todo) and exit")
@click.option("--force", is_flag=True, help="rerun points that already have a record")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="seconds per point (default: the experiment's point_timeout_s, else none; slurm: 3600)")
@click.option("--launcher", type=click.Choice(["local", "slurm"]), default="local", show_default=True,
              help="local: run the points here now; slurm: write an sbatch script that runs them with srun + torchrun")
@click.option("--sbatch", "sbatch_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="where --launcher slurm writes its script (default results/NAME/sweep.sbatch)")
@click.option("--partition", default=None, help="slurm partition")
@click.option("--account", default=None, help="slurm account")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="results/ and figures/ are written under it")
@click.option("--machine", default=None,
              help="name of this machine's result set, results/EXP/MACHINE (default: its slug, e.g. amd-epyc-2c; "
                   "required with --launcher slurm)")
@click.option("--repeats", type=click.IntRange(min=1), default=None,
              help="runs per point, interleaved across points (default: the profile's, else 3)")
@click.option("--data", "data", type=click.Path(exists=True, file_okay=False), default=None,
              help="the dataset folder of an experiment that trains on yours (accuracy.toml --profile real)")
@click.option("--rounds-budget", "rounds_budget", type=click.FloatRange(min=0), default=None,
              help="seconds of rounds until resolved this sweep may spend (default: the profile's [rounds] budget_s; "
                   "0: none), e.g. to top up a set whose first sweep spent part of it")
@click.option("--no-probe", "no_probe", is_flag=True,
              help="skip the noise probes (an SGEMM and fixed work on each core, before, between rounds and "
                   "after): a quicker smoke run whose set then states no noise level (local launcher)")
@click.option("--calibrate-if-missing", "calibrate_missing", is_flag=True,
              help="when a point plans on this machine's calibration profile and it has none, write it first "
                   "(`dlrmbench calibrate`, a few minutes; local launcher)")
@impl_slot_option
@click.pass_context
def sweep(ctx, experiment, profile, dry_run, force, timeout, launcher, sbatch_path, partition, account, root, machine,
          repeats, data, no_probe, rounds_budget=None, outside=(), calibrate_missing=False) -> None:
    """Run every point of an experiment TOML `repeats` times, interleaved (repeat 1 of every point, then repeat 2,
    ...), into this machine's result set (resumable: recorded runs are skipped; a crashed, killed or timed-out
    run is recorded and the sweep goes on), then write summary.csv and its figures."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from reproduce.harness.calibration import missing_profiles
    from reproduce.harness.sweep import expected_s, plan, tidy_set, todo, unreadable

    if launcher == "slurm" and no_probe:
        raise click.UsageError("--no-probe is for the local launcher: a slurm sweep runs no noise probes")
    if launcher == "slurm" and not machine:
        raise click.UsageError("--launcher slurm needs --machine NAME (the cluster's result set, e.g. 8x-h100-sxm): "
                               "this node is not the machine the points run on")
    from reproduce.harness.experiment import parse
    from reproduce.harness.resolve import resolve

    try:
        from reproduce.harness.experiment import default_slot

        spec = parse(experiment, profile, impls=resolve_systems(outside or default_slot(experiment)))
        if data is None and not dry_run:  # the experiment's own dataset ([synth]), written once, reused after
            _write_synth(spec, root)
        if rounds_budget is not None:
            import dataclasses

            spec = dataclasses.replace(spec, rounds=dataclasses.replace(spec.rounds, budget_s=rounds_budget))
        exp = resolve(spec, root=root, machine=machine, repeats=repeats, data=data)
        runs = plan(exp, force)  # reads the set's records: a record of another dataset of this name is refused here
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    timeout = timeout or exp.point_timeout_s
    if calibrate_missing and launcher == "local" and not dry_run:
        from reproduce.cli.calibrate import calibrate
        from reproduce.harness.calibration import missing_profile_paths

        for path in missing_profile_paths(exp.points):
            if path.parent.name == exp.machine:
                console.print(f"no calibration profile of this machine at {path}: writing it first "
                              "(`dlrmbench calibrate`, a few minutes)")
                ctx.invoke(calibrate, machine=exp.machine, root=root, backend=path.stem, if_missing=True)
    missing = missing_profiles(exp.points)
    if missing and not dry_run:
        raise click.UsageError("no calibration profile at " + "; ".join(missing))
    for problem in unreadable(exp):
        console.print(f"[yellow]{escape(problem)}[/] (its point counts as not done)")
    for aside in exp.infeasible:  # a system that cannot fit a budget is not run over it
        console.print(f"set aside: {escape(aside.name)} at budget {aside.budget:g}: {escape(aside.reason)}")
    if dry_run:  # writes nothing
        for p, r, to_run in runs:
            console.print(f"{'todo' if to_run else 'done'}  {p.point_id}.r{r}  {p.label}")
        console.print(f"{len(exp.points)} points x {exp.repeats} repeats ({exp.profile} profile) on machine "
                      f"{exp.machine} ({exp.out_dir}), {sum(t for *_, t in runs)} runs to do")
        return
    for folder in (exp.out_dir, exp.figures_dir):
        writable_folder(folder, "--root: the result folder")
    if launcher == "slurm":
        from reproduce.harness.slurm import write_sbatch

        from reproduce.analysis.aggregate import write_infeasible

        path = sbatch_path or exp.out_dir / "sweep.sbatch"
        write_infeasible(exp)
        try:
            tidy_set(exp)  # stale locks cleared: what its script then runs
            write_sbatch(exp, experiment, todo(exp, force), timeout or 3600.0, path, partition=partition,
                         account=account, root=root)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        console.print(f"sbatch script: {path}  (submit with `sbatch {path}`; resubmit to resume)")
        return

    from reproduce.harness.machine import reference_machine
    from reproduce.harness.record_store import DiskFull
    from reproduce.pipeline.sweep import SetUnreadable, adaptive, run_sweep

    console.print(_plan_line(exp, [(p, r) for p, r, t in runs if t], adaptive(exp), expected_s, reference_machine(
        Path(root) / "results")))
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("eta {task.fields[eta]}"), console=console, transient=True)
    with bar:
        task = bar.add_task(exp.name, total=len(exp.tasks()), eta="?")

        def start(point, repeat, progress):
            bar.update(task, completed=progress.finished, eta=_duration(progress.eta_s()),
                       description=f"{exp.name}: {point.impl} x{point.world_size} r{repeat}")

        def done(i, n, point, repeat, outcome):
            bar.console.print(f"[{i + 1}/{n}] r{repeat} " + _point_line(point, outcome))
            bar.advance(task)

        try:
            result = run_sweep(exp, force=force, timeout_s=timeout, probe=not no_probe, on_start=start, on_point=done)
        except (DiskFull, SetUnreadable) as exc:
            raise click.ClickException(str(exc)) from None
    if result.headline:
        console.print(escape("headline ratios and the A/A control (paired by round):\n" + "\n".join(result.headline)))
    console.print(f"summary: {result.summary}")
    for path in result.figures:
        console.print(f"figure: {path}")
    if result.failed:  # the records say why; the sweep's exit status says that something did not run through
        console.print(f"[red]{len(result.failed)} of the runs of this sweep did not finish[/]: "
                      + ", ".join(result.failed[:10]) + (" ..." if len(result.failed) > 10 else ""))
        sys.exit(1)


def _plan_line(exp, runs, adaptive: bool, expected_s, reference: str | None) -> str:
    """What a sweep is about to do, and how long the reference machine took for it."""
    policy = exp.experiment.rounds
    line = (f"{exp.name}: {len(exp.points)} points x {exp.repeats} rounds ({exp.profile} profile, "
            f"{policy.schedule}) on machine {exp.machine} -> {exp.out_dir}: {len(runs)} runs to do")
    if adaptive:
        line += (f", then rounds of the headline points until each ratio's interval is within "
                 f"{policy.target:.0%} ({policy.target_full:.0%} when its points fill the cores), at most "
                 f"{_duration(policy.budget_s)}")
    ref = None if reference is None else exp.out_dir.parent / reference
    est = expected_s(exp, runs, ref) if runs else None
    if est is not None:
        eta = est[0] + (policy.budget_s if adaptive else 0)
        line += (f"; expected about {_duration(eta)} (the reference machine {reference}'s wall times of "
                 f"{est[1]} of these runs" + (", plus the rounds' budget" if adaptive else "") + ")")
    from reproduce.analysis.durations import run_split

    split = run_split(ref) if ref is not None else None
    if split:
        line += f"; a run there: {split}"
    return line


def _write_synth(exp, root: Path) -> None:
    """Write the ``[synth]`` dataset of an experiment whose points read ``$DATA`` (no --data), unless written."""
    from tqdm import tqdm

    from impls.data.layout import is_dataset
    from reproduce.harness.synth_data import synth_folder, write_synth

    spec = exp.synth
    if spec is None or is_dataset(synth_folder(spec, root)):
        return
    total = int(spec["samples"]) + (int(spec["samples"]) // 8 if spec.get("val_samples") is None
                                    else int(spec["val_samples"]))
    with tqdm(total=total, unit="sample", unit_scale=True, desc=f"writing {spec['name']}") as bar:
        out = write_synth(spec, root, progress=bar.update)
    console.print(f"dataset: {out} ({spec['preset']}, teacher {spec.get('teacher', 'scalar')})")


recorded_set_options = stack(
    click.argument("experiment", type=click.Path(exists=True, dir_okay=False, path_type=Path)),
    click.option("--profile", default=None, help="a [profiles.NAME] of the experiment (default cpu)"),
    click.option("--machine", default=None,
                 help="whose result set (default: this machine when it has records, else the reference set)"),
    click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
                 help="where results/ and figures/ are"),
)


def _recorded_set(experiment: Path, profile: str | None, machine: str | None, root: Path):
    """(the parsed experiment, the machine, its result folder) of a set that has records; UsageError otherwise."""
    from reproduce.harness.experiment import parse
    from reproduce.harness.machine import pick_machine

    try:
        exp = parse(experiment, profile)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    machine = pick_machine(exp.results_dir(root), root / "results", machine)
    out = exp.out_dir(root, machine)
    if not any(out.glob("*.json")):
        raise click.UsageError(f"{out} has no records: run `dlrmbench sweep {experiment}` first")
    return exp, machine, out


@click.command()
@recorded_set_options
def plot(experiment, profile, machine, root) -> None:
    """Redraw an experiment's figures from one machine's records (no runs). It reads the records of the result set
    by their stored point ids: no grid is expanded, no dataset read or written, no record renamed, nothing written
    outside figures/ (`dlrmbench summarize` rewrites the set's summary.csv and repeats.csv)."""
    from reproduce.analysis.aggregate import set_summaries
    from reproduce.analysis.plots import draw

    exp, machine, out = _recorded_set(experiment, profile, machine, root)
    try:
        summary, runs = set_summaries(out, exp.impls)
    except ValueError as exc:  # a record that cannot be read: named, with what to do
        raise click.UsageError(str(exc)) from None
    for path in draw(list(exp.plots), summary, exp.figures_dir(root, machine), runs):
        console.print(f"figure: {path}")


@click.command()
@recorded_set_options
def summarize(experiment, profile, machine, root) -> None:
    """Rewrite a result set's summary.csv and repeats.csv from its records (a sweep writes them as it ends; a Slurm
    sweep's last step runs this, then `plot`)."""
    from reproduce.analysis.aggregate import summarize_set

    exp, _, out = _recorded_set(experiment, profile, machine, root)
    try:
        console.print(f"summary: {summarize_set(out, exp.impls)}")
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


@click.command()
@click.option("--machine", "machines", multiple=True,
              help="whose result sets (repeat to put machines side by side; default: this machine when it has "
                   "records, else the reference set)")
@click.option("--readme/--no-readme", default=True, show_default=True,
              help="also rewrite README.md's generated blocks (only from the reference set)")
@click.option("--check", is_flag=True,
              help="write nothing; exit 1 when a committed reference set is STALE (the code it measured changed "
                   "since) or missing - a release check")
def report(machines, readme, check) -> None:
    """Write results/REPORT.md (the result sets with their commits and STALE marks; every claim of
    reproduce/analysis/claims.toml: measured value with its interval and verdict; modeled values apart) and
    results/claims.csv, and README.md's generated blocks."""
    from reproduce.analysis.report import build_report, check_reference

    if check:
        try:
            bad = check_reference()
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        for st in bad:
            console.print(f"[red]{st.name}[/] ({st.machine}, {st.commit_label()}): {escape(st.state())}")
        if bad:
            console.print(f"{len(bad)} reference set(s) do not describe this code: rerun them (`make reproduce-NAME`, README: Quick start)")
            sys.exit(1)
        console.print("every reference set describes this code")
        return
    try:
        for path in build_report(machines=list(machines), readme=readme):
            console.print(f"report: {path}")
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
