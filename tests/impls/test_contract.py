"""The contract every registered EmbeddingCollection must meet (the interface of impls/api.py)."""
import functools

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings

from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, get_impl, registered_names
from reproduce.conformance.cases import structure_options
from reproduce.conformance.oracle import rates
from tests.strategies import jagged_batches


def impl_or_skip(name):
    try:
        cls = get_impl(name)
    except ImportError as exc:
        pytest.skip(f"{name} is not installed here: {exc}")
    if cls.distributed_only:
        pytest.skip(f"{name} runs over ranks only: its contract (equality with the single-device model) is "
                    f"asserted on gloo ranks in tests/embark")
    return functools.partial(cls, **structure_options(cls))  # TT cores, compressed tables: not dense fallbacks


IMPLS = registered_names()


def reference_forward(emb, tables, sf):
    outs = []
    for i, t in enumerate(tables):
        v, o = sf.table(i)
        outs.append(F.embedding_bag(v, emb.materialize(t.name), o, mode=t.pooling, include_last_offset=True))
    return torch.cat(outs, dim=1)


def reference_step(emb, tables, sf, upstream, optim):
    """materialize() after one optimizer step on the table's own parameters (the dense table, or the
    TT cores at their rate: TTCollection.core_optim), with gradients from autograd through ``materialize_from`` on the same loss."""
    expected = []
    for i, t in enumerate(tables):
        params = [p.clone().requires_grad_(True) for p in emb.table_parameters(t.name)]
        opts = rates(emb, t.name, len(params), optim)  # TT cores at their own rate; rows (a cache's) at the tables'
        v, o = sf.table(i)
        out = F.embedding_bag(v, emb.materialize_from(t.name, params), o, mode=t.pooling, include_last_offset=True)
        cols = slice(sum(x.dim for x in tables[:i]), sum(x.dim for x in tables[: i + 1]))
        grads = torch.autograd.grad((out * upstream[:, cols]).sum(), params)
        with torch.no_grad():
            for p, g, opt in zip(params, grads, opts):
                # dense Adagrad over the whole tensor equals the sparse update: untouched entries have
                # zero gradient, so neither their state nor their value moves
                opt.apply_dense(p, opt.init_state(p), g)
            expected.append(emb.materialize_from(t.name, params).detach())
    return expected


@pytest.mark.parametrize("name", IMPLS)
@settings(max_examples=25, deadline=None)
@given(batch=jagged_batches())
def test_forward_equals_embedding_bag_over_materialize(name, batch):
    tables, sf = batch
    emb = impl_or_skip(name)(tables, EmbeddingOptim("sgd", lr=0.1), seed=3)
    out = emb(sf)
    assert out.shape == (sf.batch_size, sum(t.dim for t in tables))
    torch.testing.assert_close(out, reference_forward(emb, tables, sf), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["sgd", "adagrad"])
@pytest.mark.parametrize("name", IMPLS)
@settings(max_examples=15, deadline=None)
@given(batch=jagged_batches())
def test_one_step_moves_tables_like_dense_optimizer(name, kind, batch):
    tables, sf = batch
    # Adagrad moves every touched entry by about lr whatever the gradient's size, and turns a gradient that is
    # zero up to rounding (TT cores: sums that cancel) into a step of lr * g / (|g| + eps). On TT cores an
    # lr of 0.5 then rebuilds rows from sums of large terms that cancel, and eps 1e-8 lets two correct
    # summation orders differ by lr * 1e-4; lr 0.05 and eps 1e-4 keep the check well conditioned.
    optim = EmbeddingOptim(kind, lr=0.5) if kind == "sgd" else EmbeddingOptim(kind, lr=0.05, eps=1e-4)
    emb = impl_or_skip(name)(tables, optim, seed=1)
    upstream = torch.randn(sf.batch_size, sum(t.dim for t in tables), generator=torch.Generator().manual_seed(0))
    expected = reference_step(emb, tables, sf, upstream, optim)
    (emb(sf) * upstream).sum().backward()
    emb.optimizer_step()
    for t, w in zip(tables, expected):
        # TT rows are sums of rank-r products that cancel: an entry near zero carries the rounding of the
        # table's largest terms, so the absolute tolerance follows the table's scale (~100 float32 ulps of it)
        atol = max(1e-6, 1e-5 * float(w.abs().max()))
        if kind == "adagrad":
            # an Adagrad step is lr * g / (|g| + eps): a relative error d in a core gradient (float32 sums of
            # cancelling terms, summed in another order than autograd's: d up to ~1e-3) moves it by <= lr * d / 4
            atol = max(atol, optim.lr * 1e-3)
        torch.testing.assert_close(emb.materialize(t.name), w, rtol=1e-4, atol=atol)


