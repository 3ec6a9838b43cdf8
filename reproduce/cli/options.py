"""Reusable click option bundles."""
from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Callable

import click

from impls.model.choices import INTERACTIONS, MLP_OPTIMIZERS, MODES


def stack(*decorators: Callable) -> Callable:
    """Several click decorators as one."""
    def apply(f: Callable) -> Callable:
        for d in reversed(decorators):
            f = d(f)
        return f

    return apply


def writable_folder(path: Path, what: str) -> Path:
    """``path``, created if missing, after checking a file can be written in it: a folder that cannot be written
    (read-only, not a folder, no such parent) is refused up front, naming it, before anything runs or is read."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise click.UsageError(f"{what} {path} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix="dlrmbench-write-check-"):
            pass
    except OSError as exc:
        raise click.UsageError(f"{what} {path} cannot be written: {exc.strerror or exc}") from None
    return path


def point_default(name: str):
    """A RunPoint field's default: the command line's defaults are the point's (point.py has no torch to import)."""
    from dataclasses import MISSING

    from reproduce.harness.point import RunPoint

    f = RunPoint.__dataclass_fields__[name]
    return f.default if f.default is not MISSING else f.default_factory()


def _layers(name: str) -> str:
    return ",".join(str(x) for x in point_default(name))


def positive(ctx, param, value):
    if value is not None and not (value > 0 and math.isfinite(value)):  # NaN and inf are not positive numbers
        raise click.BadParameter(f"must be a finite number > 0, got {value}")
    return value


def finite(ctx, param, value):
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"must be a finite number, got {value}")
    return value


timing_options = stack(
    click.option("--batch-size", "-b", type=int, default=4096, show_default=True, callback=positive),
    click.option("--iters", type=int, default=point_default("iters"), show_default=True, callback=positive, help="timed iterations"),
    click.option("--warmup", type=click.IntRange(min=0), default=point_default("warmup"), show_default=True),
    click.option("--threads", type=int, default=None, callback=positive, help="torch threads (default: torch's)"),
    click.option("--device", default=point_default("device"), show_default=True),
    click.option("--num-batches", type=int, default=point_default("num_batches"), show_default=True, callback=positive,
                 help="distinct batches generated before timing and cycled"),
    click.option("--eval-batches", type=click.IntRange(min=0), default=point_default("eval_batches"), show_default=True,
                 help="held-out batches for AUC / log loss (dlrm mode)"),
    click.option("--eval", "eval_flag", is_flag=True, help="AUC / log loss on 8 held-out batches (= --eval-batches 8)"),
    click.option("--no-check-bounds", is_flag=True, help="skip index validation (benchmarks only)"),
)

dist_options = stack(
    click.option("--world-size", "-n", type=int, default=point_default("world_size"), show_default=True, callback=positive,
                 help="ranks (GPUs; gloo processes on a CPU machine), launched by torchrun; "
                      "--batch-size is per rank"),
    click.option("--gpus-per-node", type=click.IntRange(min=0), default=point_default("gpus_per_node"),
                 help="ranks per node L (emulates nodes on one machine; default: world size / nnodes)"),
    click.option("--nnodes", type=int, default=point_default("nnodes"), show_default=True, callback=positive),
    click.option("--rdzv-endpoint", default=point_default("rdzv_endpoint"), help="HOST:PORT of torchrun's rendezvous (multi-node)"),
    click.option("--dist-timeout", "dist_timeout_s", type=float, default=point_default("dist_timeout_s"), show_default=True,
                 callback=positive, help="seconds any collective may wait (a dead rank ends the run within it)"),
)

def _sizes(ctx, param, value):
    try:
        sizes = [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"layer sizes are comma-separated integers, got {value!r}") from None
    if any(x <= 0 for x in sizes):
        raise click.BadParameter(f"layer sizes must be > 0, got {value!r}")
    return sizes


