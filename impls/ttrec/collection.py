"""ttrec: FBTT's TT-EmbeddingBag schedule. Occurrences are processed in chunks of ``chunk`` lookups
(FBTT's batch_count); every occurrence runs the full chain, forward nnz*(a+b), backward recompute plus
two GEMMs per core step, nnz*(3a+2b). Dedup-free by design: this is the baseline the other two improve.

With ``cache_rows`` = K > 0 each TT table gets FBTT's hot-row cache (impls/ttrec/cache.py): ids are counted
on every forward, ``cache_populate()`` (or every ``cache_populate_every`` forwards) caches the top-K rows
materialized from the cores, cached lookups read dense rows and skip the TT chain, and what the cached
rows learn is written back into the cores before the next populate (``cache_flush()`` does it alone)."""
from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from impls.api import MemoryReport, register
from impls.core import ops, tt
from impls.core.counters import TTWork
from impls.core.stage_plan import IndexStats, StageCall, TablePlan
from impls.core.tt_batch import bag_ids, bag_ranges
from impls.core.tt_collection import TTCollection, TTTable
from impls.ttrec.cache import HotRowCache


@register
class TTRec(TTCollection):
    """TT-Rec (MLSys21): FBTT's TT-EmbeddingBag schedule, every lookup its own chain in chunks, with the optional
    hot-row cache (``cache_rows``). As a TorchRec module: dlrmbench.systems.TTRecEBC."""

    option_keys = TTCollection.option_keys | {"cache_hash_size", "cache_populate_every", "cache_rows", "chunk"}
    name = "ttrec"
    allowed_cores = (2, 3, 4)
    dim_multiple = 4  # FBTT pools with float4 loads
    per_replica_state = {"cache_rows": "TT-Rec's hot-row cache"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.caches = nn.ModuleDict()
        if self.cache_rows:
            for key, table in self.tt.items():
                size = self.cache_hash_size or 8 * self.cache_rows
                self.caches[key] = HotRowCache(table.shape.num_embeddings, table.shape.dim, self.cache_rows, size,
                                               table.cores[0].device)

    def configure(self, chunk: int = 20000, cache_rows: int = 0, cache_populate_every: int = 0,
                  cache_hash_size: int | None = None, **options: Any) -> None:
        """chunk: lookups per batched-GEMM launch (FBTT: 1000; EcoRec's FBTT copy: 20000, used here).
        cache_rows: hot rows cached per TT table (0: no cache); cache_populate_every: forwards between
        automatic populates (0: only explicit ``cache_populate()``); cache_hash_size: frequency-table slots
        (default 8 * cache_rows, rounded up to a power of two)."""
        super().configure(**options)  # anything else is an unknown option
        if int(chunk) < 1:
            raise ValueError(f"ttrec chunk must be >= 1, got {chunk}")
        if int(cache_rows) < 0 or int(cache_populate_every) < 0:
            raise ValueError(f"cache_rows and cache_populate_every must be >= 0, got {cache_rows}, "
                             f"{cache_populate_every}")
        if cache_hash_size is not None and int(cache_hash_size) < int(cache_rows):
            raise ValueError(f"cache_hash_size {cache_hash_size} cannot hold {cache_rows} cached rows")
        self.chunk = int(chunk)
        self.cache_rows, self.cache_populate_every = int(cache_rows), int(cache_populate_every)
        self.cache_hash_size = None if cache_hash_size is None else int(cache_hash_size)

    # --- the hot-row cache -------------------------------------------------------------------------
    def tt_route(self, index: int, values: Tensor, offsets: Tensor, batch_size: int):
        """Cached rows pooled from the cache (sparse gradient into its rows), the misses through the cores."""
        cache = self.caches[str(index)] if str(index) in self.caches else None
        if cache is None:
            return values, offsets, None
        if self.cache_populate_every and cache.forwards and cache.forwards % self.cache_populate_every == 0:
            self._populate(index, cache)
        cache.forwards += 1
        cache.freq.add(values)
        slot, hit = cache.slots(values)
        nhit = int(hit.sum())
        work = self._step_work
        work.cache_hits += nhit
        work.cache_lookups += values.numel()
        cache.hits += nhit
        cache.lookups += values.numel()
        if nhit == 0:
            return values, offsets, None
        bags = bag_ids(offsets, values.numel())

        def sub_offsets(mask: Tensor) -> Tensor:
            counts = torch.zeros(batch_size, dtype=torch.int64, device=values.device).index_add_(0, bags[mask],
                                                                                               torch.ones_like(bags[mask]))
            return torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])

        miss = ~hit
        cached = F.embedding_bag(slot[hit], cache.weight, sub_offsets(hit), mode="sum", sparse=True,
                                 include_last_offset=True)
        if not bool(miss.any()):
            return None, None, cached
        return values[miss], sub_offsets(miss), cached

    @torch.no_grad()
    def _write_back(self, index: int, cache: HotRowCache) -> None:
        """Push the cached rows' accumulated gradient through the TT chain: one core update J^T * sum(g)."""
        if not cache.active or not bool(cache.grad_acc.any()):
            return
        table = self.tt[str(index)]
        for g in table.grads:
            g.zero_()
        k = cache.ids.numel()
        self.lookup_backward(table, (cache.ids, torch.arange(k + 1, device=cache.ids.device)), cache.grad_acc,
                             self._step_work)
        self.apply_update(table)
        cache.grad_acc.zero_()

    @torch.no_grad()
    def _populate(self, index: int, cache: HotRowCache) -> None:
        self._write_back(index, cache)
        table = self.tt[str(index)]
        ids = cache.freq.top(cache.capacity)
        rows = tt.rows_from_cores(table.core_tensors(), table.shape, ids)
        cache.fill(ids, rows, self.optim.init_state(rows))

    def cache_populate(self, table: str | None = None) -> None:
        """Write back, then cache the top-K counted rows of ``table`` (default: every cached table)."""
        for key, cache in self.caches.items():
            if table is None or key == str(self.table_index(table)):
                self._populate(int(key), cache)

    def cache_flush(self) -> None:
        """Write every cache's learned updates back into the cores (the cache stays)."""
        for key, cache in self.caches.items():
            self._write_back(int(key), cache)

    @torch.no_grad()
    def optimizer_step(self) -> None:
        for cache in self.caches.values():
            w = cache.weight
            if w.grad is None:
                continue
            g = w.grad.coalesce()
            idx, val = g.indices()[0], g.values()
            cache.grad_acc.index_add_(0, idx, val)
            self.optim.apply_rows(w.data, cache.state, idx, val)
            w.grad = None
        super().optimizer_step()

    def table_parameters(self, table: str) -> list[Tensor]:
        key = str(self.table_index(table))
        params = super().table_parameters(table)
        return params + [self.caches[key].weight.data] if key in self.caches and self.caches[key].active else params

    def materialize_from(self, table: str, params: Sequence[Tensor]) -> Tensor:
        key = str(self.table_index(table))
        cache = self.caches[key] if key in self.caches else None
        if cache is None or not cache.active:
            return super().materialize_from(table, params)
        d = self.tt[key].shape.d
        rows = super().materialize_from(table, params[:d])
        return rows.index_put((cache.ids,), params[d])

    def materialize(self, table: str) -> Tensor:
        key = str(self.table_index(table))
        rows = super().materialize(table)
        if key in self.caches and self.caches[key].active:
            rows = rows.clone()
            rows[self.caches[key].ids] = self.caches[key].weight.detach()
        return rows

    def memory_report(self) -> MemoryReport:
        rep = super().memory_report()
        extra = sum(c.nbytes for c in self.caches.values())
        return MemoryReport(params=rep.params, optimizer_state=rep.optimizer_state,
                            peak_intermediates=rep.peak_intermediates + extra)

    @classmethod
    def stage_plan(cls, shape, index: IndexStats, chunk: int = 20000, cache_rows: int = 0, **_: Any) -> TablePlan:
        """One table's step (impls/core/stage_plan.py): every occurrence its own prefix and item, in chunks of
        ``chunk`` occurrences, forward and backward (the prefixes recomputed); one chunk of rows alive each way.
        Totals nnz*(a+b) forward, nnz*(3a+2b) backward."""
        if int(cache_rows):
            raise ValueError("the work model does not count TT-Rec's hot-row cache yet (cache_rows > 0): its hits "
                             "depend on when the cache was populated")
        nnz = index.nnz
        full, rest = divmod(nnz, chunk)
        sizes = [chunk] * int(full) + ([rest] if rest else [])
        widest = max(sizes, default=0)
        calls = [StageCall(phase, n, n, widest * shape.dim * 4) for phase in ("fwd", "bwd") for n in sizes]
        return TablePlan(calls)

    def step_forward(self, lookups, batch_size: int, batch, work: TTWork):
        """Every TT table's lookups through the cores (a cache's misses where one serves the rest) in one native call
        (ops.ttrec_tables_forward) where the device has its kernel (the CPU); else table by table in stage ops."""
        if not ops.has_kernel("ttrec_tables_forward", batch.values.device):
            return super().step_forward(lookups, batch_size, batch, work)
        outs = ops.ttrec_tables_forward(self.step_tables(lookups), batch.values, batch.offsets, batch.tables,
                                        batch_size, self.chunk, work)
        return outs, [(batch, batch_size)] * len(outs)

    def step_backward(self, tables, saved, grads, work: TTWork) -> None:
        if not tables or not ops.has_kernel("ttrec_tables_backward", grads[0].device):
            super().step_backward(tables, saved, grads, work)
            return
        batch, batch_size = saved[0]
        ops.ttrec_tables_backward(self.cores_and_shapes(tables), batch.values, batch.offsets, batch.tables,
                                  batch_size, self.chunk, grads, [t.grads for t in tables], work)

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
        chunks = list(self._chunks(values))
        bags = bag_ranges(offsets, [(lo, hi) for lo, hi, _, _ in chunks])
        for (lo, hi, rows, items), (b0, b1, seg) in zip(chunks, bags):
            prefix_ids = torch.div(rows, s.last_radix, rounding_mode="floor")
            emb = table.stages_forward(prefix_ids, items, rows % s.last_radix, work)
            ops.gather_pool(emb, items, seg, out[b0:b1], check_indices=False)
        return out, (values, offsets)

    def lookup_backward(self, table: TTTable, saved: Any, grad: Tensor, work: TTWork) -> None:
        values, offsets = saved
        s = table.shape
        bags = bag_ids(offsets, values.numel())
        for lo, hi, rows, items in self._chunks(values):
            d_emb = torch.index_select(grad, 0, bags[lo:hi], out=table.buffer("d_emb", hi - lo, s.dim))
            prefix_ids = torch.div(rows, s.last_radix, rounding_mode="floor")
            table.stages_backward(prefix_ids, items, rows % s.last_radix, d_emb, work)  # recomputes, as FBTT
