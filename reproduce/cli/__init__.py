"""The `dlrmbench` command line, one module per command group: run and train (run.py), sweep, plot and report
(experiments.py: also summarize), reproduce, model, figures and bench (pipeline.py), data prepare / synth / reorder /
stats (data.py), predict and evaluate (kept.py), plan (plan.py), calibrate (calibrate.py), check-system (check_system.py), redundancy, tt-params and
env (studies.py). Commands parse and print; the work is in reproduce.harness, reproduce.analysis and
reproduce.pipeline."""
from __future__ import annotations

import click

from reproduce.cli import calibrate, check_system, data, experiments, kept, pipeline, plan, run, studies


class _Group(click.Group):
    """The top group: a full device or a symbolic link where we would write ends any command with its one line
    (impls/data/safe_write.py), never a traceback."""

    def invoke(self, ctx: click.Context):
        from impls.data.safe_write import DiskFull, SymlinkRefused

        try:
            return super().invoke(ctx)
        except (DiskFull, SymlinkRefused) as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """dlrmbench: TT-Rec, EL-Rec, EcoRec and EMBark side by side on one op core and one harness."""


for command in (run.run, run.train, experiments.sweep, experiments.summarize, experiments.plot, experiments.report,
                pipeline.reproduce, pipeline.model, pipeline.figures, pipeline.bench, data.data, plan.plan,
                calibrate.calibrate, check_system.check_system, studies.redundancy, studies.tt_params, studies.env,
                kept.predict, kept.evaluate):
    cli.add_command(command)


def main() -> None:
    cli(prog_name="dlrmbench")
