"""`dlrmbench run` (a benchmark of implementations on the same data) and `dlrmbench train` (training on a prepared
dataset with held-out evaluation): one run point per implementation, each in a fresh process, and the table that
compares their records."""
from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape

from reproduce.analysis.run_output import budget_lines, comparison_table, quality_lines, tt_lines
from reproduce.cli.options import (IMPL_HELP, collect_data_options, data_options, dist_options, mlp_options,
                                   model_options, parse_impl_options, point_default, positive, reorder_option,
                                   resolve_systems, timing_options, writable_folder)
from reproduce.cli.output import console


@click.command()
@click.option("--impl", "impls", multiple=True, required=True, metavar="NAME|SPEC",
              help="implementation (repeat to compare): " + IMPL_HELP)
@data_options
@model_options
@mlp_options(point_default("mlp_optimizer"), point_default("mlp_lr"))
@timing_options
@dist_options
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="record folder (default ./results/runs/<this machine>, under the current folder)")
@click.option("--timeout", type=float, default=None, callback=positive, help="seconds per implementation")
@click.option("--repeats", type=click.IntRange(min=1), default=1, show_default=True,
              help="independent runs of each implementation, interleaved (A B, then B A); > 1 gives intervals")
@click.option("-o", "--option", "options", multiple=True, metavar="[IMPL.]KEY=VALUE",
              help="implementation option, e.g. ranks=16 (every impl that takes it) or ecorec.micro_batches=4 (one impl); "
                   "VALUE is read as JSON when it parses (numbers, lists, true), else as a string")
def run(impls, out, timeout, repeats, no_check_bounds, options, **kw) -> None:
    """Run each implementation on the same data, each in its own fresh process, and compare them (with
    --repeats N, N rounds of every implementation in turn: medians, ratios within each round, and the
    exact signed-rank interval of their Hodges-Lehmann estimate over rounds)."""
    if kw.pop("eval_flag") and not kw["eval_batches"]:
        kw["eval_batches"] = 8
    _compare(impls, out, timeout, repeats, options, dict(check_bounds=not no_check_bounds, **kw))


def kept_folders(impls, save: Path | None, resume: Path | None, world_size: int,
                 accept_code: bool = False) -> dict[str, list[str]]:
    """Each system's worker arguments that keep its model (--save DIR: DIR itself for one system, DIR/<system> for
    several) or go on from one (--resume DIR: one system, an outside one's code checked against the kept copy)."""
    if not (save or resume):
        return {}
    if world_size > 1:
        raise click.UsageError("--save / --resume keep a model trained in one process: a model sharded over "
                               "ranks is not kept yet (leave out -n / --world-size)")
    if resume is not None and len(impls) != 1:
        raise click.UsageError(f"--resume {resume} goes on with the one system kept there: name one --impl")
    if save is not None:
        writable_folder(save.parent, f"--save {save}: its folder")
    from reproduce.harness.kept_model import check_replaceable, read_info, system_spec

    if resume is not None:
        from reproduce.harness.systems import source

        try:
            info = read_info(resume)
            src = source(impls[0])
            if info.get("code") and src is None:
                raise ValueError(f"--resume {resume}: it was trained with the outside system {info['system']!r}; "
                                 f"name its code with --impl")
            if info.get("code") and info["system"] == impls[0]:
                system_spec(resume, info, src.spec, accept_code)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None

    out = {}
    for impl in impls:
        args = []
        if save is not None:
            where = save if len(impls) == 1 else save / "".join(c if c.isalnum() or c in "-_." else "_" for c in impl)
            try:
                check_replaceable(where)  # before any run: nothing of the user's is replaced
            except ValueError as exc:
                raise click.UsageError(str(exc)) from None
            args += ["--save", str(where.resolve())]
        if resume is not None:
            args += ["--resume", str(resume.resolve())]
        out[impl] = args
    return out


def default_out(machine: str) -> Path:
    """Where `run` and `train` write records without --out: results/runs/<machine> under the current folder."""
    return Path.cwd() / "results" / "runs" / machine


