"""dense-torch: one nn.EmbeddingBag per table with sparse gradients and torch.optim SGD / Adagrad."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from impls.api import SparseFeatures, WorkReport, register
from impls.dense.base import DenseCollection
from impls.core.init import dense_table_init


@register
class DenseTorch(DenseCollection):
    """Plain tables: one nn.EmbeddingBag per table, sparse gradients, torch.optim SGD / Adagrad in ``optimizer_step``.
    As a TorchRec module: dlrmbench.systems.DenseTorchEBC."""

    name = "dense-torch"

    def build(self, device: torch.device) -> None:
        optim = self.optim
        self.weights = nn.ParameterList(
            nn.Parameter(dense_table_init(t, self.seed).to(device)) for t in self.tables
        )
        params = list(self.weights)
        if optim.kind == "sgd":
            self._opt = torch.optim.SGD(params, lr=optim.lr)
        else:
            self._opt = torch.optim.Adagrad(
                params, lr=optim.lr, eps=optim.eps, initial_accumulator_value=optim.initial_accumulator
            )

    def forward(self, features: SparseFeatures) -> Tensor:
        features = self.checked(features)
        outs = []
        grad_bytes = 0
        for spec, w, (vals, offs) in zip(self.tables, self.weights, features.tables()):
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

    def optimizer_state(self) -> dict[nn.Parameter, dict[str, Tensor]]:
        """torch.optim's state of each table (Adagrad's sum and step count)."""
        return {p: dict(self._opt.state[p]) for p in self.weights if self._opt.state.get(p)}

    def get_extra_state(self) -> dict:
        """torch.optim's state (Adagrad's sums, steps): part of the state_dict a resumed run loads."""
        return self._opt.state_dict()

    def set_extra_state(self, state: dict) -> None:
        self._opt.load_state_dict(state)

    def materialize(self, table: str) -> Tensor:
        return self.weights[self.table_index(table)].detach()
