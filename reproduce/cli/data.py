"""`dlrmbench data`: prepare (a raw click log into the prepared layout), synth (a synthetic prepared dataset),
reorder (frequency / co-occurrence id reordering of a prepared dataset) and stats (a source's redundancy)."""
from __future__ import annotations

import shlex
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from reproduce.cli.options import collect_data_options, data_options_no_name, positive, writable_folder
from reproduce.cli.output import console, print_problems


@click.group()
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
@click.option("--dense", default=None,
              help="tabular: dense columns, e.g. hour:log1p,age (standardize by default); '*' every numeric column "
                   "not named otherwise, or a glob such as 'f_*:log1p'")
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
    from reproduce.harness import datasets

    if max_ind_range is not None and max_ind_range <= 0:
        raise click.BadParameter("must be > 0", param_hint="--max-ind-range")
    tabular_flags = {"--schema": schema_path, "--label": label, "--dense": dense, "--categorical": categorical,
                     "--split": split, "--delimiter": delimiter}
    if name != "tabular" and any(v is not None for v in tabular_flags.values()):
        given = [k for k, v in tabular_flags.items() if v is not None]
        raise click.UsageError(f"{', '.join(given)} describe a `data prepare tabular` input; {name} has its own format")
    if out is not None:
        writable_folder(out.parent, f"--out {out}: its folder")
    t0 = time.perf_counter()
    bar = tqdm(unit="B", unit_scale=True, desc=f"{name} (2 passes)", delay=1.0)  # a quick refusal shows no bar
    try:
        if name == "tabular":
            meta = datasets.prepare_tabular(raw, out, strict, max_ind_range, freq_threshold, schema_path, label, dense,
                                            categorical, split, delimiter, progress=bar.update)
        else:
            if not Path(raw).exists():
                raise FileNotFoundError(f"--raw {raw} does not exist")
            meta = datasets.prepare(name, Path(raw), out, strict, max_ind_range, freq_threshold, progress=bar.update)
    except (ValueError, FileNotFoundError, NotImplementedError, MalformedInput) as exc:
        raise click.UsageError(str(exc)) from None
    finally:
        bar.close()
    secs = time.perf_counter() - t0
    console.print(f"prepared {meta.out}: rows {meta.rows}, {sum(meta.cardinalities):,} categories in "
                  f"{len(meta.cardinalities)} tables" + (f" {dict(zip(meta.tables, meta.cardinalities))}"
                                                         if len(meta.tables) <= 12 else ""))
    if meta.schema and meta.schema.get("split"):
        console.print(escape(meta.schema["split"]))
    if meta.schema and meta.schema.get("dense_resolved"):
        console.print(escape(meta.schema["dense_resolved"]))
    if bar.n:
        console.print(f"read {bar.n / 2**20:,.1f} MiB in {secs:.1f} s ({bar.n / 2**20 / secs:,.1f} MiB/s over both passes)")
    else:
        console.print("already complete: reused")
    print_problems(meta.warnings, meta.bad_lines, meta.bad_examples, "malformed line(s) skipped")
    from reproduce.cli.run import default_out
    from reproduce.harness.machine import this_machine

    console.print(f"train on it: dlrmbench train --impl dense-torch --impl ecorec --data "
                  f"{escape(shlex.quote(str(meta.out)))}")
    console.print(f"  (its records go to {default_out(this_machine())}; --out DIR puts them elsewhere)")


@data.command("synth")
@click.argument("preset")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--samples", type=int, required=True, callback=positive, help="training samples")
@click.option("--val-samples", type=click.IntRange(min=0), default=None, help="held-out samples (default samples/8)")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--teacher", type=click.Choice(["scalar", "vector"]), default="scalar", show_default=True,
              help="the labels: the stream's own (one number per id) or `vector` (d independent numbers per id: "
                   "the labels a comparison of compressed tables is scored on; impls/data/teachers.py)")
@data_options_no_name
def data_synth(preset, out, samples, val_samples, seed, teacher, **kw) -> None:
    """Write PRESET's synthetic stream to OUT in the prepared layout (read back with --data OUT)."""
    from tqdm import tqdm

    from impls.data.export import write_synthetic
    from impls.data.presets import get_preset

    writable_folder(out.parent, f"--out {out}: its folder")
    try:
        spec = get_preset(preset, seed=seed, **collect_data_options(kw))
        total = samples + (samples // 8 if val_samples is None else val_samples)
        with tqdm(total=total, unit="sample", unit_scale=True, desc=preset) as bar:
            meta = write_synthetic(preset, spec, out, samples, val_samples, progress=bar.update, teacher=teacher)
            reused = bar.n == 0
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    console.print(f"{'already complete, reused' if reused else 'wrote'} {out}: rows {meta.rows}, {len(meta.tables)} tables, "
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
    from impls.data.reorder import Reordering, build_reordering
    from impls.data.sources import open_source

    writable_folder(out.parent, f"--out {out}: its folder")
    options = collect_data_options(kw)
    try:
        src = open_source(source, seed=seed, **options)
        names = list(tables) or [t.name for t in src.tables if t.num_embeddings >= min_rows]
        if not names:
            raise ValueError(f"no table of {source} has >= {min_rows:,} rows; name tables with --table")
        prepared = getattr(src, "meta", None)
        key = {"source": source, "source key": getattr(prepared, "key", None), "tables": names, "batches": batches,
               "batch_size": batch_size, "hot_fraction": hot_fraction, "graph_batch": graph_batch, "seed": seed,
               "data options": options}

        def build() -> Reordering:
            r = build_reordering(src, names, batches, batch_size, hot_fraction, graph_batch, seed=seed)
            r.info["source"] = source
            return r

        _, reused = Reordering.build_or_reuse(out, key, build)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    console.print(f"{'reused' if reused else 'wrote'} {out}: bijections for {len(names)} table(s): {', '.join(names)}")


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
    from reproduce.analysis.redundancy import measure

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
