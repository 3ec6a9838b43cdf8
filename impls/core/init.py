"""The dense-table initializer every system shares (DLRM's uniform(+-sqrt(1/rows))): the dense baselines, the TT
systems' tables that stay dense, EMBark's shards and the TorchRec peer all start from it."""
from __future__ import annotations

import torch
from torch import Tensor

from impls.api import TableSpec, table_seed
from impls.core import ops
from impls.core.tt import dense_init_bound


@torch.no_grad()
def dense_table_init(spec: TableSpec, seed: int, out: Tensor | None = None, *, rows: slice = slice(None),
                     cols: slice = slice(None)) -> Tensor:
    """The table's initial weights, uniform(+-sqrt(1/rows)) as dlrm draws them, each entry a function of (seed,
    table name, row, column) only (the counter-based ``counter_uniform`` op), so every implementation, shard and
    rank starts from the same weights. ``rows`` / ``cols`` (slices, steps allowed for rows) pick a block: a
    shard (EMBark's rows j::r, TorchRec's r0:r1 x c0:c1) is generated directly, without the rest of the table.
    ``out`` (a CPU float32 tensor of the block's shape, e.g. a view into a library's weight buffer) is filled in
    place, so no second copy is made."""
    r0, r1, rs = rows.indices(spec.num_embeddings)
    c0, c1, cs = cols.indices(spec.dim)
    if rs < 1 or cs != 1:
        raise ValueError(f"table {spec.name!r}: init rows need a positive step and columns a step of 1, got "
                         f"rows {rows}, cols {cols}")
    shape = (len(range(r0, r1, rs)), max(0, c1 - c0))
    w = torch.empty(shape) if out is None else out
    if tuple(w.shape) != shape:
        raise ValueError(f"table {spec.name!r}: init target has shape {tuple(w.shape)}, the block {shape}")
    bound = dense_init_bound(spec.num_embeddings)
    return ops.counter_uniform(table_seed(seed, spec.name), w, -bound, bound, row_start=r0, row_step=rs,
                               col_start=c0)
