"""EL-Rec's host-memory pipeline: prefetched host-table rows, exact updates (stale rows refreshed), equal to
sequential training, and the contract with the pipeline on."""
import pytest
import torch

from impls.api import EmbeddingOptim, get_impl
from impls.data.presets import get_preset
from impls.data.synthetic import SyntheticSource
from tests.impls.test_contract import reference_forward, reference_step


def source():
    return SyntheticSource(get_preset("criteo-kaggle", max_rows=5000, dim=8))


def build(src, optim, pipeline):
    # tables under 4000 rows stay uncompressed (EL-Rec's host tables); the rest are TT
    return get_impl("elrec")(src.tables, optim, ranks=8, seed=1, tt_min_rows=4000, host_pipeline=pipeline)


def assert_same_tables(pipe, seq, tables):
    """Host tables equal to rounding; TT tables (untouched by the pipeline) to the rounding of their
    multithreaded gradient sums, relative to the table's scale."""
    for i, t in enumerate(tables):
        a, b = pipe.materialize(t.name), seq.materialize(t.name)
        if str(i) in pipe.dense:
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6 * float(b.abs().max()))
        else:
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5 * float(b.abs().max()))


@pytest.mark.parametrize("kind", ["sgd", "adagrad"])
def test_pipeline_equals_sequential_training(kind):
    src = source()
    batches = src.batches(5, 256)
    optim = EmbeddingOptim(kind, lr=0.5) if kind == "sgd" else EmbeddingOptim(kind, lr=0.05)
    up = torch.randn(256, 26 * 8, generator=torch.Generator().manual_seed(0)) / 256  # a mean loss
    seq, pipe = build(src, optim, False), build(src, optim, True)
    assert seq.pipeline is None and len(pipe.dense) > 0 and len(pipe.tt) > 0
    steps = 10
    for s in range(steps):
        pipe.prefetch(batches[(s + 1) % 5].sparse)  # the next batch, while this one trains
        for emb in (seq, pipe):
            (emb(batches[s % 5].sparse) * up).sum().backward()
            emb.optimizer_step()
    assert_same_tables(pipe, seq, src.tables)
    stats = pipe.work_report().extra["host_pipeline"]
    assert stats["prefetched"] == steps - 1 and stats["synchronous"] == 1
    assert stats["rows_refreshed"] > 0  # rows of the next batch that this step updated were re-read


def test_unprefetched_or_skipped_batches_are_gathered_exactly():
    src = source()
    batches = src.batches(4, 128)
    optim = EmbeddingOptim("sgd", lr=0.5)
    up = torch.randn(128, 26 * 8) / 128
    seq, pipe = build(src, optim, False), build(src, optim, True)
    pipe.prefetch(batches[3].sparse)  # a batch that comes later than announced
    for s in range(4):
        for emb in (seq, pipe):
            (emb(batches[s].sparse) * up).sum().backward()
            emb.optimizer_step()
    assert_same_tables(pipe, seq, src.tables)
    stats = pipe.work_report().extra["host_pipeline"]
    assert stats["prefetched"] == 1 and stats["synchronous"] == 3


@pytest.mark.parametrize("kind", ["sgd", "adagrad"])
def test_contract_with_the_pipeline_on(kind):
    src = source()
    tables = src.tables
    optim = EmbeddingOptim(kind, lr=0.5) if kind == "sgd" else EmbeddingOptim(kind, lr=0.05, eps=1e-4)
    emb = build(src, optim, True)
    sf = src.batch(0, 64).sparse
    emb.prefetch(sf)
    torch.testing.assert_close(emb(sf), reference_forward(emb, tables, sf), rtol=1e-5, atol=1e-6)
    upstream = torch.randn(64, 26 * 8, generator=torch.Generator().manual_seed(0))
    expected = reference_step(emb, tables, sf, upstream, optim)
    emb.prefetch(sf)
    (emb(sf) * upstream).sum().backward()
    emb.optimizer_step()
    for t, w in zip(tables, expected):
        atol = max(1e-6, 1e-5 * float(w.abs().max()))
        torch.testing.assert_close(emb.materialize(t.name), w, rtol=1e-4, atol=atol)


def test_bad_ids_still_fail_with_the_clear_error():
    src = source()
    emb = build(src, EmbeddingOptim("sgd"), True)
    sf = src.batch(0, 8).sparse
    bad = type(sf)(sf.values.clone(), sf.offsets, 8)
    bad.values[0] = 10**9
    emb.prefetch(bad)
    with pytest.raises(ValueError, match="table 'C1'.*bag 0"):
        emb(bad)
