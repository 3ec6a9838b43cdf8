"""The one batch iterator over every source (SyntheticSource, PreparedSource, MetaTraceSource: anything
with ``tables`` and ``batch(index, batch_size)``). Rank ``r`` of ``world_size`` gets its contiguous slice
of each global batch (sizes differ by at most one sample), and a background thread builds up to
``prefetch`` batches ahead so loading stays off the training thread. Errors in the worker are raised in
the consumer; closing the iterator (or leaving a ``with`` block) stops the worker."""
from __future__ import annotations

import queue
import threading
from typing import Any, Iterator

from impls.data.batch import Batch

_DONE = object()


def rank_rows(batch_size: int, rank: int, world_size: int) -> tuple[int, int]:
    """The [lo, hi) samples of a global batch that rank ``rank`` gets (sizes differ by at most one)."""
    return batch_size * rank // world_size, batch_size * (rank + 1) // world_size


def rank_slice(batch: Batch, rank: int, world_size: int) -> Batch:
    """Rank ``rank``'s contiguous share of a global batch."""
    if world_size == 1:
        return batch
    lo, hi = rank_rows(batch.batch_size, rank, world_size)
    return Batch(batch.dense[lo:hi], batch.sparse.split_batch(world_size)[rank], batch.labels[lo:hi])


class BatchIterator:
    def __init__(self, source: Any, batch_size: int, count: int, start: int = 0, rank: int = 0,
                 world_size: int = 1, prefetch: int = 2) -> None:
        if batch_size <= 0 or count < 0 or prefetch < 1:
            raise ValueError(f"need batch_size > 0, count >= 0, prefetch >= 1; got {batch_size}, {count}, {prefetch}")
        if not 0 <= rank < world_size or world_size > batch_size:
            raise ValueError(f"rank {rank} of world size {world_size} cannot slice a global batch of {batch_size}")
        self.source, self.batch_size, self.count, self.start = source, batch_size, count, start
        self.rank, self.world_size, self.prefetch = rank, world_size, prefetch
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def tables(self):
        return self.source.tables

    def __len__(self) -> int:
        return self.count

    def _put(self, q: queue.Queue, item: Any) -> bool:
        """Hand ``item`` over unless the consumer stopped (then False): a consumer that leaves early, before the
        last batch or the end mark, never leaves this thread blocked on a full queue."""
        while not self._stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self, q: queue.Queue) -> None:
        try:
            for k in range(self.count):
                if self._stop.is_set():
                    return
                b = rank_slice(self.source.batch(self.start + k, self.batch_size), self.rank, self.world_size)
                if not self._put(q, b):
                    return
            self._put(q, _DONE)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            self._put(q, exc)

    def __iter__(self) -> Iterator[Batch]:
        self.close()
        self._stop.clear()
        q: queue.Queue = queue.Queue(maxsize=self.prefetch)
        self._thread = threading.Thread(target=self._produce, args=(q,), daemon=True, name="batch-prefetch")
        self._thread.start()
        try:
            while True:
                item = q.get()
                if item is _DONE:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self.close()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> "BatchIterator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Epoch:
    """One pass over a dataset split as batches: batch k of size B holds the samples ``order[k*B : (k+1)*B]``
    (sorted within the batch, so a memory-mapped split is read in order; the sample order inside a batch does not
    change its mean loss). ``order`` is a seeded permutation per epoch (``shuffle``) or the file order. A source
    for BatchIterator: ``batch(k, B)``; only whole batches (the last partial one is dropped, as in dlrm's and
    TorchRec's training loops)."""

    def __init__(self, source: Any, seed: int, epoch: int, shuffle: bool = True) -> None:
        import numpy as np

        n = int(source.num_rows)
        self.source, self.tables = source, source.tables
        self.order = (np.random.default_rng([seed, epoch]).permutation(n) if shuffle else np.arange(n))

    def batches(self, batch_size: int) -> int:
        """Whole batches of ``batch_size`` in the epoch."""
        return len(self.order) // batch_size

    def batch(self, index: int, batch_size: int) -> Batch:
        import numpy as np

        rows = self.order[index * batch_size : (index + 1) * batch_size]
        if len(rows) != batch_size:
            raise IndexError(f"batch {index} of {batch_size} runs past the epoch's {len(self.order)} samples")
        return self.source.take(np.sort(rows))
