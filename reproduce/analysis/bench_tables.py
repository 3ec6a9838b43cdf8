"""The report blocks of `dlrmbench bench`'s set (results/bench/<machine>/benchmarks.json): the TT kernels'
roofline, the TT steps, EcoRec's step profile and the prepare rates."""
from __future__ import annotations

import json
from pathlib import Path

# the result set each generated block reads (freshness.set_state names)
# blocks that are not an experiment's: `make bench`'s sets and the models' outputs (their sets' names)
BENCH_BLOCKS = {"roofline": "bench", "tt-step": "bench", "step-profile": "bench", "prepare": "bench"}


def bench_entries(root: Path, machine: str, key: str) -> list[dict]:
    """The benchmarks of `make bench` (results/bench/<machine>/benchmarks.json) whose extra_info holds ``key``, in file
    order (none when the set is missing)."""
    path = Path(root) / "results" / "bench" / machine / "benchmarks.json"
    if not path.exists():
        return []
    return [b for b in json.loads(path.read_text())["benchmarks"] if key in b.get("extra_info", {})]


def roofline(root: Path, machine: str) -> list[str]:
    """The TT kernel roofline of `make bench` (results/bench/<machine>/benchmarks.json): each kernel's median
    GFLOP/s over interleaved rounds, its share of the SGEMM of the same round (median and range), and, where the
    record has it, its time over its memory-aware limit (median and range) and which term bounds it."""
    table = next((b["extra_info"]["kernels"] for b in bench_entries(root, machine, "kernels")), None)
    if table is None:
        return []
    lines = ["| kernel | GFLOP/s (median of rounds) | share of the same round's SGEMM: median (range) | "
             "time / memory-aware limit: median (range), bound |", "|---|---|---|---|"]
    for name, e in table.items():
        if "GB/s" in e:  # the copy the limit's bandwidth comes from
            lines.append(f"| {name} (copy) | {e['GB/s']:.1f} GB/s | – | – |")
            continue
        limit = (f"{e['over_limit']:.2f} ({e['over_limit_min']:.2f}-{e['over_limit_max']:.2f}), {e['bound']}"
                 if "over_limit" in e else "–")
        lines.append(f"| {name} | {e['GFLOP/s']:.1f} | {e['of SGEMM']:.2f} ({e['of SGEMM min']:.2f}-"
                     f"{e['of SGEMM max']:.2f}, {e['rounds']} rounds) | {limit} |")
    return lines


def prepare_rates(root: Path, machine: str) -> list[str]:
    """`data prepare` throughput of `make bench` (benchmarks/test_prepare.py): raw MiB per second of wall time over
    the whole two-pass prepare, median of its rounds."""
    rows = bench_entries(root, machine, "file_mib")
    lines = ["| format | rows | file MiB | median s | raw MiB/s |", "|---|---|---|---|---|"]
    for b in rows:
        e, med = b["extra_info"], b["stats"]["median"]
        lines.append(f"| {e['format']} | {e['rows']:,} | {e['file_mib']:.1f} | {med:.2f} | {e['file_mib'] / med:.1f} "
                     f"|")
    return lines


def tt_step(root: Path, machine: str) -> list[str]:
    """The step benchmark of `make bench` (benchmarks/test_tt_step.py): each system's median step, its step over
    its FLOP-time at the same round's SGEMM rate, over its memory-aware limit (where the record has it) and over
    dense-fbgemm's step in the same round (median and range of the per-round ratios), per table size."""
    runs = [b["extra_info"] for b in bench_entries(root, machine, "systems")]
    if not runs:
        return []

    def ratio(e, key):
        lo, hi = e[f"{key}_range"]
        return "–" if e[key] != e[key] or lo is None else f"{e[key]:.2f} ({lo:.2f}-{hi:.2f})"

    lines = ["| rows | system | step ms (median) | step / FLOP-time | step / memory-aware limit, bound | "
             "step / dense-fbgemm step | parameters |", "|---|---|---|---|---|---|---|"]
    for run in sorted(runs, key=lambda r: r["rows"]):
        for name, e in run["systems"].items():
            limit = f"{ratio(e, 'over_limit')}, {e['bound']}" if e.get("bound", "–") != "–" else "–"
            lines.append(f"| {run['rows']:.0e} | {name} | {e['step_ms']:.0f} | {ratio(e, 'over_flop_time')} | "
                         f"{limit} | {ratio(e, 'over_dense')} | {e['param_bytes'] / 2**20:,.1f} MiB |")
    levels = [(run["rows"], run["bandwidths"], run["copy_bytes"]) for run in sorted(runs, key=lambda r: r["rows"])
              if "bandwidths" in run]
    if levels:
        lines += ["", "The limit's bandwidths (copies with source and destination in the level, median of the rounds): "
                  + "; ".join(f"{rows:.0e} rows: " + ", ".join(f"{lv} {bw[lv] / 1e9:.0f} GB/s ({size[lv] / 2**20:g} "
                                                               f"MiB copy)" for lv in bw)
                              for rows, bw, size in levels) + "."]
    return lines


def step_profile(root: Path, machine: str) -> list[str]:
    """The step profile of `make bench` (benchmarks/test_tt_step.py): per TT system and table size, one profiled
    step (the median of three by wall time): milliseconds inside the TT stage kernels, outside them, the share
    outside, and the ops that take the most of it."""
    runs = [b["extra_info"] for b in bench_entries(root, machine, "profiles")]
    lines = ["| rows | system | step ms (profiled) | in the TT kernels ms | outside ms | outside share | "
             "largest outside (self ms) |", "|---|---|---|---|---|---|---|"]
    for run in sorted(runs, key=lambda r: r["rows"]):
        for name, e in run["profiles"].items():
            top = ", ".join(f"{op} {ms:.1f}" for op, ms in e["top_outside"][:4])
            lines.append(f"| {run['rows']:.0e} | {name} | {e['step_ms']:.0f} | {e['tt_kernels_ms']:.0f} | "
                         f"{e['outside_ms']:.0f} | {e['outside_share']:.0%} | {top} |")
    return lines
