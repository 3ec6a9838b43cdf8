"""Whole training steps on CUDA against the CPU result of the same seed: a full DLRM step (bottom MLP, dot
interaction, top MLP, BCE) for every system with SGD (the benchmark's) and Adagrad, the external update
(fused=False), TT-Rec's hot-row cache, 2- and 4-core TT tables, a TT table no lookup of a batch touches, an unchecked
bad id (check_bounds=False), and two CUDA runs that are bit-identical. ``compare`` is device-generic: the CPU-only
test at the end runs it CPU against CPU, so the harness itself runs in CI."""
import pytest
import torch

from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, get_impl
from impls.data.batch import Batch
from impls.model.train import TrainStep

TABLES = [TableSpec("big", 60_000, 16), TableSpec("mid", 20_000, 16, pooling="mean"), TableSpec("small", 300, 16)]
NUM_DENSE = 4
# every system that runs in one process (EMBark shards over ranks: on one GPU its CUDA code is its compositions,
# route_keys and transpose_segments, which tests/core/test_composed.py runs)
SYSTEMS = ["ttrec", "elrec", "ecorec", "dense-torch"]
BAD_ID = r"is outside \[0, \d+\)|reads row -?\d+ of a table of 60000 rows"  # the TT ops' words for a bad id


def batch(B=256, seed=0, empty: int | None = None) -> Batch:
    """A DLRM batch; ``empty``: the index of a table no bag of the batch looks up."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 5, (len(TABLES) * B,), generator=gen)
    if empty is not None:
        lengths[empty * B:(empty + 1) * B] = 0
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    values = torch.cat([torch.randint(0, t.num_embeddings, (int(lengths[i * B:(i + 1) * B].sum()),), generator=gen)
                        for i, t in enumerate(TABLES)])
    return Batch(torch.randn(B, NUM_DENSE, generator=gen), SparseFeatures(values, offsets, B),
                 torch.randint(0, 2, (B,), generator=gen).float())


def train(name, device, optimizer="sgd", steps=3, empty=None, check_bounds=True, batches=None, **options):
    """Losses, the pooled outputs of the last step and every table after ``steps`` DLRM steps on ``device``."""
    tt = {} if name == "dense-torch" else {"tt_min_rows": 10_000, "ranks": 8}
    emb = get_impl(name)(TABLES, EmbeddingOptim(optimizer, lr=0.05, eps=1e-4), device=device, seed=3,
                         check_bounds=check_bounds, **tt, **options)
    step = TrainStep(emb, mode="dlrm", num_dense=NUM_DENSE, bottom=(16,), top=(16,), mlp_lr=0.05, seed=1)
    step.model.to(device)
    losses = []
    for s in range(steps):
        b = (batches[s] if batches else batch(seed=s, empty=empty)).to(device)
        loss = step.forward(b)
        step.backward(loss)
        step.update()
        losses.append(float(loss.detach()))
    tables = [emb.materialize(t.name).detach().cpu() for t in TABLES]
    mlp = [p.detach().cpu() for n, p in step.model.named_parameters() if not n.startswith("embeddings.")]
    return losses, tables + mlp, emb


def compare(name, a="cpu", b="cuda", **kw):
    """The same training on devices a and b: the losses and every parameter agree to float32 rounding."""
    la, pa, _ = train(name, a, **kw)
    lb, pb, emb = train(name, b, **kw)
    torch.testing.assert_close(torch.tensor(lb), torch.tensor(la), rtol=1e-4, atol=1e-5)
    for x, y in zip(pa, pb):
        scale = max(float(x.abs().max()), 1e-30)
        torch.testing.assert_close(y, x, rtol=1e-4, atol=1e-5 * scale)
    return emb


@pytest.mark.gpu
@pytest.mark.parametrize("optimizer", ["sgd", "adagrad"])
@pytest.mark.parametrize("name", SYSTEMS)
def test_a_dlrm_step_on_cuda_equals_the_cpu(name, optimizer):
    compare(name, optimizer=optimizer)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["ttrec", "elrec", "ecorec"])
def test_the_external_update_on_cuda_equals_the_cpu(name):
    compare(name, optimizer="adagrad", fused=False)


@pytest.mark.gpu
def test_ttrec_hot_row_cache_on_cuda_equals_the_cpu():
    emb = compare("ttrec", steps=4, cache_rows=64, cache_populate_every=2)
    assert emb.caches  # the cache was built and used


@pytest.mark.gpu
@pytest.mark.parametrize("cores", [2, 4])
def test_two_and_four_core_tables_on_cuda_equal_the_cpu(cores):
    compare("ttrec", optimizer="adagrad", cores=cores)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["ttrec", "elrec", "ecorec"])
def test_a_tt_table_without_lookups_on_cuda_equals_the_cpu(name):
    compare(name, empty=0)  # "big", a TT table, has no lookup in any batch


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["ttrec", "elrec", "ecorec"])
@pytest.mark.parametrize("bad", [60_000, 65_000, -1])  # past the rows (padding), past prod(p), negative
def test_an_unchecked_bad_id_on_cuda_raises_as_on_the_cpu(name, bad):
    b = batch(seed=0)
    b.sparse.values[0] = bad  # table "big", bag 0
    for device in ("cpu", "cuda"):  # the CPU kernel at once, the CUDA kernels' record at the end of forward
        with pytest.raises(ValueError, match=BAD_ID):
            train(name, device, steps=1, check_bounds=False, batches=[b])
    # the record is cleared: the next good batch trains
    train(name, "cuda", steps=1, check_bounds=False)


@pytest.mark.gpu
@pytest.mark.parametrize("name", SYSTEMS)
def test_two_cuda_runs_are_bit_identical(name):
    la, pa, _ = train(name, "cuda", optimizer="adagrad")
    lb, pb, _ = train(name, "cuda", optimizer="adagrad")
    assert la == lb
    assert all(torch.equal(x, y) for x, y in zip(pa, pb))


def test_the_comparison_runs_here_cpu_against_cpu():
    """compare() itself, on the CPU (CI has no GPU): every option the gpu tests pass is accepted, and the checks
    hold for two identical runs."""
    compare("ttrec", "cpu", "cpu", steps=2, cache_rows=64, cache_populate_every=1)
    compare("ecorec", "cpu", "cpu", steps=1, empty=0, fused=False, optimizer="adagrad")
    compare("ttrec", "cpu", "cpu", steps=1, cores=4)
    b = batch(seed=0)
    b.sparse.values[0] = 65_000
    with pytest.raises(ValueError, match=BAD_ID):
        train("elrec", "cpu", steps=1, check_bounds=False, batches=[b])
