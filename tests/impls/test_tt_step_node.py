"""A TT system's step is one autograd node however many TT tables it has (TTStep: every table's schedule in one
forward and one backward call), TT-Rec's hot-row cache included: its hits pool from the cache beside the node."""
import pytest
import torch

from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, get_impl

TABLES = [TableSpec("a", 400, 16), TableSpec("b", 300, 16, pooling="mean"), TableSpec("c", 250, 16),
          TableSpec("small", 20, 16)]


def batch(seed: int, B: int = 12) -> SparseFeatures:
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 5, (len(TABLES) * B,), generator=gen)
    rows = torch.tensor([t.num_embeddings for t in TABLES]).repeat_interleave(B)
    values = (torch.rand(int(lengths.sum()), generator=gen) ** 3 * rows.repeat_interleave(lengths)).long()
    return SparseFeatures(values, torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]), B)


def step_nodes(out: torch.Tensor) -> list[str]:
    """The names of the TT step nodes reachable from out's graph."""
    seen, stack, found = set(), [out.grad_fn], []
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        if type(fn).__name__.startswith("TTStep"):
            found.append(type(fn).__name__)
        stack.extend(f for f, _ in fn.next_functions)
    return found


@pytest.mark.parametrize("name, options", [("ecorec", {}), ("elrec", {}), ("ttrec", {}),
                                           ("ttrec", {"cache_rows": 16, "cache_populate_every": 1})],
                         ids=["ecorec", "elrec", "ttrec", "ttrec-cache"])
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "external"])
def test_one_autograd_node_per_step(name, options, fused):
    emb = get_impl(name)(TABLES, EmbeddingOptim("sgd", lr=0.1), ranks=4, tt_min_rows=100, fused=fused, **options)
    assert len(emb.tt) == 3  # three TT tables, one plain
    before = [p.clone() for t in emb.tt.values() for p in t.core_tensors()]
    for seed in range(3):
        out = emb(batch(seed))
        assert step_nodes(out) == ["TTStepBackward"]
        (out * torch.randn(out.shape, generator=torch.Generator().manual_seed(seed))).sum().backward()
        emb.optimizer_step()
    after = [p for t in emb.tt.values() for p in t.core_tensors()]
    assert all(not torch.equal(a, b) for a, b in zip(before, after))  # every TT table's cores stepped
    if options:
        assert emb.work_report().extra["cache_hits"] > 0  # the cache served part of the last step
