"""Step time on a CPU from the work and the machine's micro-measurements (docs/methodology.md, "The work model"), with
nothing fitted to a step: every rate comes from `make bench`'s TT kernel roofline or `dlrmbench calibrate`'s profile.

A TT table's step (counts.StepModel of that table) costs
  stages   each stage's FLOPs (TTWork.stage_flops: fwd / bwd, stage 1 / stage 2) at the roofline's rate of that stage's
           kernel; stage 2's rate depends on the items per prefix (EcoRec's shape: ~1.4, the roofline's: 4), so it is
           interpolated log-linearly between the two measured shapes and held outside them
  pooling  the rows pooled into their bags forward and the bag gradients gathered back: the profile's pool line
           (index_add_ of rows, per byte) on nnz x D x 4 bytes each way
  dedup    for a system that deduplicates, the profile's dedup line (torch.unique with the inverse) per lookup
The kernels were measured at ``bench_threads``; a rank with t threads on its share of the cores runs them at
t / bench_threads of that rate (linear in threads: the stage kernels split their GEMMs over threads); the profile's
lines were measured on one thread and are divided likewise. A dense table (a baseline) costs the profile's fused
lookup (forward, and backward with its update) of its storage. The exchange costs each collective call at the
profile's line for its world size (its fixed cost plus its bytes), the AlltoAlls of EcoRec's table-group pipeline
but the first group's overlapped with compute.

A system's cost apart from its work (per step and per table: its calls, sorts, allocations and Python) is given by
the caller: reproduce/analysis/work_cpu.py measures it on tiny tables and adds it to these components.

Limits: no term for a dense table's random row access beyond the cache or its sparse update, none for ranks that
share cores, the kernels' rates are those of one table shape (the SC24 Table-1 table), and a table's work is its
expectation under the id law."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping


@dataclass(frozen=True)
class CPUProfile:
    """The rates of one machine, with their sources."""

    machine: str
    isa: str
    bench_threads: int
    stage_rates: Mapping[str, float]  # "fwd.stage1", "bwd.stage1": FLOP/s; "fwd.stage2@4", "fwd.stage2@ecorec", ...
    ecorec_items_per_prefix: float  # the shape the @ecorec stage-2 rates were measured at
    source: str
    calibration_path: str

    @classmethod
    def from_bench(cls, bench_json: Path, calibration_json: Path, machine: str) -> "CPUProfile":
        d = json.loads(Path(bench_json).read_text())
        roof = next((b for b in d["benchmarks"] if b["name"] == "test_tt_kernel_roofline"), None)
        if roof is None:
            raise ValueError(f"{bench_json}: no TT kernel roofline (make bench's test_tt_kernel_roofline)")
        info = roof["extra_info"]
        isa = info["native_isa"]
        k = info["kernels"]

        def rate(name: str) -> float:
            key = f"{name} [{isa}]"
            if key not in k:
                raise ValueError(f"{bench_json}: the roofline has no {key!r}")
            return float(k[key]["GFLOP/s"]) * 1e9

        e = info["ecorec_stage2"]
        rates = {"fwd.stage1": rate("stage1"), "bwd.stage1": rate("stage1-bwd"),
                 "fwd.stage2@4": rate("stage2"), "bwd.stage2@4": rate("stage2-bwd"),
                 "fwd.stage2@ecorec": rate("stage2@ecorec"), "bwd.stage2@ecorec": rate("stage2-bwd@ecorec")}
        return cls(machine, isa, int(info["threads"]), rates, e["items"] / e["prefixes"],
                   f"{bench_json} (make bench at {d['commit_info']['id'][:7]}, {d['datetime'][:10]})",
                   str(calibration_json))

    def to_dict(self) -> dict:
        return asdict(self)

    def stage2_rate(self, phase: str, items_per_prefix: float) -> float:
        lo, hi = self.ecorec_items_per_prefix, 4.0
        x = min(max(items_per_prefix, lo), hi)
        a, b = self.stage_rates[f"{phase}.stage2@ecorec"], self.stage_rates[f"{phase}.stage2@4"]
        w = math.log(x / lo) / math.log(hi / lo)
        return math.exp((1 - w) * math.log(a) + w * math.log(b))


def table_seconds(step, shape, dim: int, dedups: bool, prof: CPUProfile, calib, threads: float) -> dict[str, float]:
    """The components of one TT table's step (counts.StepModel) on ``threads`` threads."""
    w = step.work
    out = {"stages": 0.0}
    for phase in ("fwd", "bwd"):
        s1 = w.stage_flops.get(f"{phase}.stage1", 0)
        s2 = w.stage_flops.get(f"{phase}.stage2", 0)
        items = w.stage_gemms.get(f"{phase}.stage2", 0) / (2 if phase == "bwd" else 1)
        groups = w.stage_gemms.get(f"{phase}.stage1", 0) / max(1, shape.d - 2)
        ipp = items / groups if groups else 4.0
        out["stages"] += (s1 / prof.stage_rates[f"{phase}.stage1"] + (s2 / prof.stage2_rate(phase, ipp) if s2 else 0.0)
                          ) * prof.bench_threads / threads
    out["pooling"] = 2 * calib.pool.at(w.nnz * dim * 4) / threads
    out["dedup"] = calib.dedup.at(w.nnz) / threads if dedups else 0.0
    return out


def dense_seconds(storage: str, bags: float, keys: float, unique: float, dim: int, calib, threads: float) -> float:
    """One dense table's fused lookup forward and backward (with its update) in ``storage`` ("dense": PyTorch's
    EmbeddingBag, "fbgemm": the TBE kernel), from the profile."""
    look = calib.lookup[storage]
    feats = (bags, keys, unique, keys * dim * 4, unique * dim * 4, bags * dim * 4)
    return (look["fwd"].at(*feats) + look["bwd"].at(*feats)) / threads


def exchange_seconds(ex, calls: Mapping[str, int], calib, world: int, rank: int, hidden: frozenset = frozenset(),
                     hidden_share: float = 0.0) -> float:
    """The collectives of ``rank`` in one step: per phase its calls, each at the profile's line for its share of the
    phase's bytes (all_reduce for the ring phases, all_to_all for the rest); a phase in ``hidden`` is exposed only
    for ``1 - hidden_share`` of it."""
    total = 0.0
    for phase, sent in ex.sent.items():
        n = calls.get(phase, 1)
        ring = phase in ex.ring_bytes
        x = float(sent[rank]) / n * (world / (2 * (world - 1)) if ring else 1.0)  # a ring: the tensor's bytes
        s = n * calib.collective_s("all_reduce" if ring else "all_to_all", world, x)
        total += s * (1 - hidden_share) if phase in hidden else s
    return total