def _compare(impls, out, timeout, repeats, options, fields, save: Path | None = None,
             resume: Path | None = None, accept_code: bool = False) -> None:
    """Check, run and tabulate one point per implementation (``fields``: the RunPoint fields they share); a training
    run's model kept in ``save`` / gone on with from ``resume`` (kept_folders)."""
    from reproduce.analysis.aggregate import summarize
    from reproduce.harness.resolve import interleaved
    from reproduce.harness.options import check_point, check_scoped_options, check_shared_options, options_for
    from reproduce.harness.point import RunPoint
    from reproduce.harness.launch import RecordedElsewhere
    from reproduce.harness.record_store import (DiskFull, RunLocked, SymlinkRefused, check_writable, finished_record,
                                                record_path)
    from reproduce.harness.sweep import run_point_isolated
    from reproduce.cli.epoch_bars import EpochBars

    impls = resolve_systems(impls)
    from reproduce.harness.calibration import missing_profiles, with_profile
    from reproduce.harness.machine import this_machine

    if out is None:
        out = default_out(this_machine())
    if len(set(impls)) != len(impls):
        raise click.BadParameter(f"an implementation is named twice: {list(impls)}", param_hint="--impl")
    data_opts = collect_data_options(fields)
    try:
        impl_opts = parse_impl_options(options)
        check_scoped_options(impl_opts, impls, "-o")
        points = [
            check_point(RunPoint(impl=i, data_options=data_opts,
                                 impl_options=options_for(i, impl_opts, fields["world_size"]), **fields))
            for i in impls
        ]  # the data name and options are checked before anything is launched
        check_shared_options(impl_opts, points, "-o")
        points = [with_profile(p, ".", this_machine()) for p in points]
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    keep = kept_folders(impls, save, resume, fields.get("world_size", 1), accept_code)
    missing = missing_profiles(points)
    if missing:
        raise click.UsageError("no calibration profile at " + "; ".join(missing))
    writable_folder(out, "--out")  # checked (and made) once everything else is: a refused run writes nothing
    try:
        for p, r in interleaved(points, repeats):
            check_writable(record_path(out, p, r))  # a link where a record or log would go: refused before any run
    except SymlinkRefused as exc:
        raise click.ClickException(str(exc)) from None
    from reproduce.harness.noise import busy_machine, probe

    quiet_probe = dict(size=768, runs=7, threads=fields.get("threads"), warmup_s=0.2)  # ~0.4 s: is the machine quiet?
    before = probe(**quiet_probe)
    records, elsewhere = [], []
    for p, r in interleaved(points, repeats):
        where = f", {p.world_size} ranks" if p.world_size > 1 else ""
        again = f" (repeat {r + 1} of {repeats})" if repeats > 1 else ""
        what = f"training {p.epochs} epoch(s)" if p.epochs else "on"
        console.print(f"[bold]{p.impl}[/] {what} {p.data}, batch {p.batch_size}{where}{again} …")
        bars = EpochBars(p.impl) if p.epochs else None  # a training run shows a bar per epoch
        earlier = finished_record(record_path(out, p, r))
        try:
            rec = run_point_isolated(p, out, timeout, repeat=r, on_progress=bars,  # a launcher error: its failure
                                     keep=keep.get(p.impl, ()))
        except (RunLocked, DiskFull) as exc:
            raise click.ClickException(str(exc)) from None
        except RecordedElsewhere as exc:  # this node ran its ranks; rank 0's node wrote the record
            console.print(f"  ran this node's ranks; {escape(str(exc))}")
            elsewhere.append(p)
            continue
        finally:
            if bars:
                bars.close()
        records.append(rec)
        if earlier and earlier.replaced:
            console.print(f"  replaced the earlier {earlier.what} of this point: {earlier.path}")
        if not rec.ok:
            console.print(f"  [red]{rec.status.value}[/]: {escape(str(rec.reason))} (log: {rec.log})")
        elif (rec.body.train or {}).get("saved"):
            saved = rec.body.train["saved"]
            console.print(f"  kept the model in {escape(saved)}: dlrmbench predict --model {escape(saved)} --raw FILE "
                          f"--out SCORES, or evaluate --model {escape(saved)} --data DIR")
    if not records:
        console.print(f"no record on this node: {len(elsewhere)} run(s) recorded by the node of global rank 0 "
                      f"(its --out folder); this node's logs: {out}/logs/")
        return
    busy = busy_machine(before, probe(**quiet_probe))
    df = summarize(records, baseline=impls[0])
    console.print(comparison_table(df, "train" if fields.get("epochs") else "run"))
    for line in [*tt_lines(records), *budget_lines(records), *quality_lines(records)]:
        console.print(line)
    if busy:
        console.print(f"[yellow]warning:[/] the machine was busy: {escape(busy)}. The step times and ratios above may "
                      "measure the machine, not the systems: rerun on a quiet machine, with --threads below the idle "
                      "cores, or with --repeats N (interleaved rounds, ratios paired within each)")
    console.print(f"records: {out}/  (peak RSS Δ = measured process peak over a pre-build baseline)")
    if any(not r.ok for r in records):
        sys.exit(1)


