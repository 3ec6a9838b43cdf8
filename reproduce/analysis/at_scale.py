"""The claims table's column "modelled at the paper's scale": each claim's value from the work model
(results/work_model, `dlrmbench model work`) at the paper's own setting, with the error the model was validated to
there, or "not validated" and why. A claim says in claims.toml (``[claim.at_scale]``) what the work model would
quote for it:

kind "time"     a time or speedup (``ratio`` of fig11_ratios.csv at ``batch``, or a speedup at ``world_size`` GPUs): quoted
                only when the GPU time model met its targets on the artifact's Figure 11 (fit.json's verdict)
     "embark"   EMBark's time at scale: its step time is HugeCTR's cost model, which no GPU measurement checks
     "memory"   a memory saving at ``world_size`` GPUs (scale_ratios.csv's ``column``): counted bytes (parameters,
                optimizer state, gradient buffers, the plans' live intermediates), with the error of the peak-memory
                model built on those counts against our systems' measured peaks (work_memory.py, on the reference
                machine)
     "table1"   the growth of FBTT's modeled peak between the Table 1 batches (table1_memory.csv)
     "analytic" parameter counts: the measured value is exact, at any scale
     "none"     nothing at scale to model (``reason``)"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

OUT = Path("results") / "work_model"


def _verdict(root: Path) -> dict | None:
    path = root / OUT / "fit.json"
    return json.loads(path.read_text())["verdict"] if path.exists() else None


def _memory_error(root: Path) -> str:
    """What the counted bytes are worth: the peak-memory model built on them against our own measured peaks."""
    from reproduce.harness.machine import reference_machine

    machine = reference_machine(root / "results")
    path = root / OUT / str(machine) / "memory_fit.json"
    if machine is None or not path.exists():
        return "counted bytes; the peak-memory model is not validated here (no memory_fit.json)"
    j = json.loads(path.read_text())
    met = "met" if j["within"] else "not met"
    return (f"counted bytes, equal to the runs' memory reports; the peak-memory model on them is within "
            f"{j['worst']:.1%} of every measured peak of {machine}'s table_size and sc24_table1, target "
            f"{j['target']:.0%} {met}; a GPU's own allocator and workspace are not modeled")


def at_scale(c: dict, root: Path) -> str:
    spec = c.get("at_scale")
    if spec is None:
        return "–"
    kind = spec["kind"]
    v = _verdict(root)
    if kind == "none":
        return f"not modeled: {spec['reason']}"
    if kind == "analytic":
        return "as measured (parameter counts are exact at any scale)"
    if v is None:
        return "not validated (no work model output: `dlrmbench model work`)"
    if kind == "embark":
        return ("not validated: EMBark's step time at scale is HugeCTR's cost model, which no GPU measurement here "
                "checks" + (f"; {spec['note']}" if spec.get("note") else ""))
    if kind == "time":
        if not (v["gpu_points_within"] and v["gpu_ratios_within"] and v["gpu_order_right"]):
            return (f"not validated: the GPU time model missed its Figure 11 targets (worst predicted point "
                    f"{v['gpu_worst_point']:.0%}, worst ratio {v['gpu_worst_ratio']:.0%}, against 30 %), so no modeled "
                    f"GPU time or speedup is quoted" + (f"; {spec['note']}" if spec.get("note") else ""))
        r = pd.read_csv(root / OUT / "fig11_ratios.csv")
        x = r[(r["ratio"] == spec["ratio"]) & (r["batch"] == spec["batch"])].iloc[0]
        return f"{x['predicted']:.2f} (validated within {v['gpu_worst_ratio']:.0%} on Figure 11's ratios)"
    if kind == "memory":
        r = pd.read_csv(root / OUT / "scale_ratios.csv").set_index("world_size")
        value = float(r.loc[int(spec["world_size"]), spec["column"]])
        return f"{value:.1%} at {spec['world_size']} GPUs on {spec['workload']} ({_memory_error(root)})"
    if kind == "table1":
        m = pd.read_csv(root / OUT / "table1_memory.csv")
        f = m[m["system"] == "fbtt"].sort_values("batch")
        growth = f["modeled_gib"].iloc[-1] / f["modeled_gib"].iloc[0]
        return (f"{growth:.2f} (FBTT's modeled peak, batch {f['batch'].iloc[0]:,} to {f['batch'].iloc[-1]:,}; within "
                f"{v['memory_worst']:.1%} of the artifact's Table 1)")
    raise ValueError(f"claim {c['id']!r}: unknown at_scale kind {kind!r}")
