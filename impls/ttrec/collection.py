"""ttrec: FBTT's TT-EmbeddingBag schedule. Occurrences are processed in chunks of ``chunk`` lookups
(FBTT's batch_count); every occurrence runs the full chain, forward nnz*(a+b), backward recompute plus
two GEMMs per core step, nnz*(3a+2b). Dedup-free by design: this is the baseline the other two improve.
The LFU hot-row cache is a separate feature (not part of this schedule)."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from impls.api import register
from impls.core import ops
from impls.core.counters import TTWork
from impls.core.tt_batch import bag_ids, bag_range
from impls.core.tt_collection import TTCollection, TTTable


@register
class TTRec(TTCollection):
    name = "ttrec"
    allowed_cores = (2, 3, 4)
    dim_multiple = 4  # FBTT pools with float4 loads
    default_weight_dist = "uniform"  # FBTT's TTEmbeddingBag defaults to approx-normal; EL-Rec, EcoRec and
    # EcoRec's harness use uniform, so all three start from the same cores here

    def configure(self, chunk: int = 20000) -> None:
        """chunk: lookups per batched-GEMM launch (FBTT: 1000; EcoRec's FBTT copy: 20000, used here)."""
        if int(chunk) < 1:
            raise ValueError(f"ttrec chunk must be >= 1, got {chunk}")
        self.chunk = int(chunk)

    def _chunks(self, values: Tensor):
        """(lo, hi, rows, item ids) per chunk of occurrences; every occurrence is its own item."""
        nnz = values.numel()
        items = torch.arange(min(self.chunk, max(nnz, 1)), device=values.device)
        for lo in range(0, nnz, self.chunk):
            hi = min(lo + self.chunk, nnz)
            yield lo, hi, values[lo:hi], items[: hi - lo]

    def lookup_forward(self, table: TTTable, values: Tensor, offsets: Tensor, batch_size: int, work: TTWork):
        s = table.shape
        out = torch.zeros(batch_size, s.dim, device=values.device)
        for lo, hi, rows, items in self._chunks(values):
            prefix_ids = torch.div(rows, s.last_radix, rounding_mode="floor")
            emb = table.stages_forward(prefix_ids, items, rows % s.last_radix, work)
            b0, b1, seg = bag_range(offsets, lo, hi)
            ops.gather_pool(emb, items, seg, out[b0:b1])
        return out, (values, offsets)

    def lookup_backward(self, table: TTTable, saved: Any, grad: Tensor, work: TTWork) -> None:
        values, offsets = saved
        s = table.shape
        bags = bag_ids(offsets, values.numel())
        for lo, hi, rows, items in self._chunks(values):
            d_emb = torch.index_select(grad, 0, bags[lo:hi], out=table.buffer("d_emb", hi - lo, s.dim))
            prefix_ids = torch.div(rows, s.last_radix, rounding_mode="floor")
            table.stages_backward(prefix_ids, items, rows % s.last_radix, d_emb, work)  # recomputes, as FBTT
