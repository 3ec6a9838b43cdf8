"""The compression methods against float64 oracles written as loops over ids (their published rules, computed
independently of the implementations' vectorized paths), and their sizing from a byte budget."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, get_impl
from impls.compress.budget import shares
from impls.compress.hashing import P, UniversalHash
from impls.compress.md import md_bytes, power_rule_dims
from impls.compress.qr import collisions_for, qr_bytes

TABLES = [TableSpec("a", 40, 8), TableSpec("b", 17, 8, pooling="mean"), TableSpec("c", 9, 8)]
# B = 3; a: [0, 39, 39], [], [5]; b: [16], [2, 2, 3], []; c: [8], [0], [3, 4]
BATCH = SparseFeatures(torch.tensor([0, 39, 39, 5, 16, 2, 2, 3, 8, 0, 3, 4]),
                       torch.tensor([0, 3, 3, 4, 5, 8, 8, 9, 10, 12]), 3)
LR = 0.3


def _bags(t):
    v, o = BATCH.table(t)
    return [v[int(o[b]):int(o[b + 1])].tolist() for b in range(BATCH.batch_size)]


def _oracle(tables, embed):
    """The pooled output in float64: ``embed(t, x)`` is id x's vector of table t."""
    out = np.zeros((BATCH.batch_size, sum(t.dim for t in tables)))
    at = 0
    for t, spec in enumerate(tables):
        for b, bag in enumerate(_bags(t)):
            w = 1.0 / len(bag) if spec.pooling == "mean" and bag else 1.0
            for x in bag:
                out[b, at:at + spec.dim] += w * embed(t, x)
        at += spec.dim
    return out


def _step_and_compare(emb, forward, expected_after):
    upstream = torch.randn(BATCH.batch_size, emb.output_dim, generator=torch.Generator().manual_seed(5),
                           dtype=torch.float64)
    out = emb(BATCH)
    np.testing.assert_allclose(out.detach().double().numpy(), forward(upstream.numpy()), rtol=1e-5, atol=1e-6)
    (out * upstream.float()).sum().backward()
    emb.optimizer_step()
    for name, want in expected_after(upstream.numpy()).items():
        np.testing.assert_allclose(emb.materialize(name).double().numpy(), want, rtol=1e-4, atol=1e-5)


def _per_id_upstream(tables, upstream):
    """{(table, id): summed upstream gradient of the id's vector} of the batch (mean bags weighted)."""
    g = {}
    at = 0
    for t, spec in enumerate(tables):
        for b, bag in enumerate(_bags(t)):
            w = 1.0 / len(bag) if spec.pooling == "mean" and bag else 1.0
            for x in bag:
                g[(t, x)] = g.get((t, x), 0) + w * upstream[b, at:at + spec.dim]
        at += spec.dim
    return g


@settings(max_examples=50, deadline=None)
@given(ids=st.lists(st.integers(0, 2**63 - 1), min_size=1, max_size=20), rows=st.integers(1, 10**9),
       k=st.integers(1, 3), seed=st.integers(0, 2**31))
def test_universal_hash_is_exact_carter_wegman(ids, rows, k, seed):
    h = UniversalHash(seed, "t", k, rows)
    got = h(torch.tensor(ids, dtype=torch.int64))
    for i, x in enumerate(ids):
        limbs = (x & (2**30 - 1), (x >> 30) & (2**30 - 1), x >> 60)
        for j in range(k):
            want = (sum(a * v for a, v in zip(h.a[j], limbs)) + h.b[j]) % P % rows
            assert int(got[i, j]) == want


