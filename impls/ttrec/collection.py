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

    def lookup_forward(self, table: TTTable, values: Tensor, offsets: Tensor, batch_size: int, work: TTWork):
        s, cores = table.shape, table.core_tensors()
        out = torch.zeros(batch_size, s.dim, device=values.device)
        nnz = values.numel()
        items = torch.arange(min(self.chunk, max(nnz, 1)), device=values.device)
        for lo in range(0, nnz, self.chunk):
            hi = min(lo + self.chunk, nnz)
            rows = values[lo:hi]
            n = hi - lo
            prefix_ids = torch.div(rows, s.last_radix, rounding_mode="floor")
            prefix = ops.tt_prefix(cores, s, prefix_ids, work, out=table.buffer("prefix", n, s.prefix_width))
            emb = ops.tt_last(prefix, cores, s, items[:n], rows % s.last_radix, work, out=table.buffer("emb", n, s.dim))
            b0, b1, seg = bag_range(offsets, lo, hi)
            ops.gather_pool(emb, items[: hi - lo], seg, out[b0:b1])
            work.live(prefix, emb)
        return out, (values, offsets)

    def lookup_backward(self, table: TTTable, saved: Any, grad: Tensor, work: TTWork) -> None:
        values, offsets = saved
        s, cores = table.shape, table.core_tensors()
        nnz = values.numel()
        bags = bag_ids(offsets, nnz)
        items = torch.arange(min(self.chunk, max(nnz, 1)), device=values.device)
        for lo in range(0, nnz, self.chunk):
            hi = min(lo + self.chunk, nnz)
            rows = values[lo:hi]
            prefix_ids = torch.div(rows, s.last_radix, rounding_mode="floor")
            d_emb = torch.index_select(grad, 0, bags[lo:hi], out=table.buffer("d_emb", hi - lo, s.dim))
            n = hi - lo
            prefix = ops.tt_prefix(  # recomputed, as FBTT does
                cores, s, prefix_ids, work, phase="bwd", out=table.buffer("prefix", n, s.prefix_width)
            )
            d_prefix = ops.tt_last_backward(
                prefix, cores, s, items[:n], rows % s.last_radix, d_emb, table.grads[-1], work,
                out=table.buffer("d_prefix", n, s.prefix_width),
            )
            ops.tt_prefix_backward(cores, s, prefix_ids, d_prefix, table.grads[:-1], work)
            work.live(d_emb, prefix, d_prefix)
