"""The float64 oracles a system is held to: its pooled forward from its own dense tables (``materialize``), and one
optimizer step on its own trainable tensors (``table_parameters``) with gradients from float64 autograd through
``materialize_from`` and the update of torch.optim (SGD; Adagrad with the system's eps and initial accumulator):
what a dense model built from the same tensors would do. A TT table's cores step at the system's core rate
(TTCollection.core_optim), its other tensors at the tables' rate."""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from impls.api import EmbeddingOptim, SparseFeatures, TableSpec


def pooled(weight: Tensor, sf: SparseFeatures, i: int, mode: str) -> Tensor:
    """Table ``i``'s bags of ``sf`` pooled (``mode``) from the dense ``weight`` (empty bags: 0)."""
    v, o = sf.table(i)
    return F.embedding_bag(v, weight, o, mode=mode, include_last_offset=True)


def table_gradients(emb, tables: Sequence[TableSpec], sf: SparseFeatures, upstream: Tensor
                    ) -> list[tuple[list[Tensor], list[Tensor]]]:
    """Per table: (its ``table_parameters`` in float64, their gradients) of sum(forward * upstream)."""
    out, at = [], 0
    for i, t in enumerate(tables):
        params = [p.detach().double().clone().requires_grad_(True) for p in emb.table_parameters(t.name)]
        rows = pooled(emb.materialize_from(t.name, params), sf, i, t.pooling)
        grads = torch.autograd.grad((rows * upstream[:, at:at + t.dim].double()).sum(), params, allow_unused=True)
        out.append((params, [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]))
        at += t.dim
    return out


def rates(emb, table: str, count: int, optim: EmbeddingOptim) -> list[EmbeddingOptim]:
    """The optimizer of each of a table's ``count`` tensors: TT cores at the system's core rate, the rest at
    ``optim``."""
    shape = emb.tt_shape(table) if hasattr(emb, "tt_shape") else None
    cores = shape.d if shape is not None else 0
    return ([emb.core_optim(shape)] * cores if cores else []) + [optim] * (count - cores)


def torch_optimizer(params: list[Tensor], opt: EmbeddingOptim) -> torch.optim.Optimizer:
    if opt.kind == "sgd":
        return torch.optim.SGD(params, lr=opt.lr)
    return torch.optim.Adagrad(params, lr=opt.lr, eps=opt.eps, initial_accumulator_value=opt.initial_accumulator)


def reference_step(emb, tables: Sequence[TableSpec], sf: SparseFeatures, upstream: Tensor, optim: EmbeddingOptim
                   ) -> list[tuple[list[Tensor], list[Tensor]]]:
    """Per table: (its tensors after one torch.optim step on the float64 gradients, those gradients)."""
    out = []
    for t, (params, grads) in zip(tables, table_gradients(emb, tables, sf, upstream)):
        stepped = []
        for p, g, opt in zip(params, grads, rates(emb, t.name, len(params), optim)):
            q = p.detach().clone().requires_grad_(True)
            q.grad = g
            torch_optimizer([q], opt).step()  # dense Adagrad: an entry with zero gradient keeps its value and state
            stepped.append(q.detach())
        out.append((stepped, grads))
    return out


def materialized_after(emb, table: str, stepped: list[Tensor]) -> Tensor:
    """The dense table the stepped tensors make (float64)."""
    return emb.materialize_from(table, stepped).detach()
