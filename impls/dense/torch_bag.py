"""dense-torch: one nn.EmbeddingBag per table with sparse gradients and torch.optim SGD / Adagrad."""
from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from impls.api import EmbeddingCollection, EmbeddingOptim, MemoryReport, SparseFeatures, TableSpec, WorkReport, register
from impls.dense.init import dense_table_init


@register
class DenseTorch(EmbeddingCollection):
    name = "dense-torch"

    def __init__(
        self,
        tables: Sequence[TableSpec],
        optim: EmbeddingOptim,
        dist: Any | None = None,
        *,
        device: str | torch.device = "cpu",
        check_bounds: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__(tables, optim, dist, check_bounds=check_bounds, seed=seed)
        self.weights = nn.ParameterList(
            nn.Parameter(dense_table_init(t, seed, i).to(device)) for i, t in enumerate(self.tables)
        )
        params = list(self.weights)
        if optim.kind == "sgd":
            self._opt = torch.optim.SGD(params, lr=optim.lr)
        else:
            self._opt = torch.optim.Adagrad(
                params, lr=optim.lr, eps=optim.eps, initial_accumulator_value=optim.initial_accumulator
            )
        self._last_intermediates = 0

    def forward(self, features: SparseFeatures) -> Tensor:
        features = self.checked(features)
        outs = []
        grad_bytes = 0
        for i, (spec, w) in enumerate(zip(self.tables, self.weights)):
            vals, offs = features.table(i)
            outs.append(
                F.embedding_bag(vals, w, offs, mode=spec.pooling, sparse=True, include_last_offset=True)
            )
            grad_bytes += vals.numel() * spec.dim * 4  # the sparse gradient holds one row per lookup
        out = torch.cat(outs, dim=1)
        self._last_intermediates = grad_bytes + 2 * out.numel() * 4  # sparse grads + output + its grad
        self._work = WorkReport(nnz=features.nnz, extra={"rows_read_bytes": grad_bytes})
        return out

    def optimizer_step(self) -> None:
        self._opt.step()
        self._opt.zero_grad(set_to_none=True)

    def materialize(self, table: str) -> Tensor:
        return self.weights[self.table_index(table)].detach()

    def memory_report(self) -> MemoryReport:
        params = sum(t.dense_bytes for t in self.tables)
        return MemoryReport(
            params=params,
            optimizer_state=params if self.optim.kind == "adagrad" else 0,
            peak_intermediates=self._last_intermediates,
        )
