"""`dlrmbench plan`: EMBark's planner on a workload and a modeled machine, beside the table_row_wise baseline."""
from __future__ import annotations

import statistics

import click
from rich.table import Table

from reproduce.cli.options import positive
from reproduce.cli.output import console

WORKLOADS = {"dcnv2": "dcnv2-multihot", "t180": "embark-t180", "t200": "embark-t200", "t510": "embark-t510"}


@click.command("plan")
@click.option("--workload", required=True, help=f"{', '.join(WORKLOADS)} or any data preset name")
@click.option("--nodes", type=int, default=1, show_default=True, callback=positive)
@click.option("--gpus-per-node", type=int, default=None, callback=positive, help="default: the hardware's")
@click.option("--hw", default="dgx-h100", show_default=True, help="hardware spec (impls/embark/cost.py HARDWARE)")
@click.option("--local-batch", type=int, default=8192, show_default=True, callback=positive, help="samples per GPU")
@click.option("--strategy", default="embark", show_default=True,
              type=click.Choice(["embark", "table_row_wise", "uniform", "round_robin"]))
@click.option("--hierarchical", is_flag=True, help="buckets are nodes (hierarchical RB)")
@click.option("--column-wise", is_flag=True, help="let the planner also halve column widths")
@click.option("--adagrad", is_flag=True, help="8 bytes per element (weights + accumulator)")
@click.option("--fp16", is_flag=True, help="half-precision payloads")
@click.option("--show-gpus", type=int, default=8, show_default=True, help="GPUs listed in the per-GPU table")
@click.option("--calibration", type=click.Path(dir_okay=False), default=None,
              help="a profile from `dlrmbench calibrate`: also run the calibrated search (one node) and list every "
                   "candidate's predicted step")
@click.option("--storage", type=click.Choice(["fbgemm", "dense"]), default="fbgemm", show_default=True,
              help="the storage the calibrated search predicts lookups of")
def plan(workload, nodes, gpus_per_node, hw, local_batch, strategy, hierarchical, column_wise, adagrad, fp16,
         show_gpus, calibration, storage) -> None:
    """Plan a workload's embedding sharding and print per-GPU cost and memory, the planning time and the
    predicted embedding step time against table_row_wise (a model, not a measurement)."""
    from impls.data.presets import get_preset
    from impls.embark.cost import HARDWARE, evaluate
    from impls.embark.planning import cost_model, plan_for

    if hw not in HARDWARE:
        raise click.BadParameter(f"unknown hardware {hw!r}; known: {', '.join(HARDWARE)}", param_hint="--hw")
    L = gpus_per_node or HARDWARE[hw].gpus_per_node
    G = nodes * L
    try:
        tables = get_preset(WORKLOADS.get(workload, workload)).tables
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--workload") from None
    model = cost_model(hw, G, L, local_batch * G, adagrad=adagrad, fp16=fp16, hierarchical=hierarchical)
    try:
        chosen, secs = plan_for(tables, model, strategy, "hugectr", column_wise=column_wise)
        base, _ = plan_for(tables, model, "table_row_wise", "hugectr")
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    ev, ev_base = evaluate(chosen, tables, model), evaluate(base, tables, model)
    ub = [p.table for p in chosen.mp if p.cluster == "ub"]
    rb = [p for p in chosen.mp if p.cluster == "rb"]
    split = sum(1 for p in rb if p.r * p.c > 1)
    console.print(f"[bold]{workload}[/]: {len(tables)} tables, {sum(t.num_embeddings * t.dim for t in tables) / 1e9:.1f} B "
                  f"parameters; {nodes} x {L} GPUs ({hw}), global batch {local_batch * G:,}")
    console.print(f"plan [bold]{chosen.name}[/] in {secs * 1e3:.0f} ms: DP {len(chosen.dp)}, UB {len(ub)}, RB {len(rb)} "
                  f"tables ({split} split; {len(chosen.shards())} shards){'; OOM' if ev.oom else ''}")
    t = Table(title="per bucket (model units; memory in GiB)")
    for col in ("bucket", "compute", "comm", "shared DP+UB", "total", "memory GiB"):
        t.add_column(col, justify="right")
    totals = [a + b + ev.shared for a, b in zip(ev.comp, ev.comm)]
    for g in range(min(show_gpus, len(totals))):
        t.add_row(str(g), f"{ev.comp[g]:.3g}", f"{ev.comm[g]:.3g}", f"{ev.shared:.3g}", f"{totals[g]:.3g}",
                  f"{ev.bytes[g] / 2**30:.2f}")
    t.add_row("max / mean", "", "", "", f"{max(totals):.3g} / {statistics.mean(totals):.3g}",
              f"{max(ev.bytes) / 2**30:.2f} / {statistics.mean(ev.bytes) / 2**30:.2f}")
    console.print(t)
    console.print(f"predicted embedding step: {ev.step_s * 1e3:.2f} ms; table_row_wise {ev_base.step_s * 1e3:.2f} ms "
                  f"-> {ev_base.step_s / ev.step_s:.2f}x (modeled)")
    if calibration:
        _calibrated(tables, model, calibration, storage)


def _calibrated(tables, model, path: str, storage: str) -> None:
    """The calibrated search on the same tables and world: every candidate's predicted step, the chosen breakdown."""
    import dataclasses

    from impls.embark.planning import plan_for, search_for

    model = dataclasses.replace(model, hierarchical=False)
    try:
        search = search_for(tables, model, path, storage)
        chosen, _ = plan_for(tables, model, "embark", "calibrated", search=search)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    t = Table(title=f"calibrated ({path}, sha {search.profile.digest}): predicted step per candidate")
    t.add_column("candidate")
    t.add_column("predicted ms", justify="right")
    for name, ms in sorted(chosen.notes["candidates"].items(), key=lambda x: x[1]):
        t.add_row(name, f"{ms:.3f}")
    console.print(t)
    parts = ", ".join(f"{k.removesuffix('_ms')} {v:.3f}" for k, v in chosen.notes["predicted"].items()
                      if k != "total_ms")
    console.print(f"calibrated plan (from {chosen.notes['start']}, {chosen.notes['moves']} table moves): DP "
                  f"{len(chosen.dp)}, UB {sum(p.cluster == 'ub' for p in chosen.mp)}, RB "
                  f"{sum(p.cluster == 'rb' for p in chosen.mp)}; predicted {chosen.notes['predicted']['total_ms']:.3f}"
                  f" ms ({parts})")
    aside = chosen.notes.get("not_worth_its_risk")
    if aside:
        console.print(f"set aside: a plan with DP {aside['dp']} / UB {aside['ub']} tables predicted "
                      f"{aside['predicted_ms']:.3f} ms, within the model's worst error "
                      f"({chosen.notes['margin']:.0%}) of this all-RB plan")
