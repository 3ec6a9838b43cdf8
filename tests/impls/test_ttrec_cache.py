"""TT-Rec's hot-row cache: FBTT's bounded-probe frequency table, populate, split lookups, the contract with
the cache active, and the write-back that keeps what cached rows learn."""
import collections

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.api import EmbeddingOptim, get_impl
from impls.core import tt
from impls.data.presets import get_preset
from impls.data.synthetic import SyntheticSource
from impls.ttrec.cache import FrequencyTable
from tests.impls.test_contract import reference_forward, reference_step


@settings(max_examples=30, deadline=None)
@given(batches=st.lists(st.lists(st.integers(0, 300), min_size=1, max_size=60), min_size=1, max_size=5),
       size=st.sampled_from([16, 64, 1024]))
def test_frequency_table_counts_placed_ids_exactly(batches, size):
    f = FrequencyTable(size, torch.device("cpu"))
    true = collections.Counter()
    for b in batches:
        f.add(torch.tensor(b))
        true.update(b)
    ids = torch.tensor(sorted(true))
    got = f.count(ids)
    placed = got > 0
    # a placed id has its exact count; an id is missing only when its 3 probe slots were taken
    assert all(int(got[i]) == true[int(ids[i])] for i in range(len(ids)) if placed[i])
    assert int((~placed).sum()) <= f.dropped
    assert int(placed.sum()) <= size
    if size >= 1024:  # all of 0..300 place within 3 probes here (checked), so every subset does too
        assert bool(placed.all())
    k = min(5, int(placed.sum()))
    top = f.top(5)
    assert len(top) == k
    best = sorted((true[int(i)] for i in ids[placed]), reverse=True)[:k]
    assert sorted((true[int(i)] for i in top), reverse=True) == best
    assert int((f.keys >= 0).sum()) == k  # everything else evicted, as FBTT


def source():
    return SyntheticSource(get_preset("uniform", num_tables=2, rows=3000, dim=8, alpha=1.2, hotness=4))


def cached(optim, **kw):
    return get_impl("ttrec")(source().tables, optim, ranks=8, seed=1, cache_rows=64, **kw, tt_min_rows=0)


def test_populate_keeps_the_forward_and_reports_hits():
    src = source()
    b = src.batch(0, 256)
    emb = cached(EmbeddingOptim("sgd", lr=0.1))
    before = emb(b.sparse)
    assert "cache_hit_rate" in emb.work_report().extra and emb.work_report().extra["cache_hits"] == 0
    emb.cache_populate()
    after = emb(b.sparse)
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-6)
    rep = emb.work_report().extra
    assert rep["cache_hits"] > 0.5 * rep["cache_lookups"] and rep["cache_hit_rate"] == rep["cache_hits"] / rep["cache_lookups"]
    assert rep["cache_lookups"] == b.sparse.nnz
    plain = get_impl("ttrec")(src.tables, EmbeddingOptim(), ranks=8, seed=1, tt_min_rows=0)
    plain(b.sparse)
    assert emb.work_report().gemms < plain.work_report().gemms  # cached lookups skip the TT chain
    assert emb.memory_report().peak_intermediates > 0


@pytest.mark.parametrize("kind", ["sgd", "adagrad"])
def test_contract_with_the_cache_active(kind):
    """The contract suite's checks with a populated cache: forward = embedding_bag over materialize (cached
    rows included) and one step = the dense optimizer on the table's parameters (cores + cache rows)."""
    src = source()
    tables = src.tables
    optim = EmbeddingOptim(kind, lr=0.5) if kind == "sgd" else EmbeddingOptim(kind, lr=0.05, eps=1e-4)
    emb = cached(optim)
    emb(src.batch(5, 256).sparse)  # count, then cache the hot rows
    emb.cache_populate()
    sf = src.batch(1, 64).sparse
    torch.testing.assert_close(emb(sf), reference_forward(emb, tables, sf), rtol=1e-5, atol=1e-6)
    upstream = torch.randn(sf.batch_size, 16, generator=torch.Generator().manual_seed(0))
    expected = reference_step(emb, tables, sf, upstream, optim)
    assert len(emb.table_parameters("t0")) == 4  # 3 cores + the cache rows
    (emb(sf) * upstream).sum().backward()
    emb.optimizer_step()
    for t, w in zip(tables, expected):
        atol = max(1e-6, 1e-5 * float(w.abs().max()))
        torch.testing.assert_close(emb.materialize(t.name), w, rtol=1e-4, atol=atol)


def train(src, cache, write_back=True, steps=24):
    batches = src.batches(8, 128)
    up = torch.randn(128, 16, generator=torch.Generator().manual_seed(0)) / 128
    opts = dict(cache_rows=64, cache_populate_every=4) if cache else {}
    emb = get_impl("ttrec")(src.tables, EmbeddingOptim("sgd", lr=0.5), ranks=8, seed=1, **opts, tt_min_rows=0)
    if not write_back:  # FBTT: re-populate overwrites the cached rows' updates
        emb._write_back = lambda index, c: c.grad_acc.zero_()
    for s in range(steps):
        (emb(batches[s % 8].sparse) * up).sum().backward()
        emb.optimizer_step()
    if cache and write_back:
        emb.cache_flush()
    return emb


def core_rows(emb, name):
    t = emb.tt[str(emb.table_index(name))]
    return tt.materialize(t.core_tensors(), t.shape)


def test_write_back_keeps_what_cached_rows_learn():
    """24 SGD steps, populate every 4, ~75 % of lookups cached. The cores trained with the cache end within
    20 % (of the distance the cores moved without a cache) of the uncached run; dropping the cached rows'
    updates at re-populate, as FBTT does, leaves them over 50 % away. Measured: 9-13 % vs 78-80 %."""
    src = source()
    start = get_impl("ttrec")(src.tables, EmbeddingOptim("sgd", lr=0.5), ranks=8, seed=1, tt_min_rows=0)
    off, on, lost = train(src, False), train(src, True), train(src, True, write_back=False)
    assert on.work_report().extra["cache_hit_rate"] > 0.5
    for t in ("t0", "t1"):
        moved = (core_rows(off, t) - core_rows(start, t)).norm()
        assert (core_rows(on, t) - core_rows(off, t)).norm() <= 0.2 * moved
        assert (core_rows(lost, t) - core_rows(off, t)).norm() >= 0.5 * moved


def test_cache_options_are_checked():
    tables = source().tables
    with pytest.raises(ValueError, match="cache_rows and cache_populate_every must be >= 0"):
        get_impl("ttrec")(tables, EmbeddingOptim(), cache_rows=-1, tt_min_rows=0)
    with pytest.raises(ValueError, match="cannot hold"):
        get_impl("ttrec")(tables, EmbeddingOptim(), cache_rows=64, cache_hash_size=8, tt_min_rows=0)
    emb = get_impl("ttrec")(tables, EmbeddingOptim(), ranks=8, tt_min_rows=0)
    emb(source().batch(0, 8).sparse)
    assert not emb.caches and "cache_hit_rate" not in emb.work_report().extra
