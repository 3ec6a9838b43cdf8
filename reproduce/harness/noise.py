"""The noise probe: before, between the rounds of and after a sweep, a fixed SGEMM timed several times and the load
average, recorded beside the records (results/<experiment>/<machine>/noise/). A shared machine whose SGEMM rate moves
by 20 % between runs cannot resolve a 10 % difference between two systems; the report says so.

On a CPU the probe also times fixed work back to back on each core in turn (pinned), once work that stays in the
core's cache (a small SGEMM) and once work that reads memory (a gather of random rows from a table larger than the
last-level cache), and reports how far the medians of short windows of it move: the drift a run of a few seconds
sees from the machine alone. A VM whose cores share their caches, memory or sibling threads with other tenants shows
it in this drift, not in steal time, so per-process CPU time does not remove it."""
from __future__ import annotations

import datetime
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from reproduce.harness.record_store import write_json

NOISE_DIR = "noise"


def probe(size: int = 2048, runs: int = 7, threads: int | None = None, warmup: int = 2,
          warmup_s: float = 0.5) -> dict[str, Any]:
    """Time ``runs`` SGEMMs of ``size``^3 (after ``warmup`` untimed ones, and at least ``warmup_s`` of them: a process's
    first SGEMMs ramp up - its thread pool, the pages of the operands, the cores' clocks - by a fifth and more on some
    machines) on the first GPU when there is one, else on ``threads`` threads (default: all cores of this process);
    the rates, their median and relative spread ((max - min) / median), and the load average."""
    import torch

    from reproduce.harness.machine import cores

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    before = torch.get_num_threads()
    torch.set_num_threads(threads or cores())
    try:
        a = torch.randn(size, size, generator=torch.Generator().manual_seed(0)).to(device)
        b = torch.randn(size, size, generator=torch.Generator().manual_seed(1)).to(device)
        warm_until = time.perf_counter() + warmup_s
        done = 0
        while done < warmup or time.perf_counter() < warm_until:
            torch.mm(a, b)
            done += 1
        sync()
        rates = []
        for _ in range(runs):
            sync()
            t0 = time.perf_counter()
            torch.mm(a, b)
            sync()
            rates.append(2 * size**3 / (time.perf_counter() - t0) / 1e9)
    finally:
        torch.set_num_threads(before)
    med = statistics.median(rates)
    return {
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": str(device),
        "sgemm_size": size,
        "threads": threads or cores(),
        "gflops": rates,
        "gflops_median": med,
        "spread": (max(rates) - min(rates)) / med,
        "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "cores": cores(),
    }


WINDOW_S = 0.25
MIN_SAMPLES = 3  # per window
WORK = ("compute", "memory")


def _work(kind: str):
    import torch

    g = torch.Generator().manual_seed(2)
    if kind == "compute":  # ~2 ms of SGEMM whose operands stay in a core's own cache
        a, b = torch.randn(192, 192, generator=g), torch.randn(192, 192, generator=g)

        def run() -> None:
            for _ in range(40):
                torch.mm(a, b)
        return run
    table = torch.randn(2_000_000, 32, generator=g)  # 256 MB: past the last-level cache of the machines we meet
    idx = torch.randint(0, table.shape[0], (32_768,), generator=g)
    return lambda: table.index_select(0, idx)


def window_drift(seconds: float = 2.0, window_s: float = WINDOW_S) -> dict[str, Any] | None:
    """Per core and kind of work (``WORK``), fixed work timed back to back for ``seconds`` with this process pinned
    to that core; the medians of ``window_s`` windows and their spread (max / min - 1). None where the OS gives no
    affinity (not Linux). Windows of fewer than ``MIN_SAMPLES`` samples are left out, and samples over 5x the median
    are counted as ``stalls``. The process's affinity and thread count are restored."""
    import torch

    if not hasattr(os, "sched_setaffinity"):
        return None
    mask, threads = os.sched_getaffinity(0), torch.get_num_threads()
    out: dict[str, Any] = {"seconds": seconds, "window_s": window_s, "cores": {}}
    torch.set_num_threads(1)
    try:
        works = {kind: _work(kind) for kind in WORK}
        for core in sorted(mask):
            os.sched_setaffinity(0, {core})
            per = {}
            for kind, run in works.items():
                run()
                t_start, samples = time.perf_counter(), []
                while (now := time.perf_counter()) - t_start < seconds:
                    run()
                    samples.append((now - t_start, time.perf_counter() - now))
                windows: dict[int, list[float]] = {}
                for t, dt in samples:
                    windows.setdefault(int(t / window_s), []).append(dt)
                # a window needs a few samples for its median; a sample stalled past 5x the median (the core taken
                # away for a while) is counted apart: a stall, not the drift of the core's speed
                meds = [statistics.median(v) * 1e3 for v in windows.values() if len(v) >= MIN_SAMPLES]
                typical = statistics.median(dt for _, dt in samples)
                per[kind] = {"window_ms": meds, "spread": max(meds) / min(meds) - 1 if meds else 0.0,
                             "samples": len(samples), "stalls": sum(dt > 5 * typical for _, dt in samples)}
            out["cores"][str(core)] = per
    finally:
        os.sched_setaffinity(0, mask)
        torch.set_num_threads(threads)
    out["spread"] = {kind: max(c[kind]["spread"] for c in out["cores"].values()) for kind in WORK}
    return out


