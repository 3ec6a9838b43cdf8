"""Collectives with byte accounting and async handles. Every call records what this rank sends, per peer
and phase: exact for all_to_all and send; for all_reduce / reduce_scatter / all_gather the ring algorithm's
volume, 2(G-1)/G, (G-1)/G and (G-1)/G of the buffer, under the peer "ring". Calls return the backend's work
handle when ``async_op`` so communication can overlap compute; ``wait`` finishes one.

The library never reads a clock of its own: the harness may hand ``Comm`` one (``clock``, seconds), and then
the time this rank spends blocked in each phase (a blocking call, or ``wait`` on a handle) is accumulated in
``blocked_s``: the communication that compute did not hide."""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Sequence

import torch
import torch.distributed as dist
from torch import Tensor

from impls.sharding.context import DistContext


class Comm:
    def __init__(self, ctx: DistContext, clock: Callable[[], float] | None = None) -> None:
        self.ctx = ctx
        self.clock = clock
        self.sent: dict[tuple[str, str], int] = defaultdict(int)  # (phase, peer) -> bytes sent by this rank
        self.blocked_s: dict[str, float] = defaultdict(float)  # phase -> seconds blocked (with a clock)

    def _blocking(self, phase: str, call: Callable[[], Any], async_op: bool):
        if async_op or self.clock is None:
            return call()
        t0 = self.clock()
        out = call()
        self.blocked_s[phase] += self.clock() - t0
        return out

    def wait(self, handle, phase: str) -> None:
        """Finish an async call (None: it was synchronous), counting the time blocked under ``phase``."""
        if handle is None:
            return
        self._blocking(phase, handle.wait, False)

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        """``obj`` of rank ``src`` on every rank (a plan, statistics): small, not counted."""
        box = [obj]
        dist.broadcast_object_list(box, src=src)
        return box[0]

    def all_gather_object(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order, on every rank (shards of a table for a test oracle): not counted."""
        out: list[Any] = [None] * self.ctx.world_size
        dist.all_gather_object(out, obj, group=self.ctx.group)
        return out

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
        return self._blocking(phase, lambda: dist.all_to_all_single(
            out, inp, None if out_splits is None else list(out_splits), None if in_splits is None else list(in_splits),
            group=group, async_op=async_op), async_op)

    def all_reduce(self, t: Tensor, phase: str, group=None, async_op: bool = False):
        G = dist.get_world_size(group)
        self._count(phase, "ring", 2 * (G - 1) * t.numel() * t.element_size() // G)
        return self._blocking(phase, lambda: dist.all_reduce(t, group=group, async_op=async_op), async_op)

    def all_reduce_coalesced(self, tensors: Sequence[Tensor], phase: str, group=None) -> list[Tensor]:
        """Sum every tensor over the ranks in ONE all-reduce of their concatenation; returns the sums, shaped
        as given (views of the flat buffer)."""
        flat = torch.cat([t.reshape(-1) for t in tensors])
        self.all_reduce(flat, phase, group=group)
        return [part.view_as(t) for t, part in zip(tensors, torch.split(flat, [t.numel() for t in tensors]))]

    def reduce_scatter(self, out: Tensor, inp: Tensor, phase: str, group=None, async_op: bool = False):
        G = dist.get_world_size(group)
        self._count(phase, "ring", (G - 1) * inp.numel() * inp.element_size() // G)
        return self._blocking(
            phase, lambda: dist.reduce_scatter_tensor(out, inp, group=group, async_op=async_op), async_op)

    def all_gather(self, out: Tensor, inp: Tensor, phase: str, group=None, async_op: bool = False):
        G = dist.get_world_size(group)
        self._count(phase, "ring", (G - 1) * inp.numel() * inp.element_size())
        return self._blocking(
            phase, lambda: dist.all_gather_into_tensor(out, inp, group=group, async_op=async_op), async_op)

    def send(self, t: Tensor, peer: int, phase: str, group=None):
        self._count(phase, str(peer), t.numel() * t.element_size())
        return dist.isend(t, peer, group=group)

    def recv(self, t: Tensor, peer: int, group=None):
        return dist.irecv(t, peer, group=group)
