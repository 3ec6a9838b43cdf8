"""What the compression methods built from torch ops share (QR, MD): trainable tensors that are either tables read by
rows (sparse gradients, updated row by row with duplicates aggregated, as the dense baselines' exact optimizers) or
small dense tensors (MD's projections, updated whole), one optimizer state per tensor, and memory that is exactly
those tensors, their state and the last step's intermediates."""
from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor, nn

from impls.api import EmbeddingCollection, EmbeddingOptim, GradientTensor, MemoryReport, TableSpec
from impls.core.pooling import mean_pool


class CompressedCollection(EmbeddingCollection):
    def __init__(self, tables: Sequence[TableSpec], optim: EmbeddingOptim, ctx: Any | None = None, *,
                 check_bounds: bool = True, seed: int = 0) -> None:
        super().__init__(tables, optim, ctx, check_bounds=check_bounds, seed=seed)
        self.params = nn.ParameterList()
        self._row_sparse: list[bool] = []
        self._state: list[Tensor | None] = []
        self._last_intermediates = 0

    def add(self, weight: Tensor, row_sparse: bool) -> int:
        """Register one trainable tensor (a table read by rows, or a dense one); its index."""
        p = nn.Parameter(weight)
        self.params.append(p)
        self._row_sparse.append(row_sparse)
        self._state.append(self.optim.init_state(p.data))
        return len(self.params) - 1

    def get_extra_state(self) -> dict:
        """The optimizer state of every tensor (None under SGD): part of the state_dict a resumed run loads."""
        return {"state": list(self._state)}

    def set_extra_state(self, state: dict) -> None:
        from impls.state import copy_state

        copy_state(self._state, state.get("state"), self.name)

    def optimizer_state(self) -> dict[nn.Parameter, dict[str, Tensor]]:
        return {p: {"sum": s} for p, s in zip(self.params, self._state) if s is not None}

    def gradient_tensors(self) -> list[GradientTensor]:
        return [GradientTensor(p, s) for p, s in zip(self.params, self._row_sparse)]

    @torch.no_grad()
    def optimizer_step(self) -> None:
        for p, row_sparse, state in zip(self.params, self._row_sparse, self._state):
            if p.grad is None:
                continue
            if row_sparse:
                g = p.grad.coalesce()
                self.optim.apply_rows(p.data, state, g.indices()[0], g.values())
            else:
                self.optim.apply_dense(p.data, state, p.grad)
            p.grad = None

    def memory_report(self) -> MemoryReport:
        params = sum(p.numel() * p.element_size() for p in self.params)
        state = sum(s.numel() * s.element_size() for s in self._state if s is not None)
        return MemoryReport(params=params, optimizer_state=state, peak_intermediates=self._last_intermediates)


def pool(rows: Tensor, offsets: Tensor, mode: str) -> Tensor:
    """Sum (or mean) of per-lookup vectors ``rows`` [nnz, D] over the bags ``offsets`` [B + 1] (empty bags: 0)."""
    lengths = offsets.diff()
    bag = torch.repeat_interleave(torch.arange(lengths.numel(), device=rows.device), lengths)
    out = rows.new_zeros(lengths.numel(), rows.shape[1]).index_add_(0, bag, rows)
    return mean_pool(out, offsets) if mode == "mean" else out
