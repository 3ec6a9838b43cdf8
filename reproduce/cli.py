"""`dlrmbench`: run (benchmark), train, sweep, plot, report, data (prepare, synth, reorder, stats), plan,
calibrate, redundancy, compression, env."""
from __future__ import annotations

import signal
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from reproduce.options import (collect_data_options, data_options, data_options_no_name, dist_options, mlp_options,
                               model_options, parse_impl_options, positive, reorder_option, timing_options)

console = Console(width=None if sys.stdout.isatty() else 160, soft_wrap=True)  # paths never wrap mid-line


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """dlrmbench: TT-Rec, EL-Rec, EcoRec and EMBark side by side on one op core and one harness."""


def _fmt(x, spec=".2f", scale=1.0) -> str:
    return "–" if x is None or x != x else format(x / scale, spec)


def _ci(r, col: str) -> str:
    lo, hi = r.get(f"{col}_lo"), r.get(f"{col}_hi")
    if r.get("repeats", 1) < 2 or lo is None or lo != lo:
        return ""
    return f" [{lo:.2f}, {hi:.2f}]"


def comparison_table(df) -> Table:
    import pandas as pd

    n = int(df["runs"].max()) if "runs" in df and len(df) else 1
    t = Table(title="dlrmbench run (medians over timed iterations" + (
        f", then over {n} interleaved repeats; [95 % bootstrap interval])" if n > 1 else "; one run each: no interval)"))
    quality = [c for c in ("epochs", "auc", "logloss") if c in df.columns]
    cols = ["impl", "status", "fwd ms", "bwd ms", "update ms", "total ms", "samples/s", "peak RSS Δ MiB",
            "analytic MiB", "param MiB", "speedup"] + [{"auc": "AUC", "logloss": "log loss"}.get(c, c) for c in quality]
    for col in cols:
        t.add_column(col, justify="left" if col in ("impl", "status") else "right")
    for _, r in df.iterrows():
        timed = pd.notna(r.get("total_ms"))  # ok runs, and diverged runs that had timed steps
        if not timed:
            t.add_row(r["impl"], escape(f"{r['status']}: {r['reason']}"), *["–"] * (len(cols) - 2))
            continue
        status = "ok" if r["status"] == "ok" else escape(f"{r['status']}: {r['reason']}")
        row = [
            r["impl"], status, _fmt(r["forward_ms"]), _fmt(r["backward_ms"]), _fmt(r["update_ms"]),
            _fmt(r["total_ms"]) + _ci(r, "total_ms"), _fmt(r["samples_per_s"], ",.0f"), _fmt(r["peak_rss_delta_bytes"], ",.0f", 2**20),
            _fmt(r["analytic_bytes"], ",.0f", 2**20), _fmt(r["param_bytes"], ",.0f", 2**20), _fmt(r["speedup"], ".2f") + "×" + _ci(r, "speedup"),
        ]
        t.add_row(*row, *(_fmt(r.get(c), ".2f" if c == "epochs" else ".4f") for c in quality))
    return t


@cli.command()
@click.option("--impl", "impls", multiple=True, required=True, help="implementation (repeat to compare)")
@data_options
@model_options
@mlp_options("sgd", 0.1)
@timing_options
@dist_options
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="record folder (default results/runs/<this machine>)")
@click.option("--timeout", type=float, default=None, callback=positive, help="seconds per implementation")
@click.option("--repeats", type=click.IntRange(min=1), default=1, show_default=True,
              help="independent runs of each implementation, interleaved (A B A B); > 1 gives intervals")
@click.option("-o", "--option", "options", multiple=True, metavar="[IMPL.]KEY=VALUE",
              help="implementation option, e.g. ranks=16 (every impl that takes it) or ecorec.micro_batches=4 (one impl); "
                   "VALUE is read as JSON when it parses (numbers, lists, true), else as a string")
