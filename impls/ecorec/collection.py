"""ecorec: EcoRec's C-M / M-C schedule over sorted-index micro-batches.

The sorted unique ids are cut into ``micro_batches`` contiguous chunks (ceil(U / min_chunk) when m chunks
would hold under ``min_chunk`` ids each: the artifact's rule). Per chunk, forward (C-M): contract ids to prefix groups, E1_i stage-1
products, U_i stage-2 products, expand into the bags; backward (M-C): aggregate gradients per unique id,
recompute the E1_i prefixes, 2*U_i stage-2 GEMMs that also sum the prefix gradient per group, 2*E1_i
stage-1 GEMMs. Totals E1*a + U*b forward and 3*E1*a + 2*U*b backward; buffers sized to one chunk."""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from impls.api import register
from impls.core import ops
from impls.core.counters import TTWork
from impls.core.stage_plan import IndexStats, StageCall, TablePlan
from impls.core.tt_batch import bag_ids, dedup, prefix_groups
from impls.core.tt_collection import TTCollection, TTTable


def micro_batch_bounds(num_unique: int, micro_batches: int, min_chunk: int) -> list[tuple[int, int]]:
    """Contiguous [lo, hi) chunks of the sorted unique ids, as the SC24 artifact cuts them (tt_emb.py): m chunks,
    or ceil(U / min_chunk) when m chunks would hold fewer than min_chunk ids each (ceil(U / m) < min_chunk); at
    most U; sizes floor/ceil(U / m), the first U mod m one larger. U = 50,000, m = 4, min 20,000 -> 3 chunks."""
    if num_unique == 0:
        return []
    m = max(1, int(micro_batches))
    if math.ceil(num_unique / m) < min_chunk:
        m = math.ceil(num_unique / max(min_chunk, 1))
    m = max(1, min(m, num_unique))
    base, extra = divmod(num_unique, m)
    bounds, lo = [], 0
    for i in range(m):
        hi = lo + base + (1 if i < extra else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


@register
class EcoRec(TTCollection):
    """EcoRec (SC24): TT tables trained by the C-M / M-C pattern over sorted-index micro-batches, one native step
    for all TT tables each way (options: TTCollection's, ``micro_batches``, ``min_chunk``, ``native_step``; the
    module docstring says how). As a TorchRec module: dlrmbench.systems.EcoRecEBC."""

    option_keys = TTCollection.option_keys | {"micro_batches", "min_chunk", "native_step"}
    name = "ecorec"
    # the SC24 artifact's distributed run: greedy (LPT) placement on unique counts, 4 table groups on the
    # slope of skew 1, each rank's list reversed (cheap tables first), AlltoAlls overlapped
    dist_defaults = {"sharding": "table-wise", "placement": "greedy", "pipeline": "table", "pipeline_groups": 4,
                     "skew": 1.0, "reorder": True}
    allowed_cores = (3,)
    dim_multiple = 4  # EcoRec's kernels pool with float4 loads

    def configure(self, micro_batches: int = 4, min_chunk: int = 20000, native_step: bool = True,
                  **options: Any) -> None:
        """micro_batches: m of the sorted-index micro-batching (EcoRec's num_micro_uidx, 4 in the
        paper's runs); min_chunk: the fewest unique ids per chunk (EcoRec's min_batch_count, 20000);
        native_step: run a table's step as one native call each way (ops.ecorec_forward / ecorec_backward: the
        index work fused around the TT stages, as EcoRec's GPU code fuses it), else as the composition of torch
        passes and stage ops below (the op's reference; the same products)."""
        super().configure(**options)  # anything else is an unknown option
        if int(micro_batches) < 1:
            raise ValueError(f"ecorec micro_batches must be >= 1, got {micro_batches}")
        if int(min_chunk) < 1:
            raise ValueError(f"ecorec min_chunk must be >= 1, got {min_chunk}")
        self.micro_batches = int(micro_batches)
        self.min_chunk = int(min_chunk)
        self.native_step = bool(native_step)

    @classmethod
    def stage_plan(cls, shape, index: IndexStats, micro_batches: int = 4, min_chunk: int = 20000,
                   native_step: bool = True, **_: Any) -> TablePlan:
        """One table's step (impls/core/stage_plan.py): per micro-batch of the sorted unique ids (micro_batch_bounds)
        its E1_i prefix groups and U_i items, once forward (C-M) and once backward (M-C, the prefixes recomputed);
        alive: one chunk of rows forward, one chunk of row gradients beside every occurrence's bag backward. Totals
        E1*a + U*b forward, 3*E1*a + 2*U*b backward, E1 = sum E1_i."""
        bounds = micro_batch_bounds(int(round(index.unique)), micro_batches, min_chunk)
        widest = max((hi - lo for lo, hi in bounds), default=0)
        groups = [index.groups(lo, hi) for lo, hi in bounds]
        calls = [StageCall("fwd", g, hi - lo, widest * shape.dim * 4) for g, (lo, hi) in zip(groups, bounds)]
        calls += [StageCall("bwd", g, hi - lo, widest * shape.dim * 4 + index.nnz * 8)
                  for g, (lo, hi) in zip(groups, bounds)]
        return TablePlan(calls, unique=index.unique, e1=sum(groups), micro_batches=len(bounds))

    def step_forward(self, lookups, batch_size: int, batch, work: TTWork):
        """Native: every TT table's step in one call (ops.ecorec_tables_forward, threads within and across tables)."""
        if not self.native_step:
            return super().step_forward(lookups, batch_size, batch, work)
        return ops.ecorec_tables_forward(self.step_tables(lookups), batch.values, batch.offsets, batch.tables,
                                         batch_size, self.micro_batches, self.min_chunk, work)

    def step_backward(self, tables, saved, grads, work: TTWork) -> None:
        if not self.native_step:
            super().step_backward(tables, saved, grads, work)
            return
        ops.ecorec_tables_backward(self.cores_and_shapes(tables), saved, grads, [t.grads for t in tables], work)

    def lookup_forward(self, table: TTTable, values: Tensor, offsets: Tensor, batch_size: int, work: TTWork):
        if self.native_step:
            return ops.ecorec_forward(table.core_tensors(), table.shape, values, offsets, batch_size,
                                      self.micro_batches, self.min_chunk, work)
        return self.composed_forward(table, values, offsets, batch_size, work)

    def lookup_backward(self, table: TTTable, saved: Any, grad: Tensor, work: TTWork) -> None:
        if isinstance(saved, ops.EcoRecSaved):
            ops.ecorec_backward(table.core_tensors(), table.shape, saved, grad, table.grads, work)
        else:
            self.composed_backward(table, saved, grad, work)

    def composed_forward(self, table: TTTable, values: Tensor, offsets: Tensor, batch_size: int, work: TTWork):
        """The step as torch passes around the stage ops, one micro-batch at a time (the native op's reference)."""
        s = table.shape
        dd = dedup(values, offsets, batch_size)
        bounds = micro_batch_bounds(dd.unique.numel(), self.micro_batches, self.min_chunk)
        out = torch.zeros(batch_size, s.dim, device=values.device)
        # Occurrences in sorted order: their bag (one gather per step, shared by every chunk and the backward)
        # and their unique id (non-decreasing: counts expanded, no gather).
        occ_bags = bag_ids(offsets, values.numel()).index_select(0, dd.sorted_positions)
        occ_unique = torch.repeat_interleave(torch.arange(dd.unique.numel(), device=values.device), dd.counts,
                                             output_size=values.numel()) if len(bounds) > 1 else None
        # each micro-batch's occurrences, [c0, c1) in sorted order: one host read for all of them
        cuts = dd.count_offsets[torch.tensor([b for lh in bounds for b in lh], dtype=torch.int64,
                                             device=values.device)].tolist()
        chunks = []
        work.unique += dd.unique.numel()
        work.micro_batches += len(bounds)
        for k, (lo, hi) in enumerate(bounds):
            c0, c1 = cuts[2 * k], cuts[2 * k + 1]
            ids = dd.unique[lo:hi]
            groups = prefix_groups(ids, s.last_radix)  # C: unique ids -> prefix groups
            work.e1 += groups.prefix_ids.numel()
            emb = table.stages_forward(groups.prefix_ids, groups.group_of, ids % s.last_radix, work)  # M
            if len(bounds) == 1:  # expand: every occurrence adds its unique row into its bag
                ops.gather_pool(emb, dd.inverse, offsets, out, check_indices=False)
            else:
                ops.scatter_add_rows(emb, occ_unique[c0:c1] - lo, occ_bags[c0:c1], out, check_indices=False)
            chunks.append((lo, hi, c0, c1, groups))
        return out, (dd, occ_bags, chunks)

    def composed_backward(self, table: TTTable, saved: Any, grad: Tensor, work: TTWork) -> None:
        dd, occ_bags, chunks = saved
        s = table.shape
        for lo, hi, c0, c1, groups in chunks:
            ids = dd.unique[lo:hi]
            d_unique = table.buffer("d_unique", hi - lo, s.dim).zero_()  # C: occurrences -> unique ids
            ops.gather_pool(grad, occ_bags[c0:c1], dd.count_offsets[lo : hi + 1] - c0, d_unique, check_indices=False)
            # M stage 2 with C: unique ids -> prefix groups (the prefix gradient is summed per group), M stage 1
            table.stages_backward(groups.prefix_ids, groups.group_of, ids % s.last_radix, d_unique, work, occ_bags)
