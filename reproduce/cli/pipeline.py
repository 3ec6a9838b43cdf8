"""`dlrmbench reproduce` (experiments end to end: each one's sweep, then the models its TOML names), `dlrmbench model`
(a model run, or its figures redrawn) and `dlrmbench figures` (every figure and the report from the committed
records, no runs). The Makefile's targets call these; nothing is a Makefile-only step."""
from __future__ import annotations

from pathlib import Path

import click

from reproduce.cli.options import impl_slot_option
from reproduce.cli.output import console


def _models():
    from reproduce.analysis.models import MODELS

    return MODELS


@click.command("model")
@click.argument("name", type=click.Choice(["sc24", "recsys24"]))
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="results/ and figures/ are under it")
@click.option("--machine", default=None,
              help="whose records it is fitted on (default: this machine when it has some, else the reference set)")
@click.option("--plot-only", is_flag=True, help="redraw its figures from what it wrote (no fit, no model run)")
def model(name, root, machine, plot_only) -> None:
    """Run a model: sc24, the scale model fitted on a machine's sc24 records, validated out of sample and projected
    to 128 ranks; recsys24, EMBark's planner vs table_row_wise at 8-128 GPUs on the DGX-H100 cost model. Every
    number it writes is modeled."""
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
@click.option("--profile", default=None, help="a [profiles.NAME] of each experiment (default cpu)")
@click.option("--launcher", type=click.Choice(["local", "slurm"]), default="local", show_default=True)
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True)
@click.option("--machine", default=None, help="the result sets' machine name (default: this machine's slug)")
@click.option("--repeats", type=click.IntRange(min=1), default=None, help="runs per point (default: the profile's)")
@click.option("--data", type=click.Path(exists=True, file_okay=False), default=None,
              help="a prepared dataset of yours for an experiment that trains on one (its `real` profile)")
@impl_slot_option
@click.pass_context
def reproduce(ctx, experiments, profile, launcher, root, machine, repeats, data, outside) -> None:
    """Each experiment (default: sc24 and recsys24) end to end: its sweep (`dlrmbench sweep`), then the models its
    TOML names (`models`, here and locally only: a Slurm sweep's records come back later)."""
    from reproduce.cli.experiments import sweep
    from reproduce.harness.experiment import experiment, experiment_names

    names = list(experiments) or ["sc24", "recsys24"]
    unknown = sorted(set(names) - set(experiment_names()))
    if unknown:
        raise click.UsageError(f"no experiment {unknown}; the experiments: {', '.join(experiment_names())}")
    for name in names:
        try:
            exp = experiment(name, profile)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        ctx.invoke(sweep, experiment=exp.path, profile=profile, launcher=launcher, root=root, machine=machine,
                   repeats=repeats, data=data, outside=outside)
        if launcher == "local" and exp.profile != "paper":
            for m in exp.models:
                ctx.invoke(model, name=m, root=root, machine=machine, plot_only=False)


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