def run(impls, out, timeout, repeats, no_check_bounds, options, **kw) -> None:
    """Run each implementation on the same data, each in its own fresh process, and compare them (with
    --repeats N, N rounds of every implementation in turn: medians and bootstrap 95 % intervals)."""
    if kw.pop("eval_flag") and not kw["eval_batches"]:
        kw["eval_batches"] = 8
    _compare(impls, out, timeout, repeats, options, dict(check_bounds=not no_check_bounds, **kw))


def _compare(impls, out, timeout, repeats, options, fields) -> None:
    """Check, run and tabulate one point per implementation (``fields``: the RunPoint fields they share)."""
    from impls.api import registered_names
    from reproduce.aggregate import summarize
    from reproduce.config import RunPoint, check_scoped_options, check_shared_options, options_for
    from reproduce.lifeline import RunLocked
    from reproduce.sweep import run_point_isolated

    unknown = [i for i in impls if i not in registered_names()]
    if unknown:
        raise click.BadParameter(f"unknown implementation(s) {unknown}; known: {', '.join(registered_names())}",
                                 param_hint="--impl")
    if out is None:
        from reproduce.machine import this_machine

        out = Path("results") / "runs" / this_machine()
    if len(set(impls)) != len(impls):
        raise click.BadParameter(f"an implementation is named twice: {list(impls)}", param_hint="--impl")
    data_opts = collect_data_options(fields)
    try:
        impl_opts = parse_impl_options(options)
        check_scoped_options(impl_opts, impls, "-o")
        points = [
            RunPoint(impl=i, data_options=data_opts, impl_options=options_for(i, impl_opts, fields["world_size"]),
                     **fields)
            for i in impls
        ]  # RunPoint checks the data name and options before anything is launched
        check_shared_options(impl_opts, points, "-o")
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    records = []
    for r in range(repeats):
        for p in points:
            where = f", {p.world_size} ranks" if p.world_size > 1 else ""
            again = f" (repeat {r + 1} of {repeats})" if repeats > 1 else ""
            what = f"training {p.epochs} epoch(s)" if p.epochs else "on"
            console.print(f"[bold]{p.impl}[/] {what} {p.data}, batch {p.batch_size}{where}{again} …")
            try:
                rec = run_point_isolated(p, out, timeout, repeat=r)  # a launcher error is that run's failure
            except RunLocked as exc:
                raise click.ClickException(str(exc)) from None
            records.append(rec)
            if rec["status"] != "ok":
                console.print(f"  [red]{rec['status']}[/]: {escape(str(rec['reason']))} (log: {rec.get('log')})")
    df = summarize(records, baseline=impls[0])
    console.print(comparison_table(df))
    console.print(f"records: {out}/  (peak RSS Δ = measured process peak over a pre-build baseline)")
    if any(r["status"] != "ok" for r in records):
        sys.exit(1)


# the defaults of a training run (chosen on the synthetic teacher and tabular runs of the issue-18 note: Adagrad
# for the tables, Adam for the MLPs, as MLPerf DLRMv2 and TorchRec's DLRM examples train)
TRAIN_DEFAULTS = {"optimizer": "adagrad", "lr": 0.05, "mlp_optimizer": "adam", "mlp_lr": 1e-3, "batch_size": 1024}


@cli.command()
@click.option("--impl", "impls", multiple=True, required=True, help="implementation (repeat to compare)")
@click.option("--data", required=True, type=click.Path(exists=True, file_okay=False),
              help="a prepared dataset folder (data prepare / data synth): its train split, scored on val (else test)")
@click.option("--epochs", type=click.IntRange(min=1), default=1, show_default=True, help="passes over the training split")
@click.option("--eval-every", type=click.IntRange(min=0), default=0, show_default=True,
              help="score the whole held-out split every N steps (0: after every epoch); always at the end")
@click.option("--early-stop", type=click.IntRange(min=0), default=0, show_default=True,
              help="stop after N evaluations without a lower held-out log loss (0: never)")
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
              help="record folder (default results/runs/<this machine>)")
