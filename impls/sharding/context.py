"""The distributed context every sharded layer runs in: rank, world size, ranks per node L and the process
groups EMBark-style hierarchical communication needs (global; intra-node: the L ranks of one node; rails: the
ranks with the same local rank on every node), gloo on CPU and NCCL on GPU, and a timeout on every
collective so a dead rank ends the run with an error instead of a hang.

Library code reads no environment: the launcher (reproduce/, torchrun's variables) passes everything in."""
from __future__ import annotations

import datetime
from dataclasses import dataclass, field

import torch
import torch.distributed as dist


@dataclass
class DistContext:
    rank: int
    world_size: int
    local_world_size: int  # L, ranks per node
    backend: str
    device: torch.device
    timeout_s: float
    group: object = None  # the global group (None = the default group)
    intra: object = None  # this rank's node
    rails: object = None  # this rank's rail: same local rank on every node
    _owns: bool = field(default=False, repr=False)

    @property
    def node(self) -> int:
        return self.rank // self.local_world_size

    @property
    def local_rank(self) -> int:
        return self.rank % self.local_world_size

    @property
    def num_nodes(self) -> int:
        return self.world_size // self.local_world_size

    @staticmethod
    def init(rank: int, world_size: int, init_method: str, local_world_size: int | None = None,
             backend: str | None = None, device: str | torch.device | None = None,
             timeout_s: float = 300.0) -> "DistContext":
        """Join the process group (``init_method``: "env://", "tcp://host:port" or "file:///path") and build
        the node and rail groups. Every rank must call it with the same world size and L."""
        L = local_world_size or world_size
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in a world of {world_size}")
        if world_size % L:
            raise ValueError(f"world size {world_size} is not a whole number of nodes of {L} ranks")
        if timeout_s <= 0:
            raise ValueError(f"timeout must be > 0 s, got {timeout_s}")
        dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        backend = backend or ("nccl" if dev.type == "cuda" else "gloo")
        if dev.type == "cuda":
            torch.cuda.set_device(rank % L)
            dev = torch.device("cuda", rank % L)
        dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=timeout_s))
        ctx = DistContext(rank, world_size, L, backend, dev, timeout_s, _owns=True)
        # every rank creates every group, in the same order
        for n in range(world_size // L):
            g = dist.new_group(list(range(n * L, (n + 1) * L)))
            if n == ctx.node:
                ctx.intra = g
        for lr in range(L):
            g = dist.new_group(list(range(lr, world_size, L)))
            if lr == ctx.local_rank:
                ctx.rails = g
        return ctx

    def close(self) -> None:
        if self._owns and dist.is_initialized():
            dist.destroy_process_group()
            self._owns = False
