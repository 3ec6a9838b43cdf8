import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from impls.api import TableSpec
from impls.data.hashing import Bijection
from impls.data.presets import (CRITEO_KAGGLE_ROWS, CRITEO_TERABYTE_40M_ROWS, DCNV2_HOTNESS, DCNV2_ROWS, get_preset,
                                preset_names)
from impls.data.synthetic import SyntheticSource, SyntheticSpec, power_law_ranks


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 5000), key=st.integers(0, 2**40))
def test_bijection_is_a_permutation(n, key):
    y = Bijection(n, key)(np.arange(n))
    assert np.array_equal(np.sort(y), np.arange(n))


def test_bijection_large_domain_in_range():
    y = Bijection(10**9, 3)(np.arange(0, 10**9, 10**6))
    assert y.min() >= 0 and y.max() < 10**9 and len(np.unique(y)) == len(y)


def test_power_law_is_bounded_and_skewed():
    rng = np.random.default_rng(0)
    r = power_law_ranks(rng, 1000, 1.05, 200_000)
    assert r.min() >= 0 and r.max() < 1000
    c = np.bincount(r, minlength=1000)
    assert c[0] > c[1] > c[10] > c[500]
    # P(0)/P(1) ~ 2^alpha for a continuous power law integrated over [1,2) vs [2,3)
    assert 1.5 < c[0] / c[1] < 2.6
    u = power_law_ranks(rng, 1000, 0.0, 200_000)
    assert np.bincount(u, minlength=1000).std() / 200 < 0.2  # uniform: flat histogram
    assert power_law_ranks(rng, 10**9, 1.2, 1000).max() < 10**9


def spec(**kw):
    tables = (TableSpec("a", 1000, 4, hotness=3), TableSpec("b", 50, 4, hotness=2))
    return SyntheticSpec(tables, **kw)


def test_batches_are_deterministic_valid_and_distinct():
    src = SyntheticSource(spec(seed=5))
    a, b, c = src.batch(0, 64), src.batch(0, 64), src.batch(1, 64)
    assert torch.equal(a.sparse.values, b.sparse.values) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.sparse.values, c.sparse.values)
    a.sparse.validate(src.tables)
    assert a.dense.shape == (64, 13) and a.labels.shape == (64,)
    assert set(a.labels.unique().tolist()) <= {0.0, 1.0}


def test_fixed_and_random_bag_sizes():
    b = SyntheticSource(spec()).batch(0, 500)
    lengths = (b.sparse.offsets[1:] - b.sparse.offsets[:-1]).view(2, 500)
    assert torch.all(lengths[0] == 3) and torch.all(lengths[1] == 2)
    b = SyntheticSource(spec(bag_sizes="random")).batch(0, 4000)
    lengths = (b.sparse.offsets[1:] - b.sparse.offsets[:-1]).view(2, 4000).double()
    assert abs(lengths[0].mean().item() - 3) < 0.15 and lengths[0].min() == 0 and lengths[0].max() == 6


def test_locality_ranked_puts_hot_ids_first_and_scattered_only_relabels():
    ranked = SyntheticSource(spec(locality="ranked")).batch(0, 4000).sparse.table(0)[0]
    scattered = SyntheticSource(spec(locality="scattered")).batch(0, 4000).sparse.table(0)[0]
    assert torch.bincount(ranked).argmax() == 0
    # same rng stream, so the id multiset differs only by a relabelling: equal count histograms
    hist = lambda v: sorted(torch.unique(v, return_counts=True)[1].tolist())  # noqa: E731
    assert hist(ranked) == hist(scattered)
    assert torch.bincount(scattered).argmax() != 0


def test_teacher_labels_are_learnable_signal():
    src = SyntheticSource(spec())
    b = src.batch(0, 20_000)
    # labels are Bernoulli(sigmoid(teacher logit)); rebuild the logits and check they rank the labels
    eff = []
    for i in range(2):
        v, o = b.sparse.table(i)
        h = src.teacher.effect(i, v.numpy())
        L = (o[1:] - o[:-1]).numpy()
        eff.append(np.bincount(np.repeat(np.arange(20_000), L), weights=h, minlength=20_000) / np.maximum(L, 1))
    z = src.teacher.logits(b.dense.double().numpy(), np.stack(eff))
    assert roc_auc_score(b.labels.numpy(), z) > 0.7
    assert 0.1 < b.labels.mean().item() < 0.9


def test_presets_have_published_cardinalities():
    assert sum(CRITEO_KAGGLE_ROWS) == 33_762_577 and len(CRITEO_KAGGLE_ROWS) == 26
    assert sum(CRITEO_TERABYTE_40M_ROWS) == 187_767_399
    assert sum(DCNV2_ROWS) == 204_184_588 and sum(DCNV2_HOTNESS) == 214
    k = get_preset("criteo-kaggle")
    assert [t.num_embeddings for t in k.tables] == list(CRITEO_KAGGLE_ROWS) and k.tables[0].dim == 16
    d = get_preset("dcnv2-multihot", max_rows=1000)
    assert max(t.num_embeddings for t in d.tables) == 1000 and d.tables[20].hotness == 100
    u = get_preset("uniform", num_tables=3, rows=10, dim=8)
    assert len(u.tables) == 3 and u.alpha == 0.0
    assert set(preset_names()) >= {"criteo-kaggle", "criteo-terabyte-40m", "dcnv2-multihot", "uniform"}


def test_bad_preset_input():
    with pytest.raises(ValueError, match="unknown data preset 'criteo'"):
        get_preset("criteo")
    with pytest.raises(ValueError, match="bad option"):
        get_preset("criteo-kaggle", rows=5)
    with pytest.raises(ValueError, match="dim must be > 0"):
        get_preset("uniform", dim=0)
    with pytest.raises(ValueError, match="max_rows"):
        get_preset("uniform", max_rows=0)
    with pytest.raises(ValueError, match="locality"):
        spec(locality="near")
    with pytest.raises(ValueError, match="batch size must be > 0"):
        SyntheticSource(spec()).batch(0, 0)