# the defaults of a training run: Adagrad for the tables, Adam for the MLPs, as MLPerf DLRMv2 and TorchRec's DLRM
# examples train; chosen on the runs of accuracy.toml's profile train-defaults (records: results/train_defaults/)
TRAIN_DEFAULTS = {"optimizer": "adagrad", "lr": 0.05, "mlp_optimizer": "adam", "mlp_lr": 1e-3, "batch_size": 1024}


@click.command()
@click.option("--impl", "impls", multiple=True, required=True, metavar="NAME|SPEC",
              help="implementation (repeat to compare): " + IMPL_HELP)
@click.option("--data", required=True, type=click.Path(exists=True, file_okay=False),
              help="a prepared dataset folder (data prepare / data synth): its train split, scored on val (else test)")
@click.option("--epochs", type=click.IntRange(min=1), default=1, show_default=True, help="passes over the training split")
@click.option("--eval-every", type=click.IntRange(min=0), default=0, show_default=True,
              help="score the whole held-out split every N steps (0: after every epoch); always at the end")
@click.option("--early-stop", type=click.IntRange(min=0), default=0, show_default=True,
              help="stop after N evaluations without a lower held-out log loss, and put back the weights of the "
                   "best one (0: never)")
@click.option("--no-shuffle", is_flag=True, help="read the training split in file order (default: shuffled per epoch)")
@click.option("--optimizer", type=click.Choice(["sgd", "adagrad"]), default=TRAIN_DEFAULTS["optimizer"],
              show_default=True, help="embedding tables' optimizer")
@click.option("--lr", type=float, default=TRAIN_DEFAULTS["lr"], show_default=True, callback=positive,
              help="embedding tables' learning rate")
@mlp_options(TRAIN_DEFAULTS["mlp_optimizer"], TRAIN_DEFAULTS["mlp_lr"])
@click.option("--dim", type=int, default=None, callback=positive, help="embedding dim (default: the dataset's, else 16)")
@click.option("--batch-size", "-b", type=int, default=TRAIN_DEFAULTS["batch_size"], show_default=True,
              callback=positive, help="per rank")
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True, help="steps left out of the timing")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--threads", type=int, default=None, callback=positive, help="torch threads (default: torch's)")
@click.option("--device", default="cpu", show_default=True)
@click.option("--no-check-bounds", is_flag=True, help="skip index validation")
@reorder_option
@dist_options
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="record folder (default ./results/runs/<this machine>, under the current folder)")
@click.option("--timeout", type=float, default=None, callback=positive, help="seconds per implementation")
@click.option("-o", "--option", "options", multiple=True, metavar="[IMPL.]KEY=VALUE",
              help="implementation option, e.g. tt_min_rows=1000 (every impl that takes it) or ecorec.ranks=16")
@click.option("--save", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="keep the trained model in this folder (several systems: a folder each inside), for predict, "
                   "evaluate and --resume")
@click.option("--resume", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="go on from the model kept in this folder: the same command with more --epochs trains as the run "
                   "that never stopped")
@click.option("--accept-other-code", "accept_code", is_flag=True,
              help="--resume an outside system's model with code that differs from the code that trained it")
def train(impls, data, epochs, eval_every, early_stop, no_shuffle, no_check_bounds, out, timeout, options, save,
          resume, accept_code, **kw) -> None:
    """Train the DLRM on DATA's training split with each implementation (one fresh process each) and report
    held-out AUC and log loss beside step time. The records keep the eval curve (AUC, log loss, train loss per
    evaluation); a NaN / inf loss stops a run as `diverged`, keeping its timings and curve."""
    fields = dict(kw, data=str(Path(data).resolve()), epochs=epochs, eval_every=eval_every, early_stop=early_stop, shuffle=not no_shuffle,
                  check_bounds=not no_check_bounds, mode="dlrm", iters=1, num_batches=1)
    _compare(impls, out, timeout, 1, options, fields, save, resume, accept_code)
