"""The batch iterator: same batches as the source, rank slices that tile the global batch, prefetch off
the consumer's thread, worker errors surfaced, early stop."""
import threading

import pytest
import torch

from impls.data.loader import BatchIterator, rank_slice
from impls.data.presets import get_preset
from impls.data.synthetic import SyntheticSource


def source():
    return SyntheticSource(get_preset("uniform", num_tables=3, rows=500, dim=8, hotness=2, bag_sizes="random"))


def test_yields_the_sources_batches_in_order():
    src = source()
    got = list(BatchIterator(src, 16, 4, start=2))
    assert len(got) == 4
    for k, b in enumerate(got):
        want = src.batch(2 + k, 16)
        assert torch.equal(b.sparse.values, want.sparse.values) and torch.equal(b.labels, want.labels)


@pytest.mark.parametrize("world", [2, 3])
def test_rank_slices_tile_the_global_batch(world):
    src = source()
    parts = [next(iter(BatchIterator(src, 10, 1, rank=r, world_size=world))) for r in range(world)]
    whole = src.batch(0, 10)
    assert sum(p.batch_size for p in parts) == 10
    assert torch.equal(torch.cat([p.dense for p in parts]), whole.dense)
    assert torch.equal(torch.cat([p.labels for p in parts]), whole.labels)
    for t in range(3):
        vals = torch.cat([p.sparse.table(t)[0] for p in parts])
        assert torch.equal(vals, whole.sparse.table(t)[0])
    assert rank_slice(whole, 0, 1) is whole


def test_prefetch_runs_in_a_worker_thread_and_errors_surface():
    class Recording:
        tables = ()

        def __init__(self):
            self.threads = set()

        def batch(self, i, B):
            self.threads.add(threading.current_thread().name)
            if i == 3:
                raise RuntimeError("disk gone at batch 3")
            return source().batch(i, B)

    rec = Recording()
    it = BatchIterator(rec, 8, 5, prefetch=1)
    seen = []
    with pytest.raises(RuntimeError, match="disk gone at batch 3"):
        for b in it:
            seen.append(b)
    assert len(seen) == 3 and rec.threads == {"batch-prefetch"}


def test_early_stop_and_bad_arguments():
    it = BatchIterator(source(), 8, 100, prefetch=2)
    for k, _ in enumerate(it):
        if k == 1:
            break
    it.close()
    assert it._thread is None
    with pytest.raises(ValueError, match="cannot slice"):
        BatchIterator(source(), 4, 1, rank=0, world_size=5)
    with pytest.raises(ValueError, match="batch_size > 0"):
        BatchIterator(source(), 0, 1)


def test_closing_while_the_worker_hands_over_its_last_batch_does_not_hang():
    """A training loop leaves an epoch early (early stop, divergence) while the worker waits to hand over the
    epoch's last batch; close() must not then leave it blocked on the end mark (it joined it forever before)."""
    it = BatchIterator(source(), 8, 3, prefetch=1)
    stream = iter(it)
    next(stream)  # batch 1 sits in the queue, the worker waits to put batch 2, the last
    threading.Event().wait(0.3)
    done = threading.Event()
    threading.Thread(target=lambda: (it.close(), done.set()), daemon=True).start()
    assert done.wait(5), "close() hung on the worker's end mark"
