"""The work layer (impls/work) against the runs' own counters: a system's stage plan over a sampled batch's index
statistics gives exactly the FLOPs, GEMMs, distinct ids, prefix groups, micro-batches and peak intermediate bytes
its work_report counts when the step runs, and the memory its memory_report says; the expectations under an id law
lie within 1 % of the mean over sampled batches (hypothesis over laws and shapes)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.api import EmbeddingOptim, TableSpec, get_impl
from impls.core.stage_plan import SampledIndex
from impls.data.synthetic import SyntheticSource, SyntheticSpec, mean_bag
from impls.work.counts import memory, step_work
from impls.work.index_law import ExpectedIndex

TABLES = (TableSpec("a", 30_000, 16, hotness=4), TableSpec("b", 200, 16, hotness=2),
          TableSpec("c", 120_000, 16, hotness=7), TableSpec("d", 15_000, 16, hotness=1))
CASES = [
    ("ttrec", {"chunk": 500}), ("ttrec", {"chunk": 20000, "ranks": 8}),
    ("elrec", {}), ("elrec", {"ranks": [8, 16]}),
    ("ecorec", {"micro_batches": 4, "min_chunk": 100}), ("ecorec", {"micro_batches": 3, "min_chunk": 20000}),
    ("ecorec", {"micro_batches": 4, "min_chunk": 50, "native_step": False}),
]


def _measured(system, options, batch, optim):
    emb = get_impl(system)(list(TABLES), EmbeddingOptim(optim, lr=0.01), seed=1, **options)
    out = emb(batch.sparse)
    out.mul(torch.randn_like(out)).sum().backward()
    emb.optimizer_step()
    return emb.work_report(), emb.memory_report()


@pytest.mark.parametrize("system,options", CASES, ids=[f"{s}-{i}" for i, (s, _) in enumerate(CASES)])
@pytest.mark.parametrize("locality", ["scattered", "ranked"])
def test_a_plan_over_a_sampled_batch_equals_the_runs_counters_exactly(system, options, locality):
    src = SyntheticSource(SyntheticSpec(TABLES, alpha=1.05, locality=locality, bag_sizes="random"))
    batch = src.batch(3, 700)
    optim = "adagrad" if system == "elrec" else "sgd"
    rep, mem = _measured(system, options, batch, optim)
    per_table = batch.sparse.tables()
    work = step_work(system, TABLES, options, lambda i, shape: SampledIndex(per_table[i][0], shape.last_radix),
                     [v.numel() for v, _ in per_table])
    got = work.report()
    assert (got.nnz, got.unique, got.e1, got.gemms, got.flops) == (rep.nnz, rep.unique, rep.e1, rep.gemms, rep.flops)
    for k in ("gemms_fwd", "gemms_bwd", "flops_fwd", "flops_bwd", "micro_batches", "stage_gemms"):
        assert got.extra[k] == rep.extra[k], k
    assert got.intermediate_bytes == rep.intermediate_bytes
    m = memory(system, TABLES, options, work, optim)
    assert (m.params, m.optimizer_state, m.peak_intermediates) == (mem.params, mem.optimizer_state,
                                                                   mem.peak_intermediates)


def _tolerance(xs) -> float:
    """1 % of the sampled mean, or the mean's own sampling error (4 standard errors) where that is wider: a batch of
    a few hundred ids has a spread no model removes."""
    xs = np.asarray(xs, dtype=np.float64)
    return max(0.01 * xs.mean(), 4 * xs.std(ddof=1) / np.sqrt(len(xs)))


@settings(max_examples=12, deadline=None)
@given(rows=st.sampled_from([3_000, 50_000, 2_000_000, 100_000_000]), alpha=st.sampled_from([0.0, 0.6, 0.9, 1.05, 1.3]),
       locality=st.sampled_from(["scattered", "ranked"]), batch=st.sampled_from([512, 2048, 8192]),
       hotness=st.sampled_from([1, 3, 12.4]), radix=st.sampled_from([7, 40, 300]))
def test_the_expected_index_is_within_one_percent_of_the_sampled_mean(rows, alpha, locality, batch, hotness, radix):
    spec = SyntheticSpec((TableSpec("t", rows, 8, hotness=hotness),), alpha=alpha, locality=locality,
                         bag_sizes="random", seed=5)
    src = SyntheticSource(spec)
    sampled = [SampledIndex(src.batch(k, batch).sparse.values, radix) for k in range(24)]
    expected = ExpectedIndex(rows, batch * mean_bag(hotness, "random"), alpha, locality, radix)
    for what, got, xs in (("nnz", expected.nnz, [s.nnz for s in sampled]),
                          ("unique", expected.unique, [s.unique for s in sampled]),
                          ("e1", expected.e1, [s.groups(0, s.unique) for s in sampled])):
        assert abs(got - np.mean(xs)) <= _tolerance(xs), what
    # EcoRec's micro-batches: the groups of 4 contiguous ranges of the sorted distinct ids, summed
    cuts = lambda u: [round(u * k / 4) for k in range(5)]  # noqa: E731
    splits = [sum(s.groups(a, b) for a, b in zip(cuts(s.unique), cuts(s.unique)[1:])) for s in sampled]
    split = np.mean(splits)
    c = cuts(round(expected.unique))
    ranges = sum(expected.groups(a, b) for a, b in zip(c, c[1:]))
    if expected.unique <= rows / 2:  # the edges fall anywhere in a group (index_law.py)
        assert abs(ranges - split) <= _tolerance(splits)
    else:  # a covered table: the edges' alignment decides, within the m - 1 = 3 groups they can split
        assert expected.e1 - 0.01 * expected.e1 <= ranges <= expected.e1 * 1.01 + 3 and abs(ranges - split) <= 3


@settings(max_examples=8, deadline=None)
@given(rows=st.sampled_from([3_000, 50_000, 2_000_000]), alpha=st.sampled_from([0.0, 0.9, 1.05, 1.3]),
       batch=st.sampled_from([512, 4096]), hotness=st.sampled_from([1, 5]), shards=st.sampled_from([2, 3, 8]),
       world=st.sampled_from([2, 4]), locality=st.sampled_from(["scattered", "ranked"]))
def test_a_row_shards_expected_keys_are_within_one_percent_of_the_sampled_mean(rows, alpha, batch, hotness, shards,
                                                                               world, locality):
    """EMBark's shard j of r of a table holds ids = j mod r: a source's keys there, its distinct keys, and the
    distinct keys over the global batch (impls/work/exchange.ExpectedKeys against SampledKeys)."""
    from impls.work.exchange import ExpectedKeys, SampledKeys

    table = TableSpec("t", rows, 8, hotness=hotness)
    src = SyntheticSource(SyntheticSpec((table,), alpha=alpha, locality=locality, bag_sizes="random", seed=2))
    sampled = [SampledKeys(src.batch(k, batch * world).sparse.split_batch(world)) for k in range(64)]
    lookups = [[batch * mean_bag(hotness, "random")] for _ in range(world)]
    expected = ExpectedKeys.of_source(src, lookups)
    keys = [s.shard_keys(0, shards) for s in sampled]
    got = expected.shard_keys(0, shards)
    unions = [s.union_keys(0, shards) for s in sampled]
    for j in (0, shards - 1):
        for k, what in enumerate(("keys", "distinct keys")):
            xs = [x[k][1, j] for x in keys]
            assert abs(got[k][1, j] - np.mean(xs)) <= _tolerance(xs), (what, j)
        xs = [u[j] for u in unions]
        assert abs(expected.union_keys(0, shards)[j] - np.mean(xs)) <= _tolerance(xs), ("union", j)