@pytest.mark.parametrize("storage", ["torch", "fbgemm"])
def test_hash_forward_and_sgd_step_against_float64_loops(storage):
    if storage == "fbgemm":
        pytest.importorskip("fbgemm_gpu")
    emb = get_impl("hash")(TABLES, EmbeddingOptim("sgd", lr=LR), rows={"a": 7, "b": 5, "c": 9}, hashes=2,
                           storage=storage, seed=1)
    W = {t.name: emb.inner.materialize(t.name).double().numpy().copy() for t in TABLES}

    def rows_of(t, x):
        if not emb.hashed[t]:
            return [x]
        return [int(r) for r in emb.hashers[t](torch.tensor([x]))[0]]

    assert emb.hashed == [True, True, False] and emb.kept == [7, 5, 9]  # c keeps all 9 rows: no hash
    embed = lambda t, x: sum(W[TABLES[t].name][r] for r in rows_of(t, x))  # noqa: E731

    def after(up):
        new = {k: v.copy() for k, v in W.items()}
        for (t, x), g in _per_id_upstream(TABLES, up).items():
            for r in rows_of(t, x):
                new[TABLES[t].name][r] -= LR * g
        return {t.name: np.stack([sum(new[t.name][r] for r in rows_of(i, x)) for x in range(t.num_embeddings)])
                for i, t in enumerate(TABLES)}

    _step_and_compare(emb, lambda up: _oracle(TABLES, embed), after)


