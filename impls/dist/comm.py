"""Collectives with byte accounting and async handles. Every call records what this rank sends, per peer
and phase: exact for all_to_all and send; for all_reduce / reduce_scatter / all_gather the ring algorithm's
volume, 2(G-1)/G, (G-1)/G and (G-1)/G of the buffer, under the peer "ring". Calls return the backend's work
handle when ``async_op`` so communication can overlap compute."""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import torch
import torch.distributed as dist
from torch import Tensor

from impls.dist.context import DistContext


class Comm:
    def __init__(self, ctx: DistContext) -> None:
        self.ctx = ctx
        self.sent: dict[tuple[str, str], int] = defaultdict(int)  # (phase, peer) -> bytes sent by this rank

    def _count(self, phase: str, peer: str, nbytes: int) -> None:
        self.sent[(phase, peer)] += int(nbytes)

    def bytes(self, phase: str | None = None) -> int:
        return sum(v for (ph, _), v in self.sent.items() if phase is None or ph == phase)

    def all_to_all(self, out: Tensor, inp: Tensor, out_splits: Sequence[int] | None, in_splits: Sequence[int] | None,
                   phase: str, group=None, async_op: bool = False):
        """all_to_all_single along dim 0 with row splits (None = equal)."""
        G = dist.get_world_size(group)
        rows = list(in_splits) if in_splits is not None else [inp.shape[0] // G] * G
        row_bytes = inp[0].numel() * inp.element_size() if inp.shape[0] else 0
        me = dist.get_rank(group)
        for peer, n in enumerate(rows):
            if peer != me:
                self._count(phase, str(peer), n * row_bytes)
        return dist.all_to_all_single(out, inp, None if out_splits is None else list(out_splits),
                                      None if in_splits is None else list(in_splits), group=group, async_op=async_op)

    def all_reduce(self, t: Tensor, phase: str, group=None, async_op: bool = False):
        G = dist.get_world_size(group)
        self._count(phase, "ring", 2 * (G - 1) * t.numel() * t.element_size() // G)
        return dist.all_reduce(t, group=group, async_op=async_op)

    def reduce_scatter(self, out: Tensor, inp: Tensor, phase: str, group=None, async_op: bool = False):
        G = dist.get_world_size(group)
        self._count(phase, "ring", (G - 1) * inp.numel() * inp.element_size() // G)
        return dist.reduce_scatter_tensor(out, inp, group=group, async_op=async_op)

    def all_gather(self, out: Tensor, inp: Tensor, phase: str, group=None, async_op: bool = False):
        G = dist.get_world_size(group)
        self._count(phase, "ring", (G - 1) * inp.numel() * inp.element_size())
        return dist.all_gather_into_tensor(out, inp, group=group, async_op=async_op)

    def send(self, t: Tensor, peer: int, phase: str, group=None):
        self._count(phase, str(peer), t.numel() * t.element_size())
        return dist.isend(t, peer, group=group)

    def recv(self, t: Tensor, peer: int, group=None):
        return dist.irecv(t, peer, group=group)
