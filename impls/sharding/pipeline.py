"""The pooled-output exchange of table-wise sharding, cut into stages that pipeline compute with communication.

A stage is one local lookup whose rows are ordered by source rank (``rows_per_source``) and the AlltoAll that
returns each source its rows. Forward: stage i's AlltoAll is issued (async) and stage i+1 computes meanwhile;
all are awaited at the end and placed into the [B_local, sum(dims)] output. Backward runs the stages in reverse:
the gradient AlltoAll of the next stage is issued before this stage's lookup backward runs, so it overlaps it.
One stage with overlap off is the plain sequential exchange (TT-Rec's and the dense baseline's).

Table groups (EcoRec's table-wise pipeline) and sample micro-batches (its batch-wise ablation) are both stages;
they differ only in which rows and columns of the output a stage fills. The stages' lookups run with their own
autograd graphs; the outer autograd node runs their backward (fused updates included) in pipeline order."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch import Tensor

from impls.sharding.comm import Comm


@dataclass
class Stage:
    compute: Callable[[], Tensor]  # [sum(rows_per_source), width] on this rank
    rows_per_source: list[int]  # rows of the computed block that go back to each source rank
    recv_rows: int  # this rank's output rows the stage fills: row_start : row_start + recv_rows
    row_start: int
    widths: list[int]  # the stage's output width on every rank
    columns: list[Tensor]  # per rank: the output columns its block fills (int64)


class _Run:
    """One forward / backward pass over the stages (kept by the autograd node)."""

    def __init__(self, comm: Comm, stages: Sequence[Stage], batch: int, width: int, overlap: bool, phase: str):
        self.comm, self.stages, self.batch, self.width = comm, list(stages), batch, width
        self.overlap, self.phase = overlap, phase
        self.outs: list[Tensor | None] = [None] * len(self.stages)

    def _exchange(self, send: Tensor, out_splits, in_splits, phase: str):
        recv = send.new_empty(sum(out_splits))
        h = self.comm.all_to_all(recv, send, out_splits, in_splits, phase, async_op=self.overlap)
        return recv, h

    def forward(self, grad_enabled: bool) -> Tensor:
        out = torch.empty(self.batch, self.width, device=self.comm.ctx.device)
        pending = []
        me = self.comm.ctx.rank
        for i, st in enumerate(self.stages):
            with torch.set_grad_enabled(grad_enabled):
                y = st.compute()
            self.outs[i] = y
            w = st.widths[me]
            send = y.detach().reshape(-1)
            recv, h = self._exchange(send, [st.recv_rows * wr for wr in st.widths],
                                     [n * w for n in st.rows_per_source], self.phase + ".fwd")
            if not self.overlap:
                self.comm.wait(h, self.phase + ".fwd")
                h = None
            pending.append((st, recv, h))
        for st, recv, h in pending:
            self.comm.wait(h, self.phase + ".fwd")
            lo, hi = st.row_start, st.row_start + st.recv_rows
            for blk, cols in zip(torch.split(recv, [st.recv_rows * wr for wr in st.widths]), st.columns):
                if cols.numel():
                    out[lo:hi, cols] = blk.view(st.recv_rows, -1)
        if not grad_enabled:
            self.outs = [None] * len(self.stages)
        return out

    def backward(self, grad: Tensor) -> None:
        me = self.comm.ctx.rank
        order = list(reversed(range(len(self.stages))))

        def issue(i):
            st = self.stages[i]
            lo, hi = st.row_start, st.row_start + st.recv_rows
            rows = grad[lo:hi]
            send = torch.cat([rows[:, cols].reshape(-1) for cols in st.columns])
            w = st.widths[me]
            recv, h = self._exchange(send, [n * w for n in st.rows_per_source],
                                     [st.recv_rows * wr for wr in st.widths], self.phase + ".bwd")
            if not self.overlap:
                self.comm.wait(h, self.phase + ".bwd")
                h = None
            return recv, h

        nxt = issue(order[0]) if order else None
        for k, i in enumerate(order):
            recv, h = nxt
            if k + 1 < len(order):
                nxt = issue(order[k + 1])  # in flight while this stage's backward runs
            self.comm.wait(h, self.phase + ".bwd")
            y = self.outs[i]
            self.outs[i] = None
            if y is not None and y.requires_grad:
                torch.autograd.backward(y, recv.view(y.shape))


class _PipelineFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run: _Run, anchor: Tensor) -> Tensor:
        ctx.run = run
        return run.forward(grad_enabled=True)

    @staticmethod
    def backward(ctx, grad: Tensor):
        ctx.run.backward(grad.contiguous())
        ctx.run = None
        return None, None


def run_stages(comm: Comm, stages: Sequence[Stage], batch: int, width: int, overlap: bool,
               phase: str = "emb") -> Tensor:
    """The assembled [batch, width] output; differentiable when grad mode is on (backward as described)."""
    run = _Run(comm, stages, batch, width, overlap, phase)
    if not torch.is_grad_enabled():
        return run.forward(grad_enabled=False)
    anchor = torch.zeros(0, requires_grad=True)  # makes the node part of the graph; receives no gradient
    return _PipelineFn.apply(run, anchor)