@pytest.mark.parametrize("operation", ["mult", "add", "concat"])
def test_qr_forward_and_sgd_step_against_float64_loops(operation):
    emb = get_impl("qr")(TABLES, EmbeddingOptim("sgd", lr=LR), collisions={"a": 6, "b": 4}, operation=operation,
                         min_rows=20, budget=1.0, seed=2)
    assert emb.collisions == [6, 4, None]  # c: 9 rows under min_rows, no collisions given: whole
    Q = {t.name: [p.double().numpy().copy() for p in emb.table_parameters(t.name)] for t in TABLES}

    def vec(params, t, x):
        if len(params) == 1:
            return params[0][x]
        c = emb.collisions[t]
        q, r = params[0][x // c], params[1][x % c]
        return q * r if operation == "mult" else q + r if operation == "add" else np.concatenate([q, r])

    def after(up):
        new = {k: [p.copy() for p in v] for k, v in Q.items()}
        for (t, x), g in _per_id_upstream(TABLES, up).items():
            ps, c = Q[TABLES[t].name], emb.collisions[t]
            if c is None:
                new[TABLES[t].name][0][x] -= LR * g
                continue
            q, r = ps[0][x // c], ps[1][x % c]
            gq, gr = (g * r, g * q) if operation == "mult" else (g, g) if operation == "add" else \
                (g[:q.size], g[q.size:])
            new[TABLES[t].name][0][x // c] -= LR * gq
            new[TABLES[t].name][1][x % c] -= LR * gr
        return {t.name: np.stack([vec(new[t.name], i, x) for x in range(t.num_embeddings)])
                for i, t in enumerate(TABLES)}

    _step_and_compare(emb, lambda up: _oracle(TABLES, lambda t, x: vec(Q[TABLES[t].name], t, x)), after)


def test_md_forward_and_sgd_step_against_float64_loops():
    emb = get_impl("md")(TABLES, EmbeddingOptim("sgd", lr=LR), dims={"a": 2, "b": 8, "c": 3}, seed=3)
    assert emb.dims == [2, 8, 3] and [len(s) for s in emb.slots] == [2, 1, 2]  # b at the full dim: no projection
    E = {t.name: [p.double().numpy().copy() for p in emb.table_parameters(t.name)] for t in TABLES}

    def vec(ps, x):
        return ps[0][x] if len(ps) == 1 else ps[1] @ ps[0][x]

    def after(up):
        new = {k: [p.copy() for p in v] for k, v in E.items()}
        for (t, x), g in _per_id_upstream(TABLES, up).items():
            ps = E[TABLES[t].name]
            if len(ps) == 1:
                new[TABLES[t].name][0][x] -= LR * g
            else:  # v = P e: dv/de = P^T g, dv/dP = g e^T
                new[TABLES[t].name][0][x] -= LR * (ps[1].T @ g)
                new[TABLES[t].name][1] -= LR * np.outer(g, ps[0][x])
        return {t.name: np.stack([vec(new[t.name], x) for x in range(t.num_embeddings)]) for t in TABLES}

    _step_and_compare(emb, lambda up: _oracle(TABLES, lambda t, x: vec(E[TABLES[t].name], x)), after)


BIG = [TableSpec("small", 300, 16, hotness=1.0), TableSpec("mid", 20_000, 16, hotness=3.0),
       TableSpec("huge", 400_000, 16, hotness=1.0), TableSpec("wide", 60_000, 32, hotness=0.5)]


@pytest.mark.parametrize("name,budget", [("hash", 0.1), ("hash", 0.001), ("qr", 0.1), ("qr", 0.01), ("md", 0.1)])
def test_each_method_fits_the_budget_and_keeps_small_tables_dense(name, budget):
    cls = get_impl(name)
    sizes = cls.table_param_bytes(BIG, {"budget": budget, "min_rows": 1000})
    dense = sum(t.dense_bytes for t in BIG)
    assert sizes[0] == BIG[0].dense_bytes  # under min_rows: dense for every method
    assert sum(sizes) <= budget * dense
    assert sum(sizes) >= 0.5 * budget * dense  # the budget is used, not wasted
    emb = cls(BIG, EmbeddingOptim("adagrad"), budget=budget, min_rows=1000)
    assert emb.memory_report().params == sum(sizes) and emb.memory_report().optimizer_state == sum(sizes)


def test_a_budget_below_what_a_method_can_hold_is_refused_naming_the_table():
    with pytest.raises(ValueError, match="spent by the 1 tables under min_rows=1000"):
        shares(BIG, 0.0001, 1000, "hash")
    with pytest.raises(ValueError, match="md: the 3 compressed tables need at least"):
        get_impl("md").table_param_bytes(BIG, {"budget": 0.01})  # dim 1 is 1/16 of a 16-wide table
    with pytest.raises(ValueError, match="qr: the 3 compressed tables need at least .*'mid'"):
        get_impl("qr").table_param_bytes(BIG, {"budget": 0.001})  # two tables of sqrt(N) rows each at least
    # a table whose proportional share is under its least gets the least, the others shrink to pay for it
    s = shares(BIG, 0.01, 1000, "qr", lambda t: 20_000 if t.name == "mid" else 0)
    assert s[1].target_bytes == 20_000 and s[2].target_bytes < 0.01 * BIG[2].dense_bytes
    with pytest.raises(ValueError, match="fraction of the dense tables' bytes"):
        shares(BIG, 2.0, 1000, "hash")


def test_qr_takes_the_smallest_collisions_that_fit_and_refuses_below_two_sqrt_n():
    t = TableSpec("t", 10_000, 8)
    for target in (8_000 * 4 * 8 // 10, 30_000, 7_000):
        c = collisions_for(t, target, "mult")
        assert qr_bytes(10_000, 8, c, "mult") <= target
        assert c == 2 or qr_bytes(10_000, 8, c - 1, "mult") > target
    with pytest.raises(ValueError, match="table 't'.*needs at least"):
        collisions_for(t, 2 * 100 * 8 * 4 - 4, "mult")  # (N / c + c) rows is least at c = sqrt(N) = 100


def test_md_power_rule_gives_popular_tables_wider_rows_within_the_budget():
    tables = BIG[1:]
    target = sum(t.dense_bytes for t in tables) // 10
    dims = power_rule_dims(tables, target, 0.3, False)
    assert sum(md_bytes(t, d) for t, d in zip(tables, dims)) <= target
    p = [t.hotness / t.num_embeddings for t in tables]
    assert dims[0] >= dims[1] and p[0] > p[1]  # mid (3 keys over 20k rows) above huge (1 over 400k)
    flat = power_rule_dims(tables, target, 0.0, False)
    assert len(set(min(d, 16) for d in flat)) == 1  # temperature 0: one dim for all (up to the clamp)
    assert [2 ** int(math.log2(d)) for d in power_rule_dims(tables, target, 0.3, True)] == \
        power_rule_dims(tables, target, 0.3, True)


@pytest.mark.parametrize("kind", ["sgd", "adagrad"])
def test_fp16_tbe_trains_half_precision_rows_and_reports_their_bytes(kind):
    pytest.importorskip("fbgemm_gpu")
    cls = get_impl("dense-fbgemm")
    emb = cls(TABLES, EmbeddingOptim(kind, lr=LR), weights_precision="fp16", seed=4)
    w0 = {t.name: emb.materialize(t.name).double().numpy().copy() for t in TABLES}
    assert all(w.dtype == torch.float16 for tbe in emb.tbes for w in tbe.split_embedding_weights())
    rep = emb.memory_report()
    assert rep.params == sum(t.num_embeddings * t.dim * 2 for t in TABLES) == \
        sum(cls.table_param_bytes(TABLES, {"weights_precision": "fp16"}))
    assert (rep.optimizer_state > 0) == (kind == "adagrad")
    upstream = torch.randn(BATCH.batch_size, emb.output_dim, generator=torch.Generator().manual_seed(5))
    out = emb(BATCH)
    assert out.dtype == torch.float32
    np.testing.assert_allclose(out.detach().double().numpy(), _oracle(TABLES, lambda t, x: w0[TABLES[t].name][x]),
                               rtol=1e-5, atol=1e-6)  # fp16 rows, summed in fp32
    (out * upstream).sum().backward()
    if kind == "sgd":  # the fused update, rounded into fp16: within half an fp16 ulp (stochastic: one ulp)
        for (t, x), g in _per_id_upstream(TABLES, upstream.double().numpy()).items():
            want = w0[TABLES[t].name][x] - LR * g
            got = emb.materialize(TABLES[t].name)[x].double().numpy()
            np.testing.assert_allclose(got, want, rtol=2 ** -10, atol=2 ** -14)
    with pytest.raises(ValueError, match="weights_precision must be one of"):
        cls(TABLES, EmbeddingOptim(), weights_precision="bf16")


def test_tt_rank_for_budget_is_the_largest_that_fits():
    from impls.compress.budget import tt_rank_for_budget

    cls = get_impl("ecorec")
    opts = {"tt_min_rows": 1000}
    dense = sum(t.dense_bytes for t in BIG)
    for budget in (0.1, 0.01):
        r = tt_rank_for_budget(cls, BIG, budget, opts)
        assert sum(cls.table_param_bytes(BIG, {**opts, "ranks": r})) <= budget * dense
        assert r == 128 or sum(cls.table_param_bytes(BIG, {**opts, "ranks": 2 * r})) > budget * dense
    with pytest.raises(ValueError, match="rank 1 already holds"):
        tt_rank_for_budget(cls, BIG, 1e-6, opts)


def test_options_for_budget_sizes_each_kind_of_method_or_says_why_not():
    from impls.compress.budget import options_for_budget, tt_rank_for_budget

    dense = sum(t.dense_bytes for t in BIG)
    for name in ("hash", "qr", "md"):  # sized by the budget itself, by the method's own rule
        assert options_for_budget(get_impl(name), BIG, 0.1, {"min_rows": 1000}) == {"budget": 0.1}
    tt = get_impl("ecorec")
    got = options_for_budget(tt, BIG, 0.01, {"tt_min_rows": 1000})
    assert got == {"ranks": tt_rank_for_budget(tt, BIG, 0.01, {"tt_min_rows": 1000})}
    assert sum(tt.table_param_bytes(BIG, {"tt_min_rows": 1000, **got})) <= 0.01 * dense
    with pytest.raises(ValueError, match="md: the 3 compressed tables need at least"):
        options_for_budget(get_impl("md"), BIG, 0.01, {})  # what the method cannot fit: its own reason
    with pytest.raises(ValueError, match="rank 1 already holds"):
        options_for_budget(tt, BIG, 1e-6, {"tt_min_rows": 1000})
    with pytest.raises(ValueError, match="dense-torch: no size to set from a budget"):
        options_for_budget(get_impl("dense-torch"), BIG, 0.1, {})
