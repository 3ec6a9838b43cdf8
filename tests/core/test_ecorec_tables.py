"""ecorec_tables_forward / ecorec_tables_backward, EcoRec's step over every TT table of a batch in one native call
each way: many tables of different shapes (d 2-4, ranks, radices) in one table-major batch with tables that are not
TT between them, against a float64 replay of each table, bit-identical to the one-table op table by table, the same
at 1, 2 and 3 threads whether a table runs alone with every thread or beside the others, its GPU composition (run
here on CPU tensors) equal to the CPU kernels, and an error naming its table."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.core import tt
from tests.core.test_determinism import assert_identical, with_threads
from tests.core.test_ecorec_step import cores_of, replay
from tests.core.test_tt_ops import close

LIB = torch.ops.dlrmbench
composed = torch.ops.dlrmbench_composed


@st.composite
def table_shape(draw):
    d = draw(st.integers(2, 4))
    p = draw(st.lists(st.integers(1, 6), min_size=d, max_size=d))
    q = draw(st.lists(st.sampled_from([1, 2, 4]), min_size=d, max_size=d))
    r = draw(st.lists(st.integers(1, 9), min_size=d - 1, max_size=d - 1))
    cover = math.prod(p)
    return tt.TTShape.create(draw(st.integers(max(1, cover // 2), cover)), math.prod(q), r, p=p, q=q)


@st.composite
def batches(draw):
    """TT shapes, a table-major batch over those tables and some plain ones between them (their ids never read),
    which of the batch's tables each TT table is, and a micro-batching."""
    shapes = draw(st.lists(table_shape(), min_size=1, max_size=5))
    plain = draw(st.integers(0, 2))
    order = draw(st.permutations(list(range(len(shapes) + plain))))  # the batch's table of each TT / plain table
    B = draw(st.integers(1, 10))
    seed = draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)
    rows = [s.num_embeddings for s in shapes] + [7] * plain
    by_batch = [rows[order.index(t)] for t in range(len(rows))]
    lengths = torch.randint(0, draw(st.integers(1, 6)), (len(rows) * B,), generator=gen)
    owner = torch.repeat_interleave(torch.tensor(by_batch).repeat_interleave(B), lengths)
    values = (torch.rand(int(lengths.sum()), generator=gen) ** 2 * owner).long()
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    return shapes, values, offsets, order[:len(shapes)], B, draw(st.integers(1, 5)), draw(st.integers(1, 8)), seed


def flat(shapes, cores):
    return ([c for cs in cores for c in cs], [s.d for s in shapes], [x for s in shapes for x in s.q],
            [x for s in shapes for x in s.r], [s.num_embeddings for s in shapes])


def run_tables(shapes, cores, values, offsets, tables, B, m, min_chunk, grads, impl=LIB):
    cs, per, q, r, rows = flat(shapes, cores)
    outs, *saved = impl.ecorec_tables_forward(cs, per, q, r, values, offsets, tables, B, m, min_chunk, rows)
    core_grads = [torch.zeros_like(c) for c in cs]
    impl.ecorec_tables_backward(cs, per, q, r, *saved[:4], grads, core_grads, rows)
    return outs, core_grads, saved


def table_slice(values, offsets, t, B):
    lo, hi = int(offsets[t * B]), int(offsets[(t + 1) * B])
    return values[lo:hi], offsets[t * B:(t + 1) * B + 1] - lo


@settings(max_examples=60, deadline=None)
@given(batches())
def test_every_table_matches_its_float64_replay_and_the_one_table_op(case):
    shapes, values, offsets, tables, B, m, min_chunk, seed = case
    cores = [cores_of(s, seed + k) for k, s in enumerate(shapes)]
    gen = torch.Generator().manual_seed(seed + 9)
    grads = [torch.randn(B, s.dim, generator=gen) for s in shapes]
    outs, core_grads, saved = run_tables(shapes, cores, values, offsets, tables, B, m, min_chunk, grads)
    at = 0
    for k, s in enumerate(shapes):
        v, o = table_slice(values, offsets, tables[k], B)
        want_out, want_grads = replay(s, cores[k], v, o, grads[k])
        close(outs[k], want_out.float(), 1e-4)
        one = LIB.ecorec_forward(cores[k], list(s.q), list(s.r), v, o, B, m, min_chunk, s.num_embeddings)
        assert torch.equal(outs[k], one[0])
        for a, b in zip([x[k] for x in saved], one[1:]):
            assert torch.equal(a, b)
        one_grads = [torch.zeros_like(c) for c in cores[k]]
        LIB.ecorec_backward(cores[k], list(s.q), list(s.r), *one[1:5], grads[k], one_grads, s.num_embeddings)
        for g, w, o1 in zip(core_grads[at:at + s.d], want_grads, one_grads):
            close(g, w.float(), 1e-4)
            assert torch.equal(g, o1)
        at += s.d


@settings(max_examples=30, deadline=None)
@given(batches())
def test_composition_equals_the_cpu_kernels(case):
    shapes, values, offsets, tables, B, m, min_chunk, seed = case
    cores = [cores_of(s, seed + k) for k, s in enumerate(shapes)]
    grads = [torch.randn(B, s.dim, generator=torch.Generator().manual_seed(seed + k)) for k, s in enumerate(shapes)]
    outs, core_grads, saved = run_tables(shapes, cores, values, offsets, tables, B, m, min_chunk, grads)
    c_outs, c_grads, c_saved = run_tables(shapes, cores, values, offsets, tables, B, m, min_chunk, grads, composed)
    for a, b in zip(saved, c_saved):
        for x, y in zip(a, b):
            assert torch.equal(x, y)
    for a, b in zip([*c_outs, *c_grads], [*outs, *core_grads]):
        close(a, b, 1e-5)


