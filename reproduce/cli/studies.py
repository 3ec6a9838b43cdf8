"""`dlrmbench redundancy` (lookup redundancy per source and batch size), `dlrmbench tt-params` (TT-Rec's
model-size arithmetic) and `dlrmbench env` (versions and hardware)."""
from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from reproduce.cli.output import console


@click.command()
@click.option("--data", "presets", multiple=True,
              help="preset, prepared dataset folder or trace file (repeat; default: the study's five sources, "
                   "reproduce/analysis/redundancy.py)")
@click.option("-b", "--batch-size", "batch_sizes", type=int, multiple=True,
              help="repeat (default: the study's batch sizes, reproduce/analysis/redundancy.py)")
@click.option("--batches", type=click.IntRange(min=1), default=2, show_default=True, help="batches averaged")
@click.option("--max-rows", type=int, default=None, help="cap every table (--max-ind-range)")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("results/redundancy/redundancy.csv"), show_default=True)
@click.option("--figures", type=click.Path(file_okay=False, path_type=Path),
              default=Path("figures/redundancy"), show_default=True)
def redundancy(presets, batch_sizes, batches, max_rows, out, figures) -> None:
    """nnz, distinct ids (U) and distinct TT prefix groups (E1) per preset and batch size."""
    from reproduce.analysis import redundancy as red
    from reproduce.analysis.plots.redundancy import redundancy as draw_redundancy

    presets, batch_sizes = presets or red.SOURCES, batch_sizes or red.BATCH_SIZES
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


@click.command("tt-params")
def tt_params() -> None:
    """TT-Rec's model-size compression as parameter-count arithmetic on the real cardinalities (the compression
    study, methods measured side by side, is `dlrmbench reproduce compression`)."""
    from reproduce.analysis.compression import compression_table

    df = compression_table()
    t = Table(title="embedding parameters, dense / TT (the k largest tables TT with 3 cores at rank r)")
    for col in ("dataset", "dim", "TT tables", "r=8", "r=16", "r=32", "r=64"):
        t.add_column(col)
    for (name, dim, k), part in df.groupby(["dataset", "dim", "tt_tables"], sort=False):
        t.add_row(name, str(dim), str(k), *(f"{x:.1f}x" for x in part["ratio"]))
    console.print(t)
    console.print("published: Kaggle 4x to 221x (117x in the arXiv abstract), Terabyte 112x")


@click.command()
@click.option("--slug", "slug", is_flag=True, help="print only this machine's result-set name (e.g. amd-epyc-2c-avx512)")
@click.option("--machine", default=None, help="with --slug: the name to check and print instead of this machine's")
def env(slug, machine) -> None:
    """Versions and hardware."""
    from impls.registry import registered_names
    from reproduce.harness.environment import environment

    if slug:
        from reproduce.harness.machine import this_machine

        try:
            click.echo(this_machine(machine))
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        return

    for k, v in environment().items():
        console.print(f"{k:>14}: {v}")
    console.print(f"{'impls':>14}: {', '.join(registered_names())}")
