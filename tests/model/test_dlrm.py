import pytest
import torch

from impls.api import EmbeddingOptim, TableSpec, get_impl
from impls.data.presets import get_preset
from impls.data.synthetic import SyntheticSource
from impls.model.dlrm import dot_interaction
from impls.model.train import TrainStep


def test_dot_interaction_matches_naive():
    B, T, D = 3, 4, 5
    dense, pooled = torch.randn(B, D), torch.randn(B, T * D)
    out = dot_interaction(dense, pooled, D)
    vecs = [dense] + list(pooled.view(B, T, D).unbind(1))
    pairs = [(vecs[i] * vecs[j]).sum(1) for i in range(T + 1) for j in range(i)]
    torch.testing.assert_close(out, torch.cat([dense, torch.stack(pairs, 1)], 1))
    # no dense features (Avazu): the embeddings' pairwise products alone
    pairs = [(vecs[i] * vecs[j]).sum(1) for i in range(1, T + 1) for j in range(1, i)]
    torch.testing.assert_close(dot_interaction(None, pooled, D), torch.stack(pairs, 1))


def small_source():
    return SyntheticSource(get_preset("uniform", num_tables=3, rows=200, dim=8, alpha=1.1, hotness=2, seed=0))


@pytest.mark.parametrize("impl", ["dense-torch", "dense-fbgemm"])
def test_dlrm_training_lowers_loss(impl):
    try:
        cls = get_impl(impl)
    except ImportError as exc:
        pytest.skip(str(exc))
    src = small_source()
    emb = cls(src.tables, EmbeddingOptim("adagrad", lr=0.05))
    step = TrainStep(emb, mode="dlrm", bottom=(16,), top=(16,), mlp_lr=0.1)
    batches = src.batches(8, 256)
    first = sum(float(step.forward(b)) for b in batches) / len(batches)
    for _ in range(15):
        for b in batches:
            step(b)
    last = sum(float(step.forward(b)) for b in batches) / len(batches)
    assert last < first - 0.02
    assert step.predict(batches[0]).shape == (256,)


def test_dlrm_without_dense_features_trains():
    src = SyntheticSource(get_preset("uniform", num_tables=3, rows=200, dim=8, alpha=1.1, hotness=2, num_dense=0))
    emb = get_impl("dense-torch")(src.tables, EmbeddingOptim("adagrad", lr=0.05))
    step = TrainStep(emb, mode="dlrm", num_dense=0, bottom=(16,), top=(16,))
    assert step.model.bottom is None
    b = src.batch(0, 64)
    assert b.dense.shape == (64, 0)
    first = float(step.forward(b))
    for _ in range(20):
        step(b)
    assert float(step.forward(b)) < first


def test_embedding_only_mode_moves_only_embeddings():
    src = small_source()
    emb = get_impl("dense-torch")(src.tables, EmbeddingOptim("sgd", lr=1.0))
    before = emb.materialize("t0").clone()
    step = TrainStep(emb, mode="embedding-only")
    assert step.model is None
    step(src.batch(0, 64))
    assert not torch.equal(before, emb.materialize("t0"))
    with pytest.raises(ValueError, match="predict needs mode='dlrm'"):
        step.predict(src.batch(0, 4))


def test_mixed_dims_rejected_by_dot_interaction():
    emb = get_impl("dense-torch")([TableSpec("a", 5, 4), TableSpec("b", 5, 8)], EmbeddingOptim())
    with pytest.raises(ValueError, match="one embedding dim"):
        TrainStep(emb, mode="dlrm")
    with pytest.raises(ValueError, match="mode must be one of"):
        TrainStep(emb, mode="train")


def test_low_rank_cross_matches_its_formula():
    from impls.model.dlrm import LowRankCross

    torch.manual_seed(0)
    cross = LowRankCross(6, layers=2, rank=3)
    x0 = torch.randn(4, 6)
    x = x0
    for V, U in zip(cross.V, cross.U):  # x_{l+1} = x0 * (U (V x_l) + b) + x_l
        x = x0 * (x @ V.weight.T @ U.weight.T + U.bias) + x
    torch.testing.assert_close(cross(x0), x)
    assert cross.V[0].weight.shape == (3, 6)
    assert LowRankCross(4, rank=512).V[0].weight.shape == (4, 4)  # rank capped at the width


@pytest.mark.parametrize("mlp_optimizer", ["adam", "adagrad", "sgd"])
def test_dcnv2_interaction_trains_with_each_mlp_optimizer(mlp_optimizer):
    src = small_source()
    emb = get_impl("dense-torch")(src.tables, EmbeddingOptim("adagrad", lr=0.05))
    step = TrainStep(emb, mode="dlrm", bottom=(16,), top=(16,), interaction="dcnv2", mlp_optimizer=mlp_optimizer,
                     mlp_lr=0.01 if mlp_optimizer == "adam" else 0.1)
    assert step.model.cross is not None and type(step.dense_opt).__name__.lower() == mlp_optimizer
    batches = src.batches(4, 128)
    first = sum(float(step.forward(b)) for b in batches) / len(batches)
    for _ in range(10):
        for b in batches:
            step(b)
    assert sum(float(step.forward(b)) for b in batches) / len(batches) < first - 0.02


def test_dcnv2_takes_mixed_dims_and_dot_refuses_them():
    tables = [TableSpec("a", 50, 8), TableSpec("b", 50, 4)]
    emb = get_impl("dense-torch")(tables, EmbeddingOptim("sgd", lr=0.1))
    TrainStep(emb, mode="dlrm", bottom=(8,), top=(8,), interaction="dcnv2")
    with pytest.raises(ValueError, match="one embedding dim"):
        TrainStep(emb, mode="dlrm", bottom=(8,), top=(8,))


@pytest.mark.parametrize("impl", ["dense-torch", "dense-fbgemm", "ttrec", "elrec", "ecorec", "hash"])
def test_weights_kept_and_put_back_predict_as_they_did(impl):
    """What early stop keeps (TrainStep.weights) and puts back (restore): every parameter and buffer, so the model
    predicts bit for bit as it did when they were kept, after more steps moved it (TT tables forced TT)."""
    try:
        cls = get_impl(impl)
    except ImportError as exc:
        pytest.skip(str(exc))
    src = small_source()
    opts = {"ttrec": {"tt_min_rows": 0, "ranks": 4}, "elrec": {"tt_min_rows": 0, "ranks": 4},
            "ecorec": {"tt_min_rows": 0, "ranks": 4}, "hash": {"min_rows": 1}}.get(impl, {})
    step = TrainStep(cls(src.tables, EmbeddingOptim("adagrad", lr=0.05), **opts), mode="dlrm", bottom=(16,), top=(16,))
    batches = src.batches(4, 64)
    step(batches[0])
    kept, want = step.weights(), step.predict(batches[3])
    for b in batches[:3]:
        step(b)
    assert not torch.equal(step.predict(batches[3]), want)
    step.restore(kept)
    assert torch.equal(step.predict(batches[3]), want)
    step(batches[1])  # and it trains on from there
