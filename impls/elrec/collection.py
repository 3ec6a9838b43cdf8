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
        s = table.shape
        dd = dedup(values, offsets, batch_size)  # EL-Rec's local index reordering (sorted unique)
        groups = prefix_groups(dd.unique, s.last_radix)
        work.unique += dd.unique.numel()
        work.e1 += groups.prefix_ids.numel()
        work.micro_batches += 1
        item_group = groups.group_of.index_select(0, dd.inverse)  # every occurrence is an item
        emb = table.stages_forward(groups.prefix_ids, item_group, values % s.last_radix, work)
        out = torch.zeros(batch_size, s.dim, device=values.device)
        ops.gather_pool(emb, torch.arange(values.numel(), device=values.device), offsets, out)
        return out, (dd, offsets)

    def lookup_backward(self, table: TTTable, saved: Any, grad: Tensor, work: TTWork) -> None:
        dd, offsets = saved
        s = table.shape
        U = dd.unique.numel()
        bags = bag_ids(offsets, dd.inverse.numel())
        d_unique = table.buffer("d_unique", U, s.dim).zero_()  # gradient aggregation per unique id
        ops.gather_pool(grad, bags.index_select(0, dd.sorted_positions), dd.count_offsets, d_unique)
        prefix_ids = torch.div(dd.unique, s.last_radix, rounding_mode="floor")  # per unique: no reuse
        table.stages_backward(
            prefix_ids, torch.arange(U, device=grad.device), dd.unique % s.last_radix, d_unique, work, bags
        )