def sc24_tables(B=9_000):
    """Three tables: one of the SC24 shape, of ~45,000 lookups at the default B (it runs alone, every thread inside),
    two small ones (side by side, one thread each)."""
    s = tt.TTShape.create(27_000, 32, [32, 32], p=(30, 30, 30), q=(2, 4, 4))
    small = tt.TTShape.create(5_000, 16, [8, 8], p=(10, 20, 25), q=(2, 2, 4))
    gen = torch.Generator().manual_seed(4)
    lengths = torch.cat([torch.randint(0, 10, (B,), generator=gen), torch.randint(0, 3, (2 * B,), generator=gen)])
    owner = torch.repeat_interleave(torch.tensor([27_000, 5_000, 5_000]).repeat_interleave(B), lengths)
    values = (torch.rand(int(lengths.sum()), generator=gen) ** 3 * owner).long()
    return [s, small, small], values, torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]), B


def test_reruns_and_thread_counts_are_bit_identical():
    shapes, values, offsets, B = sc24_tables()
    assert int(offsets[B]) >= 1 << 15 > int(offsets[2 * B] - offsets[B])  # one table alone, two side by side
    cores = [cores_of(s, k) for k, s in enumerate(shapes)]
    grads = [torch.randn(B, s.dim, generator=torch.Generator().manual_seed(k)) for k, s in enumerate(shapes)]
    def run():
        outs, core_grads, saved = run_tables(shapes, cores, values, offsets, [0, 1, 2], B, 4, 16, grads)
        return [*outs, *core_grads, *[x for part in saved for x in part]]

    assert_identical([with_threads(t, run) for t in (1, 1, 2, 3)], "ecorec_tables_* (threads 1, 1, 2, 3)")


def test_an_error_names_its_table():
    shapes, values, offsets, B = sc24_tables()
    cores = [cores_of(s, k) for k, s in enumerate(shapes)]
    cs, per, q, r, rows = flat(shapes, cores)
    bad = values.clone()
    bad[int(offsets[2 * B]) + 1] = 5_000  # past the rows of the batch's table 2
    with pytest.raises(ValueError, match=r"TT table 2 \(the batch's table 2\): ecorec_forward: values\[1\] .* 5000"):
        LIB.ecorec_tables_forward(cs, per, q, r, bad, offsets, [0, 1, 2], B, 4, 16, rows)
    with pytest.raises(ValueError, match="tables\\[1\\] = 3 but the batch has 3 tables"):
        LIB.ecorec_tables_forward(cs, per, q, r, values, offsets, [0, 3, 2], B, 4, 16, rows)
    with pytest.raises(ValueError, match="the 3 tables take 9 cores, 9 radices and 12 ranks, but the call has 9, 9 "
                                         "and 13"):
        LIB.ecorec_tables_forward(cs, per, q, r + [1], values, offsets, [0, 1, 2], B, 4, 16, rows)
    with pytest.raises(ValueError, match="num_rows has 2 entries for 3 tables"):
        LIB.ecorec_tables_forward(cs, per, q, r, values, offsets, [0, 1, 2], B, 4, 16, rows[:2])
    outs, *saved = LIB.ecorec_tables_forward(cs, per, q, r, values, offsets, [0, 1, 2], B, 4, 16, rows)
    grads = [torch.zeros_like(c) for c in cs]
    with pytest.raises(ValueError, match="grads has 2 tensors for 3 tables"):
        LIB.ecorec_tables_backward(cs, per, q, r, *saved[:4], [torch.ones(B, s.dim) for s in shapes[:2]], grads, rows)
    wrong = [torch.ones(B, s.dim) for s in shapes]
    wrong[1] = torch.ones(B, 3)
    with pytest.raises(ValueError, match="TT table 1: ecorec_backward"):
        LIB.ecorec_tables_backward(cs, per, q, r, *saved[:4], wrong, grads, rows)


@pytest.mark.gpu
def test_the_gpu_ops_equal_the_cpu_kernels():
    """On a GPU the ops are the composition (csrc/ecorec_tables_composed.cpp: each table's ecorec_forward /
    ecorec_backward in turn, their CUDA compositions)."""
    shapes, values, offsets, B = sc24_tables()
    cores = [cores_of(s, k) for k, s in enumerate(shapes)]
    grads = [torch.randn(B, s.dim, generator=torch.Generator().manual_seed(k)) for k, s in enumerate(shapes)]
    cpu = run_tables(shapes, cores, values, offsets, [0, 1, 2], B, 4, 16, grads)
    gpu = run_tables(shapes, [[c.cuda() for c in cs] for cs in cores], values.cuda(), offsets.cuda(), [0, 1, 2], B,
                     4, 16, [g.cuda() for g in grads])
    for a, b in zip(gpu[2], cpu[2]):
        for x, y in zip(a, b):
            assert torch.equal(x.cpu(), y)
    for a, b in zip(gpu[0], cpu[0]):
        close(a.cpu(), b, 1e-5)
    for a, b in zip(gpu[1], cpu[1]):
        close(a.cpu(), b, 1e-4)