@click.option("--timeout", type=float, default=None, callback=positive, help="seconds per implementation")
@click.option("-o", "--option", "options", multiple=True, metavar="[IMPL.]KEY=VALUE",
              help="implementation option, e.g. tt_min_rows=1000 (every impl that takes it) or ecorec.ranks=16")
def train(impls, data, epochs, eval_every, early_stop, no_shuffle, no_check_bounds, out, timeout, options,
          **kw) -> None:
    """Train the DLRM on DATA's training split with each implementation (one fresh process each) and report
    held-out AUC and log loss beside step time. The records keep the eval curve (AUC, log loss, train loss per
    evaluation); a NaN / inf loss stops a run as `diverged`, keeping its timings and curve."""
    fields = dict(kw, data=str(Path(data).resolve()), epochs=epochs, eval_every=eval_every, early_stop=early_stop, shuffle=not no_shuffle,
                  check_bounds=not no_check_bounds, mode="dlrm", iters=1, num_batches=1)
    _compare(impls, out, timeout, 1, options, fields)


def _point_line(point, record) -> str:
    head = f"{point.impl}{' (' + point.label + ')' if point.label else ''} {point.data} b={point.batch_size}" + (
        f" x{point.world_size}" if point.world_size > 1 else "")
    if record is None:
        return f"{head}: recorded earlier, skipped (resume)"
    if record["status"] == "ok":
        t = record["timing_ms"]["total"]["median"]
        return f"{head}: ok, {t:.1f} ms/iter, {record['samples_per_s']:,.0f} samples/s"
    if record["status"] == "skipped":
        return f"{head}: [yellow]{escape(str(record['reason']))}[/]"
    return f"{head}: [red]{record['status']}[/]: {escape(str(record['reason']))} (log: {record.get('log')})"


def _duration(s: float | None) -> str:
    if s is None:
        return "?"
    s = int(s)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


