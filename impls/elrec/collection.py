"""elrec: EL-Rec's schedule. Forward: one stage-1 product per distinct prefix group (E1, "intermediate
result reuse") and stage 2 per occurrence, E1*a + nnz*b, over the whole batch. Backward: gradients first
aggregated per unique id, then the full chain per unique id with no prefix reuse, U*(3a+2b), and the
update fused (EL-Rec's SGD kernel applies -lr*grad into the cores; Adagrad applies once per step)."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from impls.api import register
from impls.core import ops
from impls.core.counters import TTWork
from impls.core.tt_batch import bag_ids, dedup, prefix_groups
from impls.core.tt_collection import TTCollection, TTTable


@register
class ELRec(TTCollection):
    name = "elrec"
    allowed_cores = (3,)
    default_weight_dist = "uniform"

    def lookup_forward(self, table: TTTable, values: Tensor, offsets: Tensor, batch_size: int, work: TTWork):
        s, cores = table.shape, table.core_tensors()
        nnz = values.numel()
        dd = dedup(values, offsets, batch_size)  # EL-Rec's local index reordering (sorted unique)
        groups = prefix_groups(dd.unique, s.last_radix)
        work.unique += dd.unique.numel()
        work.e1 += groups.prefix_ids.numel()
        work.micro_batches += 1
        E1 = groups.prefix_ids.numel()
        prefix = ops.tt_prefix(cores, s, groups.prefix_ids, work, out=table.buffer("prefix", E1, s.prefix_width))
        item_group = groups.group_of.index_select(0, dd.inverse)
        emb = ops.tt_last(
            prefix, cores, s, item_group, values % s.last_radix, work, out=table.buffer("emb", nnz, s.dim)
        )
        out = torch.zeros(batch_size, s.dim, device=values.device)
        ops.gather_pool(emb, torch.arange(nnz, device=values.device), offsets, out)
        work.live(prefix, emb, item_group)
        return out, (dd, offsets)

    def lookup_backward(self, table: TTTable, saved: Any, grad: Tensor, work: TTWork) -> None:
        dd, offsets = saved
        s, cores = table.shape, table.core_tensors()
        U = dd.unique.numel()
        bags = bag_ids(offsets, dd.inverse.numel())
        d_unique = table.buffer("d_unique", U, s.dim).zero_()
        ops.gather_pool(grad, bags.index_select(0, dd.sorted_positions), dd.count_offsets, d_unique)
        prefix_ids = torch.div(dd.unique, s.last_radix, rounding_mode="floor")
        prefix = ops.tt_prefix(  # per unique id: no reuse in the backward
            cores, s, prefix_ids, work, phase="bwd", out=table.buffer("prefix", U, s.prefix_width)
        )
        d_prefix = ops.tt_last_backward(
            prefix, cores, s, torch.arange(U, device=grad.device), dd.unique % s.last_radix, d_unique,
            table.grads[-1], work, out=table.buffer("d_prefix", U, s.prefix_width),
        )
        ops.tt_prefix_backward(cores, s, prefix_ids, d_prefix, table.grads[:-1], work)
        work.live(d_unique, prefix, d_prefix, bags)