@pytest.mark.parametrize("name", IMPLS)
def test_edge_ids_empty_bags_and_duplicates(name):
    tables = [TableSpec("a", 7, 4), TableSpec("b", 3, 4, pooling="mean")]
    # B=3; table a: [0, 6, 6], [], [6]; table b: [], [2, 2, 0], [1]
    sf = SparseFeatures(torch.tensor([0, 6, 6, 6, 2, 2, 0, 1]), torch.tensor([0, 3, 3, 4, 4, 7, 8]), 3)
    emb = impl_or_skip(name)(tables, EmbeddingOptim("sgd", lr=0.1))
    out = emb(sf)
    torch.testing.assert_close(out, reference_forward(emb, tables, sf), rtol=1e-5, atol=1e-6)
    assert torch.all(out[1, :4] == 0) and torch.all(out[0, 4:] == 0)  # empty bags pool to zero


@pytest.mark.parametrize("name", IMPLS)
def test_invalid_input_raises_value_error(name):
    tables = [TableSpec("a", 7, 4)]
    emb = impl_or_skip(name)(tables, EmbeddingOptim("sgd"))
    with pytest.raises(ValueError, match="table 'a'.*bag 1, id 7"):
        emb(SparseFeatures(torch.tensor([1, 7]), torch.tensor([0, 1, 2]), 2))
    with pytest.raises(ValueError, match="negative id"):
        emb(SparseFeatures(torch.tensor([-1, 0]), torch.tensor([0, 1, 2]), 2))
    with pytest.raises(ValueError, match="offsets"):
        emb(SparseFeatures(torch.tensor([1, 0]), torch.tensor([0, 2, 1]), 2))
    with pytest.raises(ValueError, match="T\\*B\\+1"):
        emb(SparseFeatures(torch.tensor([1, 0]), torch.tensor([0, 2]), 2))


@pytest.mark.parametrize("name", IMPLS)
def test_memory_report_and_work_report(name):
    tables = [TableSpec("a", 100, 8), TableSpec("b", 50, 8)]
    for kind in ("sgd", "adagrad"):
        emb = impl_or_skip(name)(tables, EmbeddingOptim(kind))
        sf = SparseFeatures(torch.tensor([1, 2, 3, 4]), torch.tensor([0, 2, 3, 4, 4]), 2)
        emb(sf)
        rep = emb.memory_report()
        assert rep.params > 0 and rep.total >= rep.params
        assert (rep.optimizer_state > 0) == (kind == "adagrad")
        assert emb.work_report().nnz == 4


@pytest.mark.parametrize("name", IMPLS)
def test_bad_construction(name):
    cls = impl_or_skip(name)
    with pytest.raises(ValueError, match="duplicate table names"):
        cls([TableSpec("a", 3, 4), TableSpec("a", 3, 4)], EmbeddingOptim())
    with pytest.raises(ValueError, match="dim must be > 0"):
        cls([TableSpec("a", 3, 0)], EmbeddingOptim())


def test_unknown_impl_name():
    with pytest.raises(ValueError, match="unknown implementation 'nope'"):
        get_impl("nope")


@pytest.mark.gpu
@pytest.mark.parametrize("name", IMPLS)
def test_cuda_forward_and_step_match_cpu(name):
    tables = [TableSpec("a", 1000, 16), TableSpec("b", 300, 16, pooling="mean")]
    sf = SparseFeatures(torch.tensor([0, 999, 5, 5, 299, 1]), torch.tensor([0, 2, 4, 4, 6]), 2)
    upstream = torch.randn(2, 32)
    outs = {}
    for device in ("cpu", "cuda"):
        emb = impl_or_skip(name)(tables, EmbeddingOptim("adagrad", lr=0.05, eps=1e-4), device=device, seed=2)
        out = emb(sf.to(device))
        (out * upstream.to(device)).sum().backward()
        emb.optimizer_step()
        outs[device] = (out.detach().cpu(), emb.materialize("a").cpu(), emb.materialize("b").cpu())
    for c, g in zip(outs["cpu"], outs["cuda"]):
        torch.testing.assert_close(c, g, rtol=1e-5, atol=1e-6)
