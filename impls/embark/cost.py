"""EMBark's cost model (the one of HugeCTR's embedding-collection sharding planner), with hardware specs (HARDWARE).

Costs are in element-access units of device memory: a bucket (a GPU, or a node when hierarchical) pays
  compute  w_s * B * sum_t h_t * d'_t / r_t      (B the global batch: a shard serves every sample's keys)
  comm     rho * B * sum_t d'_t                  (rho = memory bandwidth / per-GPU network bandwidth)
for its RB shards; hierarchical: compute / L and comm * 1.5 / L. The objective is the largest bucket cost under
a memory cap on sum rows * d' * bytes-per-element (4 for SGD, 8 with Adagrad's accumulator).

Beyond the published planner (which leaves DP and UB tables uncosted), every bucket also pays
  DP  w_s * b * sum h_t d_t (local lookups) + rho * 2 (G-1)/G * sum V_t d_t (the dense wgrad all-reduce)
  UB  w_s * B * sum h_t d_t u_t / G + rho * b * sum h_t d_t u_t (unique vectors; u_t the unique fraction of a
      local batch: fixed, or the Zipf expectation)
so a whole plan has a predicted step time: cost * element bytes / memory bandwidth."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

from impls.api import TableSpec
from impls.core.tt import DEFAULT_RANK
from impls.data.zipf import expected_unique
from impls.embark.shards import Cluster, Plan


@dataclass(frozen=True)
class Hardware:
    name: str
    gpus_per_node: int
    mem_bw: float  # bytes/s of device memory (HBM; DRAM for a CPU rank)
    intra_bw: float  # bytes/s per GPU inside a node (NVLink; shared memory for CPU processes)
    inter_bw: float  # bytes/s per GPU across nodes (one NIC per GPU)
    mem_cap: float  # bytes per GPU for embeddings (HugeCTR's cap is in GiB)
    source: str = ""
    flops: float = 0.0  # fp32 FLOP/s of small GEMMs (TT shards' lookups)

    def rho(self, num_nodes: int) -> float:
        """Memory / network bandwidth ratio of a flat all-to-all: the NIC once there is more than one node."""
        return self.mem_bw / (self.inter_bw if num_nodes > 1 else self.intra_bw)


HARDWARE = {
    # DGX H100: 8 H100 SXM (3.35 TB/s HBM3, 80 GB), NVLink 4 900 GB/s bidirectional (450 per direction), 8 x 400
    # Gb/s InfiniBand NDR (50 GB/s per GPU); 60 GiB of each GPU for embeddings (HugeCTR's default cap)
    "dgx-h100": Hardware("dgx-h100", 8, 3.35e12, 450e9, 50e9, 60 * 2**30, "DGX H100 spec sheets", 67e12),
    # DGX A100 80GB: 2.04 TB/s HBM2e, NVLink 3 600 GB/s bidirectional, 8 x 200 Gb/s HDR (25 GB/s per GPU)
    "dgx-a100": Hardware("dgx-a100", 8, 2.04e12, 300e9, 25e9, 60 * 2**30, "DGX A100 spec sheets", 19.5e12),
    # this project's 2-core VM, gloo ranks in one host, measured by `dlrmbench calibrate` (2026-11-29): a 256 MB
    # copy moves 17.6 GB/s (read + write), one rank of a 2- / 4-process gloo all_to_all sends 0.70 / 0.73 GB/s;
    # memory for embeddings capped at 4 GiB per rank; TT stage-1 kernels ran 63 GFLOP/s on 2 threads (make bench)
    "cpu-gloo": Hardware("cpu-gloo", 4, 17.6e9, 0.72e9, 0.72e9, 4 * 2**30, "measured here (dlrmbench calibrate)", 30e9),
}


@dataclass(frozen=True)
class CostModel:
    hw: Hardware
    world_size: int
    gpus_per_node: int
    batch_size: int  # global batch B
    w_s: float = 4.0  # mem_comm_work_ratio
    rho: float | None = None  # default: the hardware's ratio for this many nodes
    optimizer_bytes: int = 4  # per element: 4 (SGD) or 8 (Adagrad)
    elem_bytes: int = 4  # payload element (2 with fp16 communication)
    alpha: float = 1.1  # id popularity (EMBark's synthetic workloads: Zipf 1.1) for the expected unique ratios
    unique_ratio: float | None = None  # fixed unique keys per lookup (HugeCTR's DENSE_UNIQUE_RATIO 0.3), or None
    # for the Zipf expectation of each table at the local batch
    hierarchical: bool = False
    mem_cap: float | None = None  # default: the hardware's
    storage: str = "dense"  # "tt": RB shards are ecorec TT tables (parameters of the TT cores, GEMM work)
    tt_ranks: int = DEFAULT_RANK

    @property
    def num_nodes(self) -> int:
        return self.world_size // self.gpus_per_node

    @property
    def ratio(self) -> float:
        return self.rho if self.rho is not None else self.hw.rho(self.num_nodes)

    @property
    def cap(self) -> float:
        return self.mem_cap if self.mem_cap is not None else self.hw.mem_cap

    @property
    def num_buckets(self) -> int:
        return self.num_nodes if self.hierarchical else self.world_size

    def _tt(self, t: TableSpec, r: int, c: int):
        from impls.core.tt import TTShape

        return TTShape.create(max(2, -(-t.num_embeddings // r)), t.dim // c, self.tt_ranks)

    def shard_cost(self, t: TableSpec, r: int, c: int) -> tuple[float, float]:
        """(compute, comm) of one RB shard of table t split r x c, in its bucket. A TT shard's lookup costs its
        two GEMM stages (prefix + last FLOPs, an upper bound: EcoRec reuses prefixes) at the hardware's FLOP rate,
        expressed in the same memory-access units."""
        d = t.dim / c
        per_lookup = d
        if self.storage == "tt":
            if not self.hw.flops:
                raise ValueError(f"hardware {self.hw.name!r} has no FLOP rate for TT storage")
            s = self._tt(t, r, c)
            per_lookup = (s.prefix_flops() + s.last_flops()) * self.hw.mem_bw / (self.hw.flops * self.elem_bytes)
        comp, comm = self.w_s * self.batch_size * t.hotness * per_lookup / r, self.ratio * self.batch_size * d
        if self.hierarchical:
            comp, comm = comp / self.gpus_per_node, 1.5 * comm / self.gpus_per_node
        return comp, comm

    def shard_bytes(self, t: TableSpec, r: int, c: int) -> float:
        """A shard's parameter (and optimizer state) bytes: V / r rows of d' (HugeCTR's cost model: the mean
        row count, not the largest shard's)."""
        if self.storage == "tt":
            return self._tt(t, r, c).num_params * self.optimizer_bytes
        return t.num_embeddings / r * (t.dim / c) * self.optimizer_bytes

    def bucket_cap(self) -> float:
        return self.cap * (self.gpus_per_node if self.hierarchical else 1)

    def unique_fraction(self, t: TableSpec) -> float:
        """Distinct ids per lookup of table t in one GPU's local batch."""
        if self.unique_ratio is not None:
            return self.unique_ratio
        n = self.batch_size / self.world_size * t.hotness
        return expected_unique(t.num_embeddings, n, self.alpha) / n if n > 0 else 1.0

    def shared_cost(self, tables: Sequence[TableSpec], dp: Sequence[int], ub: Sequence[int]) -> float:
        """What every bucket pays for the DP and UB clusters (the same everywhere)."""
        G, B = self.world_size, self.batch_size
        b = B / G
        cost = 0.0
        for i in dp:
            t = tables[i]
            cost += self.w_s * b * t.hotness * t.dim + self.ratio * 2 * (G - 1) / G * t.num_embeddings * t.dim
        for i in ub:
            t = tables[i]
            u = t.hotness * t.dim * self.unique_fraction(t)
            cost += self.w_s * B * u / G + self.ratio * b * u
        return cost

    def shared_bytes(self, tables: Sequence[TableSpec], dp: Sequence[int], ub: Sequence[int]) -> float:
        G = self.world_size
        full = sum(tables[i].num_embeddings * tables[i].dim for i in dp)
        part = sum(tables[i].num_embeddings * tables[i].dim / G for i in ub)
        return (full + part) * self.optimizer_bytes

    def seconds(self, cost: float) -> float:
        return cost * self.elem_bytes / self.hw.mem_bw


@dataclass
class Evaluation:
    """A plan under a cost model: per bucket (compute, comm, bytes), the max, and the predicted step time."""

    comp: list[float]
    comm: list[float]
    bytes: list[float]
    shared: float
    max_cost: float
    oom: bool
    step_s: float


def evaluate(plan: Plan, tables: Sequence[TableSpec], model: CostModel) -> Evaluation:
    """Costs of ``plan``, with the plan's own communication scheme (flat, or hierarchical by node)."""
    if plan.hierarchical != model.hierarchical:
        model = dataclasses.replace(model, hierarchical=plan.hierarchical)
    n = model.num_buckets
    comp, comm, mem = [0.0] * n, [0.0] * n, [0.0] * n
    ub = [p.table for p in plan.mp if p.cluster is Cluster.UB]
    for p in plan.mp:
        if p.cluster is Cluster.UB:
            continue
        t = tables[p.table]
        for k in range(p.c):
            group = p.gpus[k * p.r : (k + 1) * p.r]
            # hierarchical: a node's GPUs of the group form one node shard (r counts nodes)
            buckets = sorted({g // model.gpus_per_node for g in group}) if model.hierarchical else list(group)
            a, b = model.shard_cost(t, len(buckets), p.c)
            for bk in buckets:
                comp[bk] += a
                comm[bk] += b
                mem[bk] += model.shard_bytes(t, len(buckets), p.c)
    shared = model.shared_cost(tables, plan.dp, ub)
    shared_mem = model.shared_bytes(tables, plan.dp, ub) * (model.gpus_per_node if model.hierarchical else 1)
    mem = [m + shared_mem for m in mem]
    worst = max(c + m for c, m in zip(comp, comm)) + shared
    return Evaluation(comp, comm, mem, shared, worst, max(mem) > model.bucket_cap(), model.seconds(worst))
