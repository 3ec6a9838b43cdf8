"""`dlrmbench calibrate`: measure this machine for EMBark's calibrated cost model and write its profile
(reproduce/harness/calibration_run.py), results/calibration/<machine>/<backend>.json unless --out says otherwise."""
from __future__ import annotations

from pathlib import Path

import click

from reproduce.cli.output import console


@click.command("calibrate")
@click.option("--world", "worlds", type=int, multiple=True, default=(2, 4), show_default=True,
              help="process counts the collectives are measured at (repeat the option)")
@click.option("--threads", type=int, default=1, show_default=True, help="intra-op threads per rank (compute terms)")
@click.option("--backend", type=click.Choice(["auto", "gloo", "nccl"]), default="auto", show_default=True,
              help="auto: nccl where CUDA is available, else gloo")
@click.option("--machine", default=None, help="profile name (default: this machine's slug, the one runs read)")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="the profile goes to ROOT/results/calibration/<machine>/<backend>.json, where runs and sweeps "
                   "with the same --root read it")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="profile file to write instead (runs then need -o embark.calibration=FILE)")
@click.option("--if-missing", is_flag=True, help="do nothing when the profile exists")
@click.option("--engine-workloads", type=click.IntRange(min=2), default=None,
              help="fit the engine term on the first N calibration workloads only (default: all; fewer is quicker "
                   "and extrapolates worse)")
@click.option("--quick", is_flag=True,
              help="a smoke profile in about a fifth of the time (3 repeats, messages to 1 MiB, the small lookup grid, "
                   "one engine round): noisier terms that extrapolate worse; needs --out, so that no run plans on it "
                   "unless told to")
def calibrate(worlds, threads, backend, machine, root, out, if_missing, engine_workloads, quick=False) -> None:
    """Measure collectives (latency, bandwidth by message and world size), lookups per storage (forward, backward;
    per bag, key and byte), dedup, pooling, and the engine's own work (EMBark steps of candidate plans) on this
    machine, and write the profile EMBark's planner reads."""
    import torch

    from impls.api import get_impl
    from reproduce.harness.calibration_run import FULL, QUICK, calibrate as measure
    from reproduce.harness.calibration import profile_path
    from reproduce.harness.machine import this_machine
    from reproduce.harness.record_store import write_json

    if any(w < 2 for w in worlds) or threads < 1:
        raise click.BadParameter("world sizes must be >= 2 and threads >= 1")
    if quick and out is None:
        raise click.UsageError("--quick writes a smoke profile: name its file with --out (the machine's profile, which "
                               "runs and sweeps plan on, is always measured in full)")
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl" and torch.cuda.device_count() < max(worlds):
        raise click.BadParameter(f"nccl at world {max(worlds)} needs that many GPUs; this machine has "
                                 f"{torch.cuda.device_count()}", param_hint="--world")
    machine = this_machine(machine)
    path = out or profile_path(root / "results", machine, backend)  # where runs with this --root read it
    if if_missing and path.exists():
        console.print(f"calibration profile exists: {path}")
        return
    storages = ["dense"]
    try:
        get_impl("dense-fbgemm")
        storages.append("fbgemm")
    except ImportError as exc:
        console.print(f"fbgemm storage not calibrated: {exc}")
    profile = measure(sorted(set(worlds)), threads, machine, backend, storages, engine_workloads,
                      progress=lambda s: console.print(f"calibrate: {s}"), effort=QUICK if quick else FULL)
    write_json(path, profile)
    for name, per in profile["collectives"].items():
        for w, line in per.items():
            console.print(f"{name:>10} x{w}: latency {line['fixed_s'] * 1e6:8.1f} us, "
                          f"{1 / line['per_unit_s'] / 1e9 if line['per_unit_s'] else float('inf'):6.2f} GB/s")
    for s, per in profile["lookup"].items():
        for k, c in per.items():
            console.print(f"lookup {s} {k}: fixed {c['fixed_s'] * 1e6:.1f} us, bag {c['per_bag_s'] * 1e9:.1f} ns, "
                          f"key {c['per_key_s'] * 1e9:.1f} ns, distinct row {c['per_unique_s'] * 1e9:.1f} ns, "
                          f"row byte {c['per_byte_s'] * 1e12:.1f} ps, distinct row byte "
                          f"{c['per_unique_byte_s'] * 1e12:.1f} ps, output byte {c['per_out_byte_s'] * 1e12:.1f} ps "
                          f"(+{c['per_out_byte_past_cache_s'] * 1e12:.1f} past {c['cache_bytes'] / 2**20:.1f} MiB)")
    for w, e in profile["engine"].items():
        fit = profile["measured"]["engine_fit"][w]
        console.print(f"engine x{w}: lookups x{e['lookup_scale']:.2f}, fixed {e['fixed_s'] * 1e3:.2f} ms, "
                      f"key {e['per_key_s'] * 1e9:.1f} ns, "
                      f"output byte {e['per_byte_s'] * 1e12:.1f} ps, owner byte {e['per_owner_byte_s'] * 1e12:.1f} ps, "
                      f"shard {e['per_shard_s'] * 1e6:.1f} us, UB key {e['per_ub_key_s'] * 1e9:.1f} ns, "
                      f"UB byte {e['per_ub_byte_s'] * 1e12:.1f} ps, "
                      f"DP table {e['per_dp_table_s'] * 1e6:.1f} us, DP byte {e['per_dp_byte_s'] * 1e12:.1f} ps; "
                      f"steps of {fit['plans']} plans predicted within "
                      f"{fit['median_rel_err']:.0%} (median), {fit['max_rel_err']:.0%} (worst)")
    console.print(f"wrote {path}")
