"""TT defaults that learn: only large tables are TT unless asked, and the default core initializer gives rows at
the dense initializer's scale (mean 0, variance 1 / (3 rows)) for tiny and huge tables alike."""
from __future__ import annotations

import math

import pytest
import torch

from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, get_impl
from impls.core import tt
from impls.core.tt_collection import TT_MIN_ROWS
from impls.core.init import dense_table_init

TT_SYSTEMS = ("ttrec", "elrec", "ecorec")


def _moments(x: torch.Tensor) -> tuple[float, float]:
    x = x.double().reshape(-1)
    return float(x.mean()), float(x.std())


@pytest.mark.parametrize("rows", [1, 2, 3, 10, 1_000, 10**6, 10**8])
@pytest.mark.parametrize("dim", [16, 64])
def test_dense_matched_rows_have_the_dense_scale(rows, dim):
    """Rows drawn from many seeds (tiny tables) or many rows (huge ones): mean within 5 % of the dense std of 0,
    std within 10 % of the dense initializer's sqrt(1 / (3 rows))."""
    shape = tt.TTShape.create(rows, dim, 32)
    want = tt.dense_init_bound(rows) / math.sqrt(3)
    samples = []
    n_rows = min(rows, 2000)
    for seed in range(max(1, 4000 // n_rows)):
        cores = tt.init_cores(shape, "dense-matched", torch.Generator().manual_seed(seed))
        ids = torch.randint(0, rows, (n_rows,), generator=torch.Generator().manual_seed(seed + 1))
        samples.append(tt.rows_from_cores(cores, shape, ids))
    mean, std = _moments(torch.cat(samples))
    assert abs(mean) < 0.05 * want, (mean, want)
    assert abs(std / want - 1) < 0.10, (std, want)
    if 10 <= rows <= 10**6:  # the dense initializer's own rows (enough entries to measure their spread)
        _, dense_std = _moments(dense_table_init(TableSpec("t", rows, dim), 0))
        assert abs(std / dense_std - 1) < 0.15, (std, dense_std)


def test_fbtt_uniform_is_kept_and_is_not_scale_matched():
    """FBTT's non-negative uniform stays selectable (TT-Rec's initializer study) and is why it is not the default:
    a 2-row table starts with rows of mean ~1."""
    shape = tt.TTShape.create(2, 16, 32)
    W = tt.materialize(tt.init_cores(shape, "uniform", torch.Generator().manual_seed(0)), shape)
    assert W.mean() > 0.5


@pytest.mark.parametrize("impl", TT_SYSTEMS)
def test_defaults_leave_small_tables_dense_and_match_the_dense_scale(impl):
    tables = [TableSpec("one", 1, 16), TableSpec("ten", 10, 16), TableSpec("big", TT_MIN_ROWS, 16)]
    emb = get_impl(impl)(tables, EmbeddingOptim("adagrad", lr=0.05), seed=3)
    tt_names = {emb.tables[int(k)].name for k in emb.tt}
    assert tt_names == {"big"}
    mean, std = _moments(emb.materialize("big"))
    want = tt.dense_init_bound(TT_MIN_ROWS) / math.sqrt(3)
    assert abs(mean) < 0.05 * want and abs(std / want - 1) < 0.1, (mean, std, want)


def _tiny_losses(impl: str, **options) -> list[float]:
    """30 steps of a DLRM whose 1- to 10-row tables are all TT (rank 32), the default MLPs (SGD 0.1, 512-256)."""
    from impls.data.batch import Batch
    from impls.model.train import TrainStep

    tables = [TableSpec(f"t{n}", n, 16) for n in (1, 2, 3, 5, 10)]
    emb = get_impl(impl)(tables, EmbeddingOptim("adagrad", lr=0.05), seed=0, tt_min_rows=0, tt_oversize="allow",
                         **options)
    assert len(emb.tt) == len(tables)
    step = TrainStep(emb, num_dense=2)
    g = torch.Generator().manual_seed(0)
    B = 256
    losses = []
    for _ in range(30):
        ids = torch.cat([torch.randint(0, t.num_embeddings, (B,), generator=g) for t in tables])
        sparse = SparseFeatures(ids, torch.arange(len(tables) * B + 1), B)
        labels = (ids[-B:] % 2).float()  # learnable from the 10-row table
        losses.append(step(Batch(torch.randn(B, 2, generator=g), sparse, labels)))
    return losses


@pytest.mark.parametrize("impl", TT_SYSTEMS)
def test_tiny_tt_tables_train_without_diverging(impl):
    """With the default init the loss stays near its start and falls; FBTT's uniform init, in the same run with the
    cores stepping at the tables' rate as FBTT's do, blows up on an early step (the issue's 0.69 -> 55 -> NaN)."""
    losses = _tiny_losses(impl)
    assert all(math.isfinite(x) for x in losses)
    assert max(losses) < 1.0 and losses[-1] < 0.3, losses
    assert max(_tiny_losses(impl, weight_dist="uniform", core_lr_scale=1.0)) > 5.0  # cores at the tables' rate, as FBTT
