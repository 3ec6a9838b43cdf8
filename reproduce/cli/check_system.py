"""`dlrmbench check-system NAME`: the conformance suite (reproduce/conformance) on one system, ours or one from outside
(a spec), as a table of checks with pass / fail / n/a and why; exit status 1 when any check fails."""
from __future__ import annotations

import sys

import click
from rich.markup import escape
from rich.table import Table

from reproduce.cli.options import IMPL_HELP, parse_impl_options, resolve_systems
from reproduce.cli.output import console

STYLE = {"pass": "green", "fail": "bold red", "n/a": "yellow"}


CHECK_SYSTEM_HELP = (
    "Hold SYSTEM to the interface: its forward against its own tables in float64, gradients against float64 "
    "autograd and two SGD and Adagrad steps against torch.optim (all tables at once: tables may share tensors), bad "
    "ids refused by name, empty bags and duplicates, bit-identical reruns, its memory report (each distinct tensor "
    "once), and 2 gloo ranks against one process. SYSTEM: " + IMPL_HELP)


@click.command("check-system", help=CHECK_SYSTEM_HELP)  # a docstring cannot be built with +: click reads help here
@click.argument("system", metavar="NAME|SPEC")
@click.option("-o", "--option", "options", multiple=True, metavar="KEY=VALUE",
              help="an option the system runs under (default: the options that exercise its own structure on the "
                   "suite's small tables: its class's check_options, cases.py)")
@click.option("--check", "only", multiple=True, help="run only this check (repeat for several)")
@click.option("--sharding", type=click.Choice(["table-wise", "data-parallel"]), default=None,
              help="how the ranks check shards the system over its 2 ranks (default: its class's dist_defaults; a "
                   "system that shards itself ignores it)")
def check_system(system, options, only, sharding) -> None:
    """The check-system command (CHECK_SYSTEM_HELP)."""
    from impls.api import get_impl
    from reproduce.conformance.cases import structure_options
    from reproduce.conformance.checks import CHECKS, FAIL, Subject, run_checks
    from reproduce.harness.options import check_impl_options
    from reproduce.harness.systems import source

    bad = sorted(set(only) - set(CHECKS))
    if bad:
        raise click.BadParameter(f"no check {bad}; the checks: {', '.join(CHECKS)}", param_hint="--check")
    name, = resolve_systems([system], "SYSTEM")
    cls = get_impl(name)
    try:
        parsed = parse_impl_options(options)
        given = {**{k: v for k, v in parsed.items() if k != name and not isinstance(v, dict)}, **parsed.get(name, {})}
        check_impl_options(name, given, 1)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    outside = source(name)
    subject = Subject(cls, given if options else structure_options(cls), outside.spec if outside else None, sharding)
    table = Table(title=f"check-system {name} (options {subject.options or 'its defaults'})")
    for col in ("check", "result", "why"):
        table.add_column(col, overflow="fold")
    outcomes = run_checks(subject, list(only) or None)
    for o in outcomes:
        table.add_row(o.check, f"[{STYLE[o.status]}]{o.status}[/]", escape(o.why))
    console.print(table)
    failed = [o.check for o in outcomes if o.status == FAIL]
    console.print(f"{name}: " + (f"[bold red]FAILS[/] {', '.join(failed)}" if failed else "[green]conforms[/]"))
    if failed:
        sys.exit(1)
