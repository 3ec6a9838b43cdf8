"""What the sharding layer relies on, declared by the interface (impls/api.py), checked for every registered
implementation: a system that shards itself is a ShardedCollection; a system that supports an external update
leaves its gradients in ``gradient_tensors`` and applies them in ``optimizer_step`` with the numbers of its own
schedule; ``options_for_tables`` builds a collection over part of the tables that holds the same tables;
``gather_table`` defaults to ``materialize``."""
import pytest
import torch

from impls.api import EmbeddingCollection, EmbeddingOptim, ShardedCollection, SparseFeatures, TableSpec, get_impl, \
    registered_names
from reproduce.conformance.cases import structure_options

TABLES = [TableSpec("a", 40, 8), TableSpec("b", 7, 8, pooling="mean"), TableSpec("c", 25, 8)]
# B = 3; a: [0, 39, 39], [], [5]; b: [6], [2, 2], []; c: [24], [0], [3, 4]
BATCH = SparseFeatures(torch.tensor([0, 39, 39, 5, 6, 2, 2, 24, 0, 3, 4]),
                       torch.tensor([0, 3, 3, 4, 5, 7, 7, 8, 9, 11]), 3)


def _cls(name):
    try:
        return get_impl(name)
    except ImportError as exc:
        pytest.skip(f"{name} is not installed here: {exc}")


def _options(cls):
    """Every table TT for the TT systems, every table compressed for the compression methods, so their own
    structure, not only dense tables, is checked."""
    return structure_options(cls)


@pytest.mark.parametrize("name", registered_names())
def test_registered_class_declares_its_kind(name):
    cls = _cls(name)
    assert issubclass(cls, EmbeddingCollection) and cls.name == name
    assert cls.distributed_only == issubclass(cls, ShardedCollection), name
    if issubclass(cls, ShardedCollection):
        assert cls.supports_dist
    if not cls.supports_external_update:
        with pytest.raises(ValueError, match="inside backward"):
            cls.external_update_options({})


@pytest.mark.parametrize("kind", ["sgd", "adagrad"])
@pytest.mark.parametrize("name", registered_names())
def test_external_update_equals_the_systems_own(name, kind):
    cls = _cls(name)
    if cls.distributed_only or not cls.supports_external_update:
        pytest.skip(f"{name}: no single-device external update")
    optim = EmbeddingOptim(kind, lr=0.1) if kind == "sgd" else EmbeddingOptim(kind, lr=0.05, eps=1e-4)
    own = cls(TABLES, optim, seed=4, **_options(cls))
    ext = cls(TABLES, optim, seed=4, **cls.external_update_options(_options(cls)))
    before = {t.name: ext.materialize(t.name).clone() for t in TABLES}
    upstream = torch.randn(BATCH.batch_size, own.output_dim, generator=torch.Generator().manual_seed(1))
    for coll in (own, ext):
        (coll(BATCH) * upstream).sum().backward()
    for t in TABLES:  # nothing applied inside backward
        torch.testing.assert_close(ext.materialize(t.name), before[t.name], rtol=0, atol=0)
    tensors = ext.gradient_tensors()
    assert {id(p) for p, _ in tensors} == {id(p) for p in ext.parameters()}
    for p, row_sparse in tensors:  # every table is looked up by the batch: each one has its gradient waiting
        assert p.grad is not None and p.grad.is_sparse == row_sparse, (name, p.shape)
    own.optimizer_step()
    ext.optimizer_step()
    for t in TABLES:
        torch.testing.assert_close(ext.materialize(t.name), own.materialize(t.name), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(ext.gather_table(t.name), ext.materialize(t.name), rtol=0, atol=0)


@pytest.mark.parametrize("name", registered_names())
def test_options_for_part_of_the_tables(name):
    cls = _cls(name)
    if cls.distributed_only:
        pytest.skip(f"{name} runs over ranks only")
    options = _options(cls)
    if "ranks" in options:  # a per-table mapping and a table list, as a planner would give them
        options = {**options, "ranks": {"a": 4, "b": 2, "c": 3}, "tt_tables": ["a", "c"]}
    full = cls(TABLES, EmbeddingOptim(), seed=2, **options)
    part = cls([TABLES[0], TABLES[1]], EmbeddingOptim(), seed=2, **cls.options_for_tables(options, ["a", "b"]))
    for t in ("a", "b"):
        torch.testing.assert_close(part.materialize(t), full.materialize(t), rtol=0, atol=0)