@cli.command()
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
def sweep(experiment, profile, dry_run, force, timeout, launcher, sbatch_path, partition, account, root, machine,
          repeats, data) -> None:
    """Run every point of an experiment TOML `repeats` times, interleaved (repeat 1 of every point, then repeat 2,
    ...), into this machine's result set (resumable: recorded runs are skipped; a crashed, killed or timed-out
    run is recorded and the sweep goes on), then write summary.csv and its figures."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from reproduce.config import load_experiment
    from reproduce.plots import draw
    from reproduce.sweep import is_done, run_experiment, todo, unreadable

    if launcher == "slurm" and not machine:
        raise click.UsageError("--launcher slurm needs --machine NAME (the cluster's result set, e.g. 8x-h100-sxm): "
                               "this node is not the machine the points run on")
    try:
        exp = load_experiment(experiment, root=root, profile=profile, machine=machine, repeats=repeats, data=data)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    timeout = timeout or exp.point_timeout_s
    for problem in unreadable(exp):
        console.print(f"[yellow]{escape(problem)}[/] (its point counts as not done)")
    if dry_run:
        for p, r in exp.tasks():
            console.print(f"{'done' if is_done(p, exp.out_dir, r) else 'todo'}  {p.point_id}.r{r}  {p.label}")
        left = todo(exp, force)
        console.print(f"{len(exp.points)} points x {exp.repeats} repeats ({exp.profile} profile) on machine "
                      f"{exp.machine} ({exp.out_dir}), {len(left)} runs to do")
        return
    if launcher == "slurm":
        from reproduce.slurm import write_sbatch

        path = sbatch_path or exp.out_dir / "sweep.sbatch"
        try:
            write_sbatch(exp, experiment, todo(exp, force), timeout or 3600.0, path, partition=partition,
                         account=account, root=root)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        console.print(f"sbatch script: {path}  (submit with `sbatch {path}`; resubmit to resume)")
        return

    def terminate(signum, frame):  # SIGTERM (a scheduler, `kill`): stop the running point's processes too
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, terminate)
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("eta {task.fields[eta]}"), console=console, transient=True)
    with bar:
        console.print(f"{exp.name}: {len(exp.points)} points x {exp.repeats} repeats on machine {exp.machine} "
                      f"-> {exp.out_dir}")
        task = bar.add_task(exp.name, total=len(exp.tasks()), eta="?")

        def start(point, repeat, progress):
            bar.update(task, completed=progress.finished, eta=_duration(progress.eta_s()),
                       description=f"{exp.name}: {point.impl} x{point.world_size} r{repeat}")

        failed: list[str] = []

        def done(i, n, point, repeat, record):
            bar.console.print(f"[{i + 1}/{n}] r{repeat} " + _point_line(point, record))
            bar.advance(task)
            if record and record["status"] in ("failed", "diverged", "locked"):
                failed.append(f"{point.point_id}.r{repeat} ({record['status']})")

        summary = run_experiment(exp, force=force, timeout_s=timeout, on_point=done, on_start=start)
    console.print(f"summary: {summary}")
    for path in draw(list(exp.plots), summary, exp.figures_dir):
        console.print(f"figure: {path}")
    if failed:  # the records say why; the sweep's exit status says that something did not run through
        console.print(f"[red]{len(failed)} of the runs of this sweep did not finish[/]: " + ", ".join(failed[:10])
                      + (" ..." if len(failed) > 10 else ""))
        sys.exit(1)


@cli.command()
@click.argument("experiment", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--profile", default=None, help="a [profiles.NAME] of the experiment (default cpu)")
@click.option("--machine", default=None,
              help="whose result set (default: this machine when it has records, else the reference set)")
@click.option("--data", "data", type=click.Path(exists=True, file_okay=False), default=None,
              help="the dataset folder of an experiment that trains on yours")
def plot(experiment, profile, machine, data) -> None:
    """Summarize one machine's records of an experiment again (summary.csv, repeats.csv) and redraw its figures
    (no runs)."""
    from reproduce.config import load_experiment
    from reproduce.machine import pick_machine
    from reproduce.plots import draw
    from reproduce.sweep import summarize_experiment

    try:
        exp = load_experiment(experiment, profile=profile, machine=machine, data=data)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    exp = exp.on(pick_machine(exp.out_dir.parent, Path("results"), machine))
    if not any(exp.out_dir.glob("*.json")):
        raise click.UsageError(f"{exp.out_dir} has no records: run `dlrmbench sweep {experiment}` first")
    summary = summarize_experiment(exp)
    for path in draw(list(exp.plots), summary, exp.figures_dir):
        console.print(f"figure: {path}")


@cli.command()
@click.option("--data", "presets", multiple=True, required=True,
              help="preset, prepared dataset folder or trace file (repeat)")
@click.option("-b", "--batch-size", "batch_sizes", type=int, multiple=True, required=True, help="repeat")
@click.option("--batches", type=click.IntRange(min=1), default=2, show_default=True, help="batches averaged")
@click.option("--max-rows", type=int, default=None, help="cap every table (--max-ind-range)")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("results/redundancy/redundancy.csv"), show_default=True)
@click.option("--figures", type=click.Path(file_okay=False, path_type=Path),
              default=Path("figures/redundancy"), show_default=True)
def redundancy(presets, batch_sizes, batches, max_rows, out, figures) -> None:
    """nnz, distinct ids (U) and distinct TT prefix groups (E1) per preset and batch size."""
    from reproduce import redundancy as red
    from reproduce.plots.redundancy import redundancy as draw_redundancy

    if any(b <= 0 for b in batch_sizes):
        raise click.BadParameter("batch sizes must be > 0", param_hint="--batch-size")
    try:
        df = red.measure(presets, batch_sizes, batches, max_rows=max_rows)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    red.write(df, out)
    tot = df[df["table"] == "*"]
    t = Table(title="lookup redundancy (sum over tables, mean over batches)")
    for col in ("data", "batch", "nnz", "U", "E1", "U/nnz", "E1/nnz"):
        t.add_column(col, justify="left" if col == "data" else "right")
    for _, r in tot.iterrows():
        t.add_row(r["data"], str(r["batch_size"]), f"{r['nnz']:,.0f}", f"{r['unique']:,.0f}", f"{r['e1']:,.0f}",
                  f"{r['unique_per_nnz']:.3f}", f"{r['e1_per_nnz']:.4f}")
    console.print(t)
    console.print(f"csv: {out}")
    for path in draw_redundancy(df, figures):
        console.print(f"figure: {path}")


@cli.group()
def data() -> None:
    """Prepare real datasets from their raw files."""


@data.command("prepare")
@click.argument("name")
@click.option("--raw", required=True,
              help="the raw file, or the folder holding the manifest's raw files (tabular: a file, folder or glob)")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="default: datasets/NAME/prepared in the checkout (tabular: datasets/<raw file stem>/prepared)")
@click.option("--strict", is_flag=True, help="fail on the first malformed line (naming file and line)")
@click.option("--max-ind-range", type=int, default=None,
              help="hash categoricals % N before categorify (tabular: N hash buckets per categorical column)")
@click.option("--freq-threshold", type=click.IntRange(min=0), default=0, show_default=True,
              help="values seen fewer times share id 0 (0 or 1: keep all)")
@click.option("--schema", "schema_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="tabular: a schema.toml (label, dense, categorical, split); or the four flags below")
@click.option("--label", default=None, help="tabular: the 0/1 label column, or a rule such as 'rating>=4'")
@click.option("--dense", default=None, help="tabular: dense columns, e.g. hour:log1p,age (standardize by default)")
@click.option("--categorical", default=None,
              help="tabular: categorical columns, e.g. user,item:min_count=2,genre:sep=| (multi-hot)")
@click.option("--split", default=None,
              help="tabular: time:COLUMN[:TRAIN[,VAL]], random[:SEED[:TRAIN[,VAL]]] or files[:K] (default random:0:0.8)")
@click.option("--delimiter", default=None, help="tabular: field separator (default: from the extension)")
def data_prepare(name, raw, out, strict, max_ind_range, freq_threshold, schema_path, label, dense, categorical,
                 split, delimiter) -> None:
    """Stream NAME's raw files into memory-mapped arrays (two passes; resumable; atomic). NAME is a manifest of
    datasets/ (criteo-kaggle, criteo-terabyte, avazu) or `tabular`: any CSV / TSV (.gz) / Parquet click log
    described by --schema or by --label / --dense / --categorical / --split."""
    import time

    from tqdm import tqdm

    from impls.data.textio import MalformedInput
    from reproduce import datasets

    if max_ind_range is not None and max_ind_range <= 0:
        raise click.BadParameter("must be > 0", param_hint="--max-ind-range")
    tabular_flags = {"--schema": schema_path, "--label": label, "--dense": dense, "--categorical": categorical,
                     "--split": split, "--delimiter": delimiter}
    if name != "tabular" and any(v is not None for v in tabular_flags.values()):
        given = [k for k, v in tabular_flags.items() if v is not None]
        raise click.UsageError(f"{', '.join(given)} describe a `data prepare tabular` input; {name} has its own format")
    t0 = time.perf_counter()
    bar = tqdm(unit="B", unit_scale=True, desc=f"{name} (2 passes)")
    try:
        if name == "tabular":
            meta = datasets.prepare_tabular(raw, out, strict, max_ind_range, freq_threshold, schema_path, label, dense,
                                            categorical, split, delimiter, progress=bar.update)
        else:
            if not Path(raw).exists():
                raise FileNotFoundError(f"--raw {raw} does not exist")
            meta = datasets.prepare(name, Path(raw), out, strict, max_ind_range, freq_threshold, progress=bar.update)
    except (ValueError, FileNotFoundError, NotImplementedError, MalformedInput) as exc:
        bar.close()
        raise click.UsageError(str(exc)) from None
    bar.close()
    secs = time.perf_counter() - t0
    console.print(f"prepared {meta.out}: rows {meta.rows}, {sum(meta.cardinalities):,} categories in "
                  f"{len(meta.cardinalities)} tables" + (f" {dict(zip(meta.tables, meta.cardinalities))}"
                                                         if len(meta.tables) <= 12 else ""))
    if bar.n:
        console.print(f"read {bar.n / 2**20:,.1f} MiB in {secs:.1f} s ({bar.n / 2**20 / secs:,.1f} MiB/s over both passes)")
    else:
        console.print("already complete: reused")
    if meta.bad_lines:
        console.print(f"[yellow]{meta.bad_lines} malformed line(s) skipped[/], e.g.:")
        for e in meta.bad_examples:
            console.print(f"  {escape(e)}")
    console.print(f"train on it: dlrmbench train --impl dense-torch --impl ecorec --data {meta.out}")


@data.command("synth")
@click.argument("preset")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--samples", type=int, required=True, callback=positive, help="training samples")
@click.option("--val-samples", type=click.IntRange(min=0), default=None, help="held-out samples (default samples/8)")
@click.option("--seed", type=int, default=0, show_default=True)
@data_options_no_name
def data_synth(preset, out, samples, val_samples, seed, **kw) -> None:
    """Write PRESET's synthetic stream to OUT in the prepared layout (read back with --data OUT)."""
    from tqdm import tqdm

    from impls.data.export import write_synthetic
    from impls.data.presets import get_preset

    try:
        spec = get_preset(preset, seed=seed, **collect_data_options(kw))
        total = samples + (samples // 8 if val_samples is None else val_samples)
        with tqdm(total=total, unit="sample", unit_scale=True, desc=preset) as bar:
            meta = write_synthetic(preset, spec, out, samples, val_samples, progress=bar.update)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    console.print(f"wrote {out}: rows {meta.rows}, {len(meta.tables)} tables, "
                  f"{sum(meta.cardinalities):,} rows in all")


@data.command("reorder")
@click.argument("source")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--table", "tables", multiple=True, help="table to reorder (repeat); default: tables with >= --min-rows")
@click.option("--min-rows", type=int, default=1_000_000, show_default=True,
              help="reorder the tables with at least this many rows (EL-Rec: its TT tables)")
@click.option("-b", "--batch-size", type=int, default=4096, show_default=True, callback=positive)
@click.option("--batches", type=int, default=16, show_default=True, callback=positive, help="training batches read")
@click.option("--hot-fraction", type=float, default=0.05, show_default=True, help="hottest rows kept fixed")
@click.option("--graph-batch", type=int, default=512, show_default=True, callback=positive,
              help="samples per co-access clique (EL-Rec: its mini-batch of 512)")
@click.option("--seed", type=int, default=0, show_default=True)
@data_options_no_name
def data_reorder(source, out, tables, min_rows, batch_size, batches, hot_fraction, graph_batch, seed, **kw) -> None:
    """EL-Rec's global index reordering of SOURCE's training batches into OUT (one bijection per table); use it
    with `run --reorder OUT`."""
    from impls.data.reorder import build_reordering
    from impls.data.sources import open_source

    try:
        src = open_source(source, seed=seed, **collect_data_options(kw))
        names = list(tables) or [t.name for t in src.tables if t.num_embeddings >= min_rows]
        if not names:
            raise ValueError(f"no table of {source} has >= {min_rows:,} rows; name tables with --table")
        r = build_reordering(src, names, batches, batch_size, hot_fraction, graph_batch, seed=seed)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    r.info["source"] = source
    r.save(out)
    console.print(f"wrote {out}: bijections for {len(names)} table(s): {', '.join(names)}")


@data.command("stats")
@click.argument("source")
@click.option("-b", "--batch-size", type=int, default=4096, show_default=True, callback=positive)
@click.option("--batches", type=click.IntRange(min=1), default=2, show_default=True, help="batches averaged")
@click.option("--cores", type=click.IntRange(min=2), default=3, show_default=True,
              help="TT cores whose prefix groups E1 counts (FBTT's suggested shape)")
def data_stats(source, batch_size, batches, cores) -> None:
    """Per-table redundancy of SOURCE (a preset, a prepared dataset folder or a trace file): rows, hotness,
    nnz, distinct ids U, TT prefix groups E1, share of lookups on the top 1% rows; then the batch's locality
    (unique fraction, rows used once, reuse histogram), as Meta's locality_stats report it."""
    from reproduce.redundancy import measure

    try:
        df, loc = measure([source], [batch_size], batches, cores=cores, locality=True)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    t = Table(title=f"{source}, batch {batch_size} (mean over {batches} batches; E1 for {cores} TT cores)")
    for col in ("table", "rows", "hotness", "nnz", "U", "E1", "U/nnz", "E1/nnz", "top-1% share"):
        t.add_column(col, justify="left" if col == "table" else "right")
    for _, r in df.iterrows():
        share = "" if r["table"] == "*" else f"{r['top1pct_share']:.3f}"
        hot = "" if r["table"] == "*" else f"{r['hotness']:.2f}"
        t.add_row(str(r["table"]), f"{int(r['rows']):,}", hot, f"{r['nnz']:,.0f}", f"{r['unique']:,.0f}",
                  f"{r['e1']:,.0f}", f"{r['unique_per_nnz']:.3f}", f"{r['e1_per_nnz']:.4f}", share)
    console.print(t)
    share = loc.reuse_share
    top = int(share.nonzero()[0].max()) if share.any() else 0
    console.print(f"batch 0: unique fraction {loc.unique_fraction:.3f}, rows used once {loc.once_share_of_rows:.1%} "
                  f"of distinct rows ({share[0]:.1%} of lookups)")
    console.print("lookups by reuse octave (rows used 2^k..2^(k+1)-1 times): " +
                  " ".join(f"{k}:{share[k]:.1%}" for k in range(top + 1)))


@cli.command()
def compression() -> None:
    """TT-Rec's model-size compression as parameter-count arithmetic on the real cardinalities."""
    from reproduce.compression import compression_table

    df = compression_table()
    t = Table(title="embedding parameters, dense / TT (the k largest tables TT with 3 cores at rank r)")
    for col in ("dataset", "dim", "TT tables", "r=8", "r=16", "r=32", "r=64"):
        t.add_column(col)
    for (name, dim, k), part in df.groupby(["dataset", "dim", "tt_tables"], sort=False):
        t.add_row(name, str(dim), str(k), *(f"{x:.1f}x" for x in part["ratio"]))
    console.print(t)
    console.print("published: Kaggle 4x to 221x (117x in the arXiv abstract), Terabyte 112x")


@cli.command()
def env() -> None:
    """Versions and hardware."""
    from impls.api import registered_names
    from reproduce.records import environment

    for k, v in environment().items():
        console.print(f"{k:>14}: {v}")
    console.print(f"{'impls':>14}: {', '.join(registered_names())}")


from reproduce.calibrate import calibrate  # noqa: E402
from reproduce.plan_cmd import plan  # noqa: E402

cli.add_command(plan)
cli.add_command(calibrate)


@cli.command()
@click.option("--machine", "machines", multiple=True,
              help="whose result sets (repeat to put machines side by side; default: this machine when it has "
                   "records, else the reference set)")
@click.option("--readme/--no-readme", default=True, show_default=True,
              help="also rewrite README.md's generated blocks (only from the reference set)")
def report(machines, readme) -> None:
    """Write results/REPORT.md (every claim of reproduce/claims.toml: measured value with its interval, modeled
    value, verdict) and results/claims.csv, and README.md's generated blocks."""
    from reproduce.report import build_report

    try:
        for path in build_report(machines=list(machines), readme=readme):
            console.print(f"report: {path}")
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def main() -> None:
    cli(prog_name="dlrmbench")
