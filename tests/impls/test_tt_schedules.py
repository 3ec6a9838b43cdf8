"""The three TT schedules: exact work counts (TTShape's), micro-batching and chunking leave results
unchanged, options and bad input."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, get_impl
from impls.ecorec.collection import micro_batch_bounds

P = (6, 5, 7)  # 210 rows, last radix 7


def batch(seed, B=40, rows=200, max_bag=6):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, max_bag + 1, (B,), generator=g)
    values = (torch.rand(int(lengths.sum()), generator=g) ** 3 * rows).long()  # skewed: duplicates
    return SparseFeatures(values, torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]), B)


def counts(values):
    ids = sorted(set(values.tolist()))
    return values.numel(), len(ids), len({i // P[-1] for i in ids})


def build(name, optim=None, **kw):
    tables = [TableSpec("t", 200, 16)]
    return get_impl(name)(tables, optim or EmbeddingOptim("sgd", lr=0.1), ranks=[3, 5], p=P, q=(2, 2, 4), **{"tt_min_rows": 0, **kw})


def step(emb, sf, seed=0):
    out = emb(sf)
    up = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed))
    (out * up).sum().backward()
    emb.optimizer_step()
    return out.detach()


@pytest.mark.parametrize("name", ["ttrec", "elrec", "ecorec"])
@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_exact_work_counts(name, seed):
    sf = batch(seed)
    nnz, U, E1 = counts(sf.values)
    emb = build(name, **({"micro_batches": 1} if name == "ecorec" else {}))
    s = emb.tt_shape("t")
    a, b = s.prefix_flops(), s.last_flops()
    step(emb, sf)
    w = emb.work_report()
    fwd, bwd = (w.extra["gemms_fwd"], w.extra["flops_fwd"]), (w.extra["gemms_bwd"], w.extra["flops_bwd"])
    assert w.nnz == nnz
    if name == "ttrec":
        assert fwd == (2 * nnz, nnz * (a + b))
        assert bwd == (5 * nnz, nnz * (3 * a + 2 * b))
    elif name == "elrec":
        assert (w.unique, w.e1) == (U, E1)
        assert fwd == (E1 + nnz, E1 * a + nnz * b)
        assert bwd == (5 * U, U * (3 * a + 2 * b))
    else:
        assert (w.unique, w.e1) == (U, E1)
        assert fwd == (E1 + U, E1 * a + U * b)
        assert bwd == (3 * E1 + 2 * U, 3 * E1 * a + 2 * U * b)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10**6), m=st.integers(2, 9), min_chunk=st.integers(1, 12))
def test_ecorec_micro_batches_equal_one_batch(seed, m, min_chunk):
    sf = batch(seed)
    nnz, U, E1 = counts(sf.values)
    one, many = build("ecorec", micro_batches=1), build("ecorec", micro_batches=m, min_chunk=min_chunk)
    torch.testing.assert_close(step(many, sf), step(one, sf), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(many.materialize("t"), one.materialize("t"), rtol=1e-4, atol=1e-6)
    w = many.work_report()
    chunks = micro_batch_bounds(U, m, min_chunk)
    assert w.extra["micro_batches"] == len(chunks)
    sizes = [hi - lo for lo, hi in chunks]
    assert sum(sizes) == U and len(chunks) <= m and max(sizes) - min(sizes) <= 1
    assert w.unique == U and E1 <= w.e1 <= E1 + len(chunks) - 1  # a chunk boundary splits at most one group


def test_ecorec_micro_batching_bounds_intermediates():
    sf = batch(1, B=2000, rows=200, max_bag=8)
    tables = [TableSpec("t", 100_000, 32)]
    peaks = {}
    for m in (1, 4):
        emb = get_impl("ecorec")(tables, EmbeddingOptim("sgd"), ranks=16, micro_batches=m, min_chunk=1,
                                         tt_min_rows=0)
        step(emb, SparseFeatures((sf.values * 499) % 100_000, sf.offsets, sf.batch_size))
        peaks[m] = emb.work_report().intermediate_bytes
    assert peaks[4] <= 1.2 * peaks[1] / 4 + 64 * 1024  # ~1/m of the buffers (plus per-chunk index tensors)


def test_micro_batch_bounds_rule():
    assert micro_batch_bounds(10, 3, 1) == [(0, 4), (4, 7), (7, 10)]
    # the SC24 artifact's rule (tt_emb.py): ceil(U / min_chunk) chunks when ceil(U / m) < min_chunk
    assert micro_batch_bounds(10, 4, 4) == [(0, 4), (4, 7), (7, 10)]
    assert len(micro_batch_bounds(50_000, 4, 20_000)) == 3  # the artifact cuts 3 (min(m, U // min) gave 2)
    assert len(micro_batch_bounds(80_000, 4, 20_000)) == 4 and len(micro_batch_bounds(79_999, 4, 20_000)) == 4
    assert micro_batch_bounds(3, 4, 20000) == [(0, 3)]
    assert micro_batch_bounds(0, 4, 1) == []


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10**6), chunk=st.integers(1, 50))
def test_ttrec_chunks_do_not_change_results(seed, chunk):
    sf = batch(seed)  # bags cross chunk boundaries
    small, whole = build("ttrec", chunk=chunk), build("ttrec", chunk=10**6)
    torch.testing.assert_close(step(small, sf), step(whole, sf), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(small.materialize("t"), whole.materialize("t"), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", ["ttrec", "elrec", "ecorec"])
@pytest.mark.parametrize("kind", ["sgd", "adagrad"])
def test_external_update_equals_fused(name, kind):
    sf = batch(3)
    optim = EmbeddingOptim(kind, lr=0.3) if kind == "sgd" else EmbeddingOptim(kind, lr=0.05, eps=1e-4)  # see contract
    fused = build(name, optim)
    external = build(name, optim, fused=False)
    out = external(sf)
    (out * torch.randn(out.shape, generator=torch.Generator().manual_seed(0))).sum().backward()
    assert all(c.grad is not None for c in external.tt["0"].cores)  # dense core gradients, FBTT sparse=False
    external.optimizer_step()
    step(fused, sf)
    want = fused.materialize("t")
    # fp32 sums in another order (threads, fused vs dense gradients): tolerance on the table's scale, as the
    # contract suite does; an element that is a cancelling sum is off by ~1e-7 absolute
    torch.testing.assert_close(external.materialize("t"), want, rtol=1e-5, atol=1e-5 * float(want.abs().max()))


def test_only_large_tables_are_tt():
    tables = [TableSpec("big", 5000, 16), TableSpec("small", 50, 16)]
    emb = get_impl("ecorec")(tables, EmbeddingOptim("adagrad", lr=0.1), ranks=4, tt_min_rows=1000)
    assert emb.tt_shape("big") is not None and emb.tt_shape("small") is None
    emb2 = get_impl("elrec")(tables, EmbeddingOptim("sgd"), tt_tables=["small"], ranks={"small": 2})
    assert emb2.tt_shape("small").ranks == (2, 2) and emb2.tt_shape("big") is None
    rep = emb.memory_report()
    assert rep.params < 5000 * 16 * 4 + 50 * 16 * 4  # compressed below the dense size
    assert rep.optimizer_state == rep.params


@pytest.mark.parametrize(
    "name,kwargs,match",
    [
        ("ttrec", dict(p={"t": (2, 2, 2)}), "table 't'.*cover 8 rows < num_embeddings 200"),
        ("elrec", dict(q=(2, 2, 2)), "multiply to 8, not the dim 16"),
        ("elrec", dict(cores=4), r"supports \(3,\) TT cores"),
        ("ecorec", dict(micro_batches=0), "micro_batches must be >= 1"),
        ("ecorec", dict(ranks={"nope": 4}), r"ranks names unknown table\(s\) \['nope'\]"),
        ("ttrec", dict(tt_tables=["nope"]), "tt_tables names unknown table"),
        ("ttrec", dict(chunk=0), "chunk must be >= 1"),
        ("ttrec", dict(weight_dist="gauss"), "unknown weight_dist"),
        ("ttrec", dict(cores=5), "supports"),
        ("elrec", dict(ranks=[4, 4, 4]), "3 cores need 2 inner ranks"),
    ],
)
def test_bad_options_fail_at_construction(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        get_impl(name)([TableSpec("t", 200, 16)], EmbeddingOptim(), tt_min_rows=0, **kwargs)


def test_dim_multiple_and_unknown_option():
    with pytest.raises(ValueError, match="divisible by 4; table 't' has 6"):
        get_impl("ecorec")([TableSpec("t", 200, 6)], EmbeddingOptim(), tt_min_rows=0)
    get_impl("elrec")([TableSpec("t", 200, 6)], EmbeddingOptim(), ranks=2, tt_min_rows=0)  # EL-Rec has no such limit
    with pytest.raises(TypeError, match="unknown option"):
        get_impl("elrec")([TableSpec("t", 200, 16)], EmbeddingOptim(), micro_batches=2, tt_min_rows=0)


@pytest.mark.parametrize("kind", ["sgd", "adagrad"])
@pytest.mark.parametrize("d,p,q,ranks", [(2, (15, 14), (4, 4), [6]), (4, (3, 4, 4, 5), (2, 2, 2, 2), [3, 4, 2])])
def test_ttrec_two_and_four_cores(d, p, q, ranks, kind):
    from tests.impls.test_contract import reference_forward, reference_step

    tables = [TableSpec("t", 200, 16, pooling="mean")]
    optim = EmbeddingOptim(kind, lr=0.2) if kind == "sgd" else EmbeddingOptim(kind, lr=0.05, eps=1e-4)
    emb = get_impl("ttrec")(tables, optim, cores=d, p=p, q=q, ranks=ranks, chunk=17, tt_min_rows=0)
    assert emb.tt_shape("t").d == d
    sf = batch(5)
    upstream = torch.randn(sf.batch_size, 16, generator=torch.Generator().manual_seed(1))
    expected = reference_step(emb, tables, sf, upstream, optim)
    out = emb(sf)
    torch.testing.assert_close(out, reference_forward(emb, tables, sf), rtol=1e-5, atol=1e-6)
    (out * upstream).sum().backward()
    emb.optimizer_step()
    torch.testing.assert_close(emb.materialize("t"), expected[0], rtol=1e-4, atol=1e-6)
