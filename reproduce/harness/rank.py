"""This worker's place in a torchrun launch. The harness reads torchrun's environment (RANK, WORLD_SIZE,
MASTER_ADDR, ...); the library gets everything as arguments. After the timed steps the ranks' measurements are
gathered to rank 0, which writes the one record: per-iteration phase times are the slowest rank's, losses the
sum of the ranks' shares, and per rank the bytes it sent and the time it was blocked in communication, per
phase and per step."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def rank_of_env() -> int | None:
    """This process's global rank under torchrun, None when not launched by it."""
    return int(os.environ["RANK"]) if "RANK" in os.environ and "WORLD_SIZE" in os.environ else None


def rank_error_path(out: str | Path, rank: int) -> Path:
    return Path(f"{out}.rank{rank}.error")


def rank_step_path(out: str | Path, rank: int) -> Path:
    """The rank's progress: the last step it began. When peers time out in a collective, the rank that is behind
    them is the one that stopped (launch.py blames it)."""
    return Path(f"{out}.rank{rank}.step")


def rank_files(out: str | Path, kind: str) -> dict[int, Path]:
    """The ``kind`` ("error" or "step") files the ranks of the run recording to ``out`` left, by rank."""
    out = Path(out)
    found = {}
    for f in out.parent.glob(f"{out.name}.rank*.{kind}"):
        rank = f.name[len(out.name) + len(".rank"):-len(kind) - 1]
        if rank.isdigit():
            found[int(rank)] = f
    return found


@dataclass
class Rank:
    ctx: Any
    comm: Any
    _sent0: dict = field(default_factory=dict)
    _blocked0: dict = field(default_factory=dict)
    progress: Path | None = None

    @staticmethod
    def join(point, out: str | Path | None = None) -> "Rank | None":
        if point.world_size == 1:
            return None
        from impls.sharding.comm import Comm
        from impls.sharding.context import DistContext

        env_world = int(os.environ.get("WORLD_SIZE", "1"))
        if rank_of_env() is None or env_world != point.world_size:
            raise ValueError(f"the point asks for world size {point.world_size} but this process was launched with "
                             f"WORLD_SIZE={os.environ.get('WORLD_SIZE')} (use `dlrmbench run --world-size`)")
        ctx = DistContext.init(int(os.environ["RANK"]), env_world, "env://", point.ranks_per_node,
                               device=point.device, timeout_s=point.dist_timeout_s)
        # a host clock sees how long a CPU rank blocks; a GPU rank's waits are stream waits it cannot see
        clock = time.perf_counter if ctx.device.type == "cpu" else None
        progress = rank_step_path(out, ctx.rank) if out else None
        return Rank(ctx, Comm(ctx, clock=clock), progress=progress)

    def at_step(self, it: int, warmup: int) -> None:
        if self.progress is not None:  # outside the timed span of the step
            self.progress.write_text(str(it))
        if it == warmup:  # the timed steps begin
            self._sent0 = dict(self.comm.sent)
            self._blocked0 = dict(self.comm.blocked_s)

    def gather(self, obj: Any) -> list[Any]:
        import torch.distributed as dist

        out = [None] * self.ctx.world_size
        dist.all_gather_object(out, obj)
        return out

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any rank (a one-float all-reduce)."""
        import torch
        import torch.distributed as dist

        t = torch.tensor([1.0 if flag else 0.0], device=self.ctx.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    def combine(self, phases, losses, memory, param_bytes, work, iters, modules):
        """Everything rank 0 records, from every rank's measurements (``modules``: the project modules each loaded,
        united)."""
        iters = max(iters, 1)  # a run that diverged before its first timed step
        sent: dict[str, dict[str, float]] = {}
        for (phase, peer), v in self.comm.sent.items():
            d = v - self._sent0.get((phase, peer), 0)
            if d:
                sent.setdefault(phase, {})[peer] = d / iters
        blocked = {ph: (v - self._blocked0.get(ph, 0.0)) * 1e3 / iters for ph, v in self.comm.blocked_s.items()}
        mine = {"phases": phases, "losses": losses, "memory": memory, "param_bytes": param_bytes, "work": work,
                "sent": sent, "blocked": blocked, "modules": modules}
        ranks = self.gather(mine)
        self.ctx.close()
        slowest = {k: [max(r["phases"][k][i] for r in ranks) for i in range(min(len(r["phases"][k]) for r in ranks))]
                   for k in phases}
        total_loss = [sum(r["losses"][i] for r in ranks) for i in range(len(losses))]
        peak = [r["memory"]["peak_rss_delta_bytes"] for r in ranks]
        worst = max(range(len(ranks)), key=lambda i: ranks[i]["memory"]["analytic"]["total"])
        mem = {**ranks[worst]["memory"], "peak_rss_delta_bytes": max(peak) if None not in peak else None,
               "per_rank_peak_rss_delta_bytes": peak, "analytic_rank": worst}
        summed = dict(ranks[0]["work"])
        for k in ("nnz", "unique", "e1", "gemms", "flops", "comm_bytes"):
            summed[k] = sum(r["work"].get(k, 0) for r in ranks)
        per_rank = [
            {"rank": i, "comm_bytes_per_step": {ph: sum(p.values()) for ph, p in r["sent"].items()},
             "comm_bytes_per_peer": r["sent"], "comm_blocked_ms": r["blocked"], "param_bytes": r["param_bytes"],
             "total_ms_median": sorted(r["phases"]["total"])[len(r["phases"]["total"]) // 2]
            if r["phases"]["total"] else None}
            for i, r in enumerate(ranks)
        ]
        dist_part = {
            "world_size": self.ctx.world_size, "ranks_per_node": self.ctx.local_world_size,
            "nodes": self.ctx.num_nodes, "backend": self.ctx.backend, "per_rank": per_rank,
            # the busiest rank's exposed communication (None: not measurable on this device) and traffic, per step
            "comm_blocked_ms": max(sum(r["blocked"].values()) for r in ranks) if self.comm.clock else None,
            "comm_bytes_per_step": max(sum(sum(p.values()) for p in r["sent"].values()) for r in ranks),
        }
        params = max(r["param_bytes"] for r in ranks)
        dist_part["param_bytes_all_ranks"] = sum(r["param_bytes"] for r in ranks)
        ran = sorted({m for r in ranks for m in r["modules"]})
        return slowest, total_loss, mem, params, summed, dist_part, ran
