"""EL-Rec's host-memory pipeline (EL-Rec, SC'22; its artifact's CPU-GPU pipeline): the uncompressed tables (rows under
the TT threshold) stay in host memory and a worker prepares the next batch's rows while the current batch trains.

``prefetch(features)`` (the batch after the current one) starts a worker thread that takes each host
table's distinct ids and copies their rows into a staging buffer. ``take`` hands the current batch its
staged rows: ids, inverse and a [U, D] leaf tensor the forward pools from. Exactness: the worker may have
copied a row before the previous step's update wrote it, so ``take`` re-reads every staged row that the
previous step updated (the only rows written since), so no stale row is ever used; EL-Rec's artifact
repairs only part of this (it copies the previous batch's input rows). A batch that was not prefetched is
gathered synchronously. On CPU "host" and "device" are one memory; the gather still overlaps compute, and
the time the trainer waited for it is reported beside the time the worker spent.

On a GPU (``device`` cuda) the tables are pinned host memory (ELRec keeps them there and updates them there);
the worker reads the batch's ids to the host, gathers the rows on the host and copies rows and inverse to the
device on a side stream, which the trainer's stream waits for in ``take``; ids stay on the host, where the
update and the staleness check use them."""
from __future__ import annotations

import contextlib
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import torch
from torch import Tensor

MAX_AHEAD = 2  # the batch being taken next and the one after it

from impls.api import SparseFeatures


@dataclass
class Staged:
    ids: Tensor  # distinct ids of the batch in this table (sorted; where the table lives)
    inverse: Tensor  # occurrence -> position in ids (on the device)
    rows: Tensor  # [U, D] copies of the table rows on the device: a leaf the forward pools from
    ready: object = None  # CUDA: the event after the copies to the device


@dataclass
class PipelineStats:
    prefetched: int = 0  # batches served from a prefetch
    synchronous: int = 0  # batches gathered on the trainer's thread
    rows_staged: int = 0
    rows_refreshed: int = 0  # staged rows re-read because the previous step updated them
    gather_ms: float = 0.0  # worker time spent gathering
    wait_ms: float = 0.0  # trainer time spent waiting for the worker


class HostPipeline:
    def __init__(self, tables: dict[int, Tensor], device: torch.device | str = "cpu") -> None:
        self.tables = tables  # table index -> the host table (updated in place by the optimizer)
        self.device = torch.device(device)
        # CUDA: the side stream the worker copies on (the trainer's stream waits for its events)
        self.stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="elrec-host")
        # (values, generation at submission, future), oldest first; at most MAX_AHEAD
        self.pending: list[tuple[dict[int, Tensor], int, Future]] = []
        self.log: list[dict[int, Tensor]] = []  # ids each optimizer step wrote, per table
        self.base = 0  # generation of log[0]
        self.stats = PipelineStats()

    def _gather(self, values: dict[int, Tensor], after=None) -> tuple[dict[int, Staged], float]:
        """Each table's distinct ids, inverse and rows; on a GPU gathered on the host and copied on the side
        stream once the trainer's stream has produced ``values`` (``after``: its event)."""
        t0 = time.perf_counter()
        out = {}
        on_side = torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext()
        with on_side:
            if after is not None:
                self.stream.wait_event(after)
            for i, v in values.items():
                ids, inverse = torch.unique(v.cpu() if self.stream is not None else v, return_inverse=True)
                table = self.tables[i]
                if self.stream is None:
                    rows = table.index_select(0, ids)
                else:  # gathered straight into pinned memory, then copied without blocking this thread
                    rows = torch.empty((ids.numel(), table.shape[1]), dtype=table.dtype, pin_memory=True)
                    torch.index_select(table, 0, ids, out=rows)
                    rows = rows.to(self.device, non_blocking=True)
                    inverse = inverse.pin_memory().to(self.device, non_blocking=True)
                out[i] = Staged(ids, inverse, rows)
            if self.stream is not None:
                ready = torch.cuda.Event()
                ready.record(self.stream)
                for st in out.values():
                    st.ready = ready
        return out, (time.perf_counter() - t0) * 1e3

    def _values(self, features: SparseFeatures) -> dict[int, Tensor]:
        per_table = features.tables()
        return {i: per_table[i][0] for i in self.tables}

    def _produced(self):
        """CUDA: an event on the trainer's stream after the batch it hands over (None on CPU)."""
        if self.stream is None:
            return None
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(self.device))
        return event

    def prefetch(self, features: SparseFeatures) -> None:
        while len(self.pending) >= MAX_AHEAD:  # never more than two batches ahead
            self.pending.pop(0)[2].result()
        values = self._values(features)
        self.pending.append((values, self.base + len(self.log), self.pool.submit(self._gather, values,
                                                                                 self._produced())))

    def drain(self) -> None:
        while self.pending:
            self.pending.pop(0)[2].result()  # surface a worker error; never leave a gather running

    def take(self, features: SparseFeatures) -> dict[int, Staged]:
        values = self._values(features)
        staged, since = None, self.base + len(self.log)
        match = next((k for k, (want, _, _) in enumerate(self.pending)
                      if all(torch.equal(want[i], values[i]) for i in values)), None)
        if match is not None:  # prefetches queued before the match were for batches that never came
            for _, _, fut in self.pending[:match]:
                fut.result()
            _, since, fut = self.pending[match]
            del self.pending[: match + 1]
            t0 = time.perf_counter()
            staged, gather_ms = fut.result()
            self.stats.wait_ms += (time.perf_counter() - t0) * 1e3
            self.stats.gather_ms += gather_ms
            self.stats.prefetched += 1
        if staged is None:  # not prefetched (or another batch came): gather here
            since = self.base + len(self.log)
            staged, gather_ms = self._gather(values, self._produced())
            self.stats.gather_ms += gather_ms
            self.stats.wait_ms += gather_ms
            self.stats.synchronous += 1
        writes = self.log[since - self.base :]  # the steps that ran after this gather was submitted
        for i, st in staged.items():
            if st.ready is not None:  # the device copies are done before this stream reads the rows
                stream = torch.cuda.current_stream(self.device)
                stream.wait_event(st.ready)
                st.rows.record_stream(stream)
                st.inverse.record_stream(stream)
            done = [w[i] for w in writes if i in w]
            if done and st.ids.numel():
                stale = torch.isin(st.ids, torch.cat(done))
                if bool(stale.any()):
                    fresh = self.tables[i].index_select(0, st.ids[stale])
                    st.rows[stale.to(st.rows.device)] = fresh.to(st.rows.device)
                    self.stats.rows_refreshed += int(stale.sum())
            self.stats.rows_staged += st.ids.numel()
            st.rows.requires_grad_(True)
        self._trim()
        return staged

    def wrote(self, ids: dict[int, Tensor]) -> None:
        """Record the rows one optimizer step wrote (per table)."""
        self.log.append(ids)
        self._trim()

    def _trim(self) -> None:
        """Forget writes no pending gather can have missed."""
        keep_from = min([g for _, g, _ in self.pending], default=self.base + len(self.log))
        drop = keep_from - self.base
        if drop > 0:
            del self.log[:drop]
            self.base += drop

    def close(self) -> None:
        self.drain()
        self.pool.shutdown(wait=True)