def record_probe(out_dir: Path, stage: str, window_s: float = 2.0, **kw) -> Path:
    """Run the probe (and on a CPU the window drift, ``window_s`` seconds per core and kind of work) and write it to
    ``out_dir/noise/<time>-<stage>.json`` (stage: before / after)."""
    p = probe(**kw)
    p["stage"] = stage
    if p["device"] == "cpu":
        p["windows"] = window_drift(window_s)
    stamp = p["when"].replace(":", "").replace("+0000", "Z")
    return write_json(Path(out_dir) / NOISE_DIR / f"{stamp}-{stage}.json", p)


def load_probes(out_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(f.read_text()) for f in sorted((Path(out_dir) / NOISE_DIR).glob("*.json"))]


def noise_level(probes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the probes of a result set say: the largest relative spread within one probe, the spread of the probes'
    medians across the sweep (drift), the highest load average over the cores (1 = every core busy), and per kind of
    fixed work the largest spread between short windows on one core (``window``, None for probes without it)."""
    if not probes:
        return None
    meds = [p["gflops_median"] for p in probes]
    loads = [p["loadavg"][0] / p["cores"] for p in probes if p.get("loadavg")]
    drift = (max(meds) - min(meds)) / statistics.median(meds) if len(meds) > 1 else 0.0
    # windows written before a window needed MIN_SAMPLES samples (no sample counts) let one stalled sample pass as
    # a window's median: left out
    windows = [w for p in probes if (w := p.get("windows")) and all(
        "samples" in per for c in w["cores"].values() for per in c.values())]
    return {
        "probes": len(probes),
        "gflops_median": statistics.median(meds),
        "within": max(p["spread"] for p in probes),
        "drift": drift,
        "noise": max(max(p["spread"] for p in probes), drift),
        "load_per_core": max(loads) if loads else None,
        "window": {kind: max(w["spread"][kind] for w in windows) for kind in WORK} if windows else None,
    }


# a single run or train command: the machine is called busy when, before the runs, the load average over the last
# minute exceeded this many runnable processes per core, or when a fixed SGEMM's rate moved by more than BUSY_SPREAD
# within the probe before or after the runs or between them
BUSY_LOAD, BUSY_SPREAD = 0.75, 0.25


def busy_machine(before: dict[str, Any], after: dict[str, Any] | None) -> str | None:
    """Why the step times measured between two probes (``probe`` before and after a command's runs) cannot be
    trusted, in words, or None on a quiet machine. Only ``before``'s load average counts: by ``after`` the runs'
    own work is in it."""
    reasons = []
    load = before["loadavg"][0] / before["cores"] if before.get("loadavg") else None  # as noise_level counts it
    if load is not None and load > BUSY_LOAD:
        reasons.append(f"{before['loadavg'][0]:.1f} processes were runnable on average over the minute before "
                       f"(load {load:.2f} per core)")
    probes = [before] + ([after] if after else [])
    within = max(p["spread"] for p in probes)
    if within > BUSY_SPREAD:
        reasons.append(f"a fixed SGEMM's rate moved by {within:.0%} within one probe")
    if after:
        meds = before["gflops_median"], after["gflops_median"]
        drift = abs(meds[0] - meds[1]) / min(meds)
        if drift > BUSY_SPREAD:
            reasons.append(f"its rate moved by {drift:.0%} from before the runs to after them "
                           f"({meds[0]:.0f} -> {meds[1]:.0f} GFLOP/s)")
    return "; ".join(reasons) or None
