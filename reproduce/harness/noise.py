"""The noise probe: before (and after) a sweep, a fixed SGEMM timed several times and the load average, recorded
beside the records (results/<experiment>/<machine>/noise/). A shared machine whose SGEMM rate moves by 20 % between
runs cannot resolve a 10 % difference between two systems; the report says so."""
from __future__ import annotations

import datetime
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from reproduce.harness.records import write_json

NOISE_DIR = "noise"


def probe(size: int = 2048, runs: int = 7, threads: int | None = None, warmup: int = 2) -> dict[str, Any]:
    """Time ``runs`` SGEMMs of ``size``^3 (after ``warmup`` untimed ones) on the first GPU when there is one, else on
    ``threads`` threads (default: all cores of this process); the rates, their median and relative spread
    ((max - min) / median), and the load average."""
    import torch

    from reproduce.harness.machine import cores

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    before = torch.get_num_threads()
    torch.set_num_threads(threads or cores())
    try:
        a = torch.randn(size, size, generator=torch.Generator().manual_seed(0)).to(device)
        b = torch.randn(size, size, generator=torch.Generator().manual_seed(1)).to(device)
        for _ in range(warmup):
            torch.mm(a, b)
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


def record_probe(out_dir: Path, stage: str, **kw) -> Path:
    """Run the probe and write it to ``out_dir/noise/<time>-<stage>.json`` (stage: before / after)."""
    p = probe(**kw)
    p["stage"] = stage
    stamp = p["when"].replace(":", "").replace("+0000", "Z")
    return write_json(Path(out_dir) / NOISE_DIR / f"{stamp}-{stage}.json", p)


def load_probes(out_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(f.read_text()) for f in sorted((Path(out_dir) / NOISE_DIR).glob("*.json"))]


def noise_level(probes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the probes of a result set say: the largest relative spread within one probe, the spread of the probes'
    medians across the sweep (drift), and the highest load average over the cores (1 = every core busy)."""
    if not probes:
        return None
    meds = [p["gflops_median"] for p in probes]
    loads = [p["loadavg"][0] / p["cores"] for p in probes if p.get("loadavg")]
    drift = (max(meds) - min(meds)) / statistics.median(meds) if len(meds) > 1 else 0.0
    return {
        "probes": len(probes),
        "gflops_median": statistics.median(meds),
        "within": max(p["spread"] for p in probes),
        "drift": drift,
        "noise": max(max(p["spread"] for p in probes), drift),
        "load_per_core": max(loads) if loads else None,
    }
