"""`dlrmbench reproduce` (experiments end to end: each one's sweep, then the models its TOML names), `dlrmbench model`
(a model run, or its figures redrawn), `dlrmbench figures` (every figure and the report from the committed records, no
runs) and `dlrmbench bench` (the benchmarks' result set). Each Makefile target is one of these commands (or another
`dlrmbench` command); nothing is a Makefile-only step."""
from __future__ import annotations

from pathlib import Path

import click

from reproduce.cli.options import impl_slot_option
from reproduce.cli.output import console


def _models():
    from reproduce.analysis.models import MODELS

    return MODELS


class _ModelName(click.ParamType):
    """A name of analysis/models.py's MODELS (read when a command line is parsed, not when it is built)."""

    name = "model"

    def convert(self, value, param, ctx):
        if value not in _models():
            self.fail(f"{value!r} is not a model; the models: {', '.join(_models())}", param, ctx)
        return value

    def get_metavar(self, param, ctx=None):
        return "MODEL"


@click.command("model")
@click.argument("name", type=_ModelName())
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="results/ and figures/ are under it")
@click.option("--machine", default=None,
              help="whose records it is fitted on (default: this machine when it has some, else the reference set)")
@click.option("--plot-only", is_flag=True, help="redraw its figures from what it wrote (no fit, no model run)")
def model(name, root, machine, plot_only) -> None:
    """Run a model: sc24, the scale model fitted on a machine's sc24 records, validated out of sample and projected
    to 128 ranks; recsys24, EMBark's planner vs table_row_wise at 8-128 GPUs on the DGX-H100 cost model; work, the
    work model (impls/work) validated against the EcoRec artifact's published GPU results. Every number it writes is
    modeled."""
    from reproduce.harness.machine import pick_machine

    m = _models()[name]
    machine = pick_machine(root / "results" / "sc24", root / "results", machine)
    try:
        outputs = {p.name: p for p in m.redraw(root, machine)} if plot_only else m.run(root, machine)
    except (ValueError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc)) from None
    for what, path in outputs.items():
        console.print(f"{what}: {path}")


@click.command("reproduce")
@click.argument("experiments", nargs=-1)
@click.option("--profile", default=None,
              help="a [profiles.NAME] of each experiment (default: its reference profiles, those that train on its "
                   "own data; with --data, those that train on yours)")
@click.option("--launcher", type=click.Choice(["local", "slurm"]), default="local", show_default=True)
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True)
@click.option("--machine", default=None, help="the result sets' machine name (default: this machine's slug)")
@click.option("--repeats", type=click.IntRange(min=1), default=None, help="runs per point (default: the profile's)")
@click.option("--data", type=click.Path(exists=True, file_okay=False), default=None,
              help="a prepared dataset of yours for an experiment that trains on one (its profiles for it)")
@impl_slot_option
@click.pass_context
def reproduce(ctx, experiments, profile, launcher, root, machine, repeats, data, outside) -> None:
    """Each experiment (default: sc24 and recsys24; a name with '-' for '_' too) end to end: its sweep of each
    profile (`dlrmbench sweep`; a missing calibration profile of this machine is written first, locally), then the
    models its TOML names (`models`, here and locally only: a Slurm sweep's records come back later)."""
    from reproduce.cli.experiments import sweep
    from reproduce.harness.experiment import experiment, experiment_name, profiles_to_reproduce

    try:
        names = [experiment_name(n) for n in experiments or DEFAULT_EXPERIMENTS]
        runs = [(name, p) for name in names for p in ([profile] if profile else profiles_to_reproduce(
            name, with_data=data is not None))]
        exps = [experiment(name, p) for name, p in runs]
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    for exp in exps:
        ctx.invoke(sweep, experiment=exp.path, profile=exp.profile, launcher=launcher, root=root, machine=machine,
                   repeats=repeats, data=data, outside=outside, calibrate_missing=launcher == "local")
        if launcher == "local" and exp.profile != "paper":
            for m in exp.models:
                ctx.invoke(model, name=m, root=root, machine=machine, plot_only=False)


# what `dlrmbench reproduce` (and `make reproduce`) runs without names: the two papers' experiments
DEFAULT_EXPERIMENTS = ("sc24", "recsys24")


@click.command("figures")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True)
@click.option("--machine", default=None, help="whose result sets (default: this machine's, else the reference set)")
def figures(root, machine) -> None:
    """Every experiment's figures (each reference profile with a result set), every model's figures redrawn and the
    report, from the committed records alone: no runs, nothing written outside figures/ but the report."""
    from reproduce.cli.experiments import plot, report
    from reproduce.harness.experiment import experiment, experiment_names

    ctx = click.get_current_context()
    for name in experiment_names():
        for profile in experiment(name).reference:
            exp = experiment(name, profile)
            if any(exp.results_dir(root).glob("*/*.json")):
                ctx.invoke(plot, experiment=exp.path, profile=profile, machine=machine, root=root)
    for name in _models():
        ctx.invoke(model, name=name, root=root, machine=machine, plot_only=True)
    ctx.invoke(report, machines=(machine,) if machine else (), readme=True, check=False)


@click.command("bench")
@click.option("--machine", default=None, help="the result set's name (default: this machine's slug)")
@click.pass_context
def bench(ctx, machine) -> None:
    """The benchmarks' result set, in order: the lookup-redundancy study (`dlrmbench redundancy`), this machine's
    calibration profile when it has none (`dlrmbench calibrate --if-missing`: EMBark's planner benchmark plans on it),
    then the benchmarks into results/bench/<machine>/benchmarks.json (`make bench`)."""
    from reproduce.cli.calibrate import calibrate
    from reproduce.cli.studies import redundancy
    from reproduce.harness.machine import this_machine
    from reproduce.pipeline.bench import benchmarks_json, run_benchmarks

    try:
        machine = this_machine(machine)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    ctx.invoke(redundancy)
    ctx.invoke(calibrate, machine=machine, if_missing=True)
    out = benchmarks_json(machine)
    code = run_benchmarks(out)
    if code:
        raise click.ClickException(f"the benchmarks failed (pytest exit status {code}); {out} is as they left it")
    console.print(f"benchmarks: {out}")
