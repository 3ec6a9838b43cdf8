"""The pooled-output exchange of table-wise sharding, cut into stages that pipeline compute with communication.

A stage is one local lookup whose rows are ordered by source rank (``rows_per_source``) and the AlltoAll that
returns each source its rows. Forward: stage i's AlltoAll is issued (async) and stage i+1 computes meanwhile;
all are awaited at the end and placed into the [B_local, sum(dims)] output. Backward runs in backward groups, by
default the stages in reverse; EcoRec's table pipeline gives its own (the artifact cuts the backward pass's table
groups separately, plan.backward_group_tables), which is why a stage computes its tables as separate parts. The
gradient AlltoAll of the next group is issued before this group's lookup backward runs, so it overlaps it.
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


def column_runs(cols: Tensor) -> list[tuple[int, int]]:
    """``cols`` (output column indices, in block order) as runs of consecutive columns (start, length): a table's
    columns are one run, so a block is placed or gathered with a slice copy per run instead of an element-wise
    index over every column."""
    c = cols.tolist()
    runs: list[tuple[int, int]] = []
    for x in c:
        if runs and runs[-1][0] + runs[-1][1] == x:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((x, 1))
    return runs


def place_columns(out: Tensor, block: Tensor, runs: list[tuple[int, int]]) -> None:
    """``out[:, cols] = block`` for the columns ``runs`` describe."""
    off = 0
    for start, n in runs:
        out[:, start : start + n] = block[:, off : off + n]
        off += n


def take_columns(rows: Tensor, runs: list[tuple[int, int]]) -> Tensor:
    """``rows[:, cols]`` flattened row-major, for the columns ``runs`` describe."""
    if not runs:
        return rows.new_empty(0)
    if len(runs) == 1:
        start, n = runs[0]
        return rows[:, start : start + n].reshape(-1)
    return torch.cat([rows[:, start : start + n] for start, n in runs], 1).reshape(-1)


@dataclass
class Stage:
    compute: Callable[[], list[Tensor]]  # its parts (tables), each [sum(rows_per_source), part width], on this rank
    rows_per_source: list[int]  # rows of the computed block that go back to each source rank
    recv_rows: int  # this rank's output rows the stage fills: row_start : row_start + recv_rows
    row_start: int
    widths: list[int]  # the stage's output width on every rank
    columns: list[Tensor]  # per rank: the output columns its block fills (int64)

    def __post_init__(self) -> None:
        self.runs = [column_runs(c) for c in self.columns]


@dataclass
class BackwardGroup:
    parts: list[tuple[int, int | None]]  # this rank's (stage, part) in column order; part None: all of the stage's
    widths: list[int]  # the group's gradient width on every rank
    columns: list[Tensor]  # per rank: the output columns of its tables in the group (int64)
    stage: int  # the stage whose rows (rows_per_source, row_start, recv_rows) the group's gradient covers

    def __post_init__(self) -> None:
        self.runs = [column_runs(c) for c in self.columns]


class _Run:
    """One forward / backward pass over the stages (kept by the autograd node)."""

    def __init__(self, comm: Comm, stages: Sequence[Stage], batch: int, width: int, overlap: bool, phase: str,
                 backward_groups: Sequence[BackwardGroup] | None):
        self.comm, self.stages, self.batch, self.width = comm, list(stages), batch, width
        self.overlap, self.phase = overlap, phase
        self.outs: list[list[Tensor | None] | None] = [None] * len(self.stages)
        self.backward_groups = list(backward_groups) if backward_groups is not None else [
            BackwardGroup([(i, None)], st.widths, st.columns, i) for i, st in reversed(list(enumerate(self.stages)))]

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
                parts = st.compute()
            self.outs[i] = list(parts)
            w = st.widths[me]
            send = (parts[0] if len(parts) == 1 else torch.cat(parts, 1)).detach().reshape(-1)
            recv, h = self._exchange(send, [st.recv_rows * wr for wr in st.widths],
                                     [n * w for n in st.rows_per_source], self.phase + ".fwd")
            if not self.overlap:
                self.comm.wait(h, self.phase + ".fwd")
                h = None
            pending.append((st, recv, h))
        for st, recv, h in pending:
            self.comm.wait(h, self.phase + ".fwd")
            lo, hi = st.row_start, st.row_start + st.recv_rows
            for blk, runs in zip(torch.split(recv, [st.recv_rows * wr for wr in st.widths]), st.runs):
                if runs:
                    place_columns(out[lo:hi], blk.view(st.recv_rows, -1), runs)
        if not grad_enabled:
            self.outs = [None] * len(self.stages)
        return out

    def backward(self, grad: Tensor) -> None:
        me = self.comm.ctx.rank

        def issue(bg: BackwardGroup):
            st = self.stages[bg.stage]
            rows = grad[st.row_start : st.row_start + st.recv_rows]
            send = torch.cat([take_columns(rows, runs) for runs in bg.runs])
            w = bg.widths[me]
            recv, h = self._exchange(send, [n * w for n in st.rows_per_source],
                                     [st.recv_rows * wr for wr in bg.widths], self.phase + ".bwd")
            if not self.overlap:
                self.comm.wait(h, self.phase + ".bwd")
                h = None
            return recv, h

        groups = self.backward_groups
        nxt = issue(groups[0]) if groups else None
        for k, bg in enumerate(groups):
            recv, h = nxt
            if k + 1 < len(groups):
                nxt = issue(groups[k + 1])  # in flight while this group's backward runs
            self.comm.wait(h, self.phase + ".bwd")
            parts = []
            for i, p in bg.parts:
                outs = self.outs[i]
                for j in range(len(outs)) if p is None else [p]:
                    parts.append(outs[j])
                    outs[j] = None
            st = self.stages[bg.stage]
            g = recv.view(sum(st.rows_per_source), bg.widths[me])
            ys, gs, col = [], [], 0
            for y in parts:
                w = y.shape[1]
                if y.requires_grad:
                    ys.append(y)
                    gs.append(g[:, col : col + w])
                col += w
            if ys:
                torch.autograd.backward(ys, gs)


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
               phase: str = "emb", backward_groups: Sequence[BackwardGroup] | None = None) -> Tensor:
    """The assembled [batch, width] output; differentiable when grad mode is on (backward as described)."""
    run = _Run(comm, stages, batch, width, overlap, phase, backward_groups)
    if not torch.is_grad_enabled():
        return run.forward(grad_enabled=False)
    anchor = torch.zeros(0, requires_grad=True)  # makes the node part of the graph; receives no gradient
    return _PipelineFn.apply(run, anchor)
