"""The float64 oracles a system is held to: its pooled forward from its own dense tables (``materialize``), and one
optimizer step on its own trainable tensors (``table_parameters``) with gradients from float64 autograd through
``materialize_from`` and the update of torch.optim (SGD; Adagrad with the system's eps and initial accumulator):
what a dense model built from the same tensors would do, over all tables at once (a tensor shared by several tables
is one tensor). A TT table's cores step at the system's core rate (TTCollection.core_optim), its other tensors at
the tables' rate."""
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


def distinct_key(p: Tensor) -> tuple:
    """What one tensor is, however many tables hold it (ROBE-style: one flat array behind every table)."""
    return (p.data_ptr(), tuple(p.shape), tuple(p.stride()), p.dtype)


def table_gradients(emb, tables: Sequence[TableSpec], sf: SparseFeatures, upstream: Tensor
                    ) -> list[tuple[list[Tensor], list[Tensor]]]:
    """Per table: (its ``table_parameters`` in float64, their gradients) of sum(forward * upstream), differentiated
    over all tables at once: a tensor several tables share is one float64 leaf, and its gradient sums what every
    table that reads it sends (the same leaf and gradient in each of those tables' lists)."""
    leaves: dict[tuple, Tensor] = {}
    held = []
    for t in tables:
        mine = []
        for p in emb.table_parameters(t.name):
            key = distinct_key(p)
            if key not in leaves:
                leaves[key] = p.detach().double().clone().requires_grad_(True)
            mine.append(leaves[key])
        held.append(mine)
    loss, at = 0.0, 0
    for i, (t, params) in enumerate(zip(tables, held)):
        rows = pooled(emb.materialize_from(t.name, params), sf, i, t.pooling)
        loss = loss + (rows * upstream[:, at:at + t.dim].double()).sum()
        at += t.dim
    every = list(leaves.values())
    grads = torch.autograd.grad(loss, every, allow_unused=True)
    grad_of = {id(p): torch.zeros_like(p) if g is None else g for p, g in zip(every, grads)}
    return [(params, [grad_of[id(p)] for p in params]) for params in held]


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


def reference_steps(emb, tables: Sequence[TableSpec], batches: Sequence[SparseFeatures], upstreams: Sequence[Tensor],
                    optim: EmbeddingOptim) -> list[tuple[list[Tensor], list[Tensor]]]:
    """Per table: (its tensors after one torch.optim step per batch, each on float64 gradients over all tables at
    once, and where any step's gradient reached them); a tensor several tables share is one tensor, stepping at the
    rate of the first table that holds it. Two steps hold an optimizer to its state (Adagrad's sums), not only to
    its first update."""
    leaves: dict[tuple, Tensor] = {}
    opts: dict[tuple, torch.optim.Optimizer] = {}
    held = []
    for t in tables:
        keys = []
        params = emb.table_parameters(t.name)
        for p, opt in zip(params, rates(emb, t.name, len(params), optim)):
            key = distinct_key(p)
            if key not in leaves:
                leaves[key] = p.detach().double().clone().requires_grad_(True)
                opts[key] = torch_optimizer([leaves[key]], opt)
            keys.append(key)
        held.append(keys)
    reached = {key: torch.zeros_like(leaf, dtype=torch.bool) for key, leaf in leaves.items()}
    for sf, upstream in zip(batches, upstreams):
        loss, at = 0.0, 0
        for i, (t, keys) in enumerate(zip(tables, held)):
            rows = pooled(emb.materialize_from(t.name, [leaves[k] for k in keys]), sf, i, t.pooling)
            loss = loss + (rows * upstream[:, at:at + t.dim].double()).sum()
            at += t.dim
        grads = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)
        for (key, leaf), g in zip(leaves.items(), grads):
            leaf.grad = torch.zeros_like(leaf) if g is None else g
            opts[key].step()  # dense Adagrad: an entry with zero gradient keeps its value and state
            reached[key] |= leaf.grad != 0
            leaf.grad = None
    return [([leaves[k].detach() for k in keys], [reached[k] for k in keys]) for keys in held]


def materialized_after(emb, table: str, stepped: list[Tensor]) -> Tensor:
    """The dense table the stepped tensors make (float64)."""
    return emb.materialize_from(table, stepped).detach()