def mlp_options(optimizer: str, lr: float) -> Callable:
    """The dense side of the DLRM (defaults differ: a benchmark keeps dlrm's SGD 0.1, training uses Adam)."""
    return stack(
        click.option("--mlp-optimizer", type=click.Choice(MLP_OPTIMIZERS), default=optimizer,
                     show_default=True, help="the MLPs' optimizer"),
        click.option("--mlp-lr", type=float, default=lr, show_default=True, callback=positive,
                     help="the MLPs' learning rate"),
        click.option("--bottom", default=_layers("bottom"), show_default=True, callback=_sizes, help="bottom MLP hidden layers"),
        click.option("--top", default=_layers("top"), show_default=True, callback=_sizes, help="top MLP hidden layers"),
        click.option("--interaction", type=click.Choice(INTERACTIONS), default=point_default("interaction"),
                     show_default=True,
                     help="dot: DLRM's pairwise dot products; dcnv2: DCN-V2's low-rank cross network (MLPerf DLRMv2)"),
    )


model_options = stack(
    click.option("--mode", type=click.Choice(MODES), default=point_default("mode"), show_default=True),
    click.option("--optimizer", type=click.Choice(["sgd", "adagrad"]), default=point_default("optimizer"), show_default=True),
    click.option("--lr", type=float, default=point_default("lr"), show_default=True, callback=positive),
    click.option("--seed", type=int, default=point_default("seed"), show_default=True),
)

data_options_no_name = stack(
    click.option("--dim", type=int, default=None, callback=positive, help="embedding dim (preset default)"),
    click.option("--hotness", type=float, default=None, callback=positive, help="mean lookups per sample"),
    click.option("--max-rows", type=int, default=None, callback=positive, help="cap every table (--max-ind-range)"),
    click.option("--alpha", type=float, default=None, callback=finite,
                 help="power-law exponent of id popularity (0 = uniform)"),
    click.option("--locality", type=click.Choice(["scattered", "ranked"]), default=None),
    click.option("--bag-sizes", type=click.Choice(["fixed", "random"]), default=None),
    click.option("--num-tables", type=int, default=None, callback=positive, help="uniform and meta-* presets"),
    click.option("--rows", type=int, default=None, callback=positive, help="uniform and sc24-f4 presets: rows per table"),
)

reorder_option = click.option("--reorder", type=click.Path(file_okay=False), default=None,
                              help="relabel ids by a `data reorder` folder (EL-Rec's global index reordering)")

data_options = stack(
    click.option("--data", default="criteo-kaggle", show_default=True,
                 help="synthetic preset, prepared dataset folder (data prepare / data synth) or Meta trace .pt[.gz]"),
    data_options_no_name,
    reorder_option,
)


def collect_data_options(kw: dict) -> dict:
    """Pop the data options out of a command's keyword arguments; keep those that were given."""
    keys = ("dim", "hotness", "max_rows", "alpha", "locality", "bag_sizes", "num_tables", "rows", "reorder")
    popped = {k: kw.pop(k, None) for k in keys}
    return {k: v for k, v in popped.items() if v is not None}


def parse_impl_options(items) -> dict:
    """``[IMPL.]KEY=VALUE`` strings -> impl_options (``{key: v}`` or ``{impl: {key: v}}``); ValueError on
    a malformed item."""
    import json

    from impls.registry import registered_names

    out: dict = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ValueError(f"option {item!r} is not KEY=VALUE")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        impl, dot, name = key.partition(".")
        if dot and impl in registered_names():
            out.setdefault(impl, {})[name] = value
        else:
            out[key] = value
    return out


IMPL_HELP = ("a system of this suite by name, an installed package's (its dlrmbench.systems entry point), or one of "
             "your own: package.module:Class or path/to/file.py:Class")


def resolve_systems(names, hint: str = "--impl") -> tuple[str, ...]:
    """The registry names of ``names`` (names or specs; an outside system is loaded and registered here): a bad
    one is refused naming it."""
    from reproduce.harness.systems import resolve

    try:
        return tuple(resolve(n) for n in names)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=hint) from None


impl_slot_option = click.option(
    "--impl", "outside", multiple=True, metavar="NAME|SPEC",
    help="race this system too, in the experiment's $IMPL slot (repeat for several): " + IMPL_HELP)
