"""ecorec_forward / ecorec_backward, EcoRec's table step as one native call each way, against a float64 replay of the
lookup (rows from the cores by pure torch, pooled, differentiated by autograd), against the composition of torch
passes and stage ops it replaces (EcoRec with native_step=False, the same products in float32), and its own ATen
composition (the GPU's kernels, run here on CPU tensors): drawn shapes, bag sizes, empty bags, duplicate ids,
micro-batch counts; the artifact's micro-batch rule; reruns and thread counts bit-identical."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, get_impl
from impls.core import ops, tt
from impls.core.counters import TTWork
from impls.ecorec.collection import micro_batch_bounds
from tests.core.test_determinism import assert_identical, with_threads
from tests.core.test_tt_ops import close

composed = torch.ops.dlrmbench_composed


@st.composite
def step_cases(draw):
    """A TT shape (its rows at most the cores' cover), a batch of bags over its rows (empty bags, skewed ids so
    duplicates are common) and a micro-batching."""
    d = draw(st.integers(2, 4))
    p = draw(st.lists(st.integers(1, 6), min_size=d, max_size=d))
    q = draw(st.lists(st.sampled_from([1, 2, 4]), min_size=d, max_size=d))
    r = draw(st.lists(st.integers(1, 9), min_size=d - 1, max_size=d - 1))
    cover = math.prod(p)
    rows = draw(st.integers(max(1, cover // 2), cover))
    s = tt.TTShape.create(rows, math.prod(q), r, p=p, q=q)
    B = draw(st.integers(1, 12))
    seed = draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, draw(st.integers(1, 7)), (B,), generator=gen)
    values = (torch.rand(int(lengths.sum()), generator=gen) ** 2 * rows).long().clamp_(max=rows - 1)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    m, min_chunk = draw(st.integers(1, 6)), draw(st.integers(1, 8))
    return s, values, offsets, B, m, min_chunk, seed


def cores_of(s, seed, dtype=torch.float32):
    return [c.to(dtype) for c in tt.init_cores(s, "normal", torch.Generator().manual_seed(seed + 1))]


def replay(s, cores, values, offsets, grad):
    """The pooled rows and the core gradients in float64: rows from the cores (pure torch), summed per bag."""
    c64 = [c.double().requires_grad_() for c in cores]
    rows = tt.rows_from_cores(c64, s, values)
    bags = torch.repeat_interleave(torch.arange(offsets.numel() - 1), offsets[1:] - offsets[:-1])
    out = torch.zeros(offsets.numel() - 1, s.dim, dtype=torch.float64).index_add(0, bags, rows)
    (out * grad.double()).sum().backward()
    return out.detach(), [c.grad for c in c64]


def run_op(s, cores, values, offsets, B, m, min_chunk, grad, impl=torch.ops.dlrmbench):
    q, r = list(s.q), list(s.r)
    out, unique, co, occ_bags, bounds, groups = impl.ecorec_forward(cores, q, r, values, offsets, B, m, min_chunk,
                                                                     s.num_embeddings)
    grads = [torch.zeros_like(c) for c in cores]
    impl.ecorec_backward(cores, q, r, unique, co, occ_bags, bounds, grad, grads, s.num_embeddings)
    return out, grads, (unique, co, occ_bags, bounds, groups)


@pytest.mark.parametrize("isa", ops.cpu_isas())
@settings(max_examples=80, deadline=None)
@given(step_cases())
def test_op_equals_the_float64_replay_and_states_its_micro_batches(isa, case):
    """Every ISA build of the stage kernels the op calls (set_cpu_isa holds for it as for the stage ops)."""
    assert_matches_replay(case, isa)


def test_ids_too_wide_to_pack_beside_their_bags_sort_with_the_bags_apart():
    """A table of 2^55 rows and 1,024 bags: an id and its bag need 65 bits, so the ids sort alone with the bags
    carried beside them (the other path of the dedup's sort), to the same answer."""
    s = tt.TTShape.create(2**55, 1, [1, 1], p=[2**19, 2**18, 2**18], q=[1, 1, 1])
    gen = torch.Generator().manual_seed(5)
    B = 1024
    lengths = torch.randint(0, 4, (B,), generator=gen)
    n = int(lengths.sum())
    values = torch.randint(0, 2**55, (n,), generator=gen)
    values[n - n // 2:] = values[:n // 2].clone()  # every id of the first half again: duplicates across bags
    values[0] = 2**55 - 1  # the last row
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    assert_matches_replay((s, values, offsets, B, 3, 1, 5))


def test_a_batch_without_ids_pools_zeros_whatever_the_rows():
    """No id at all (every bag empty): nothing is out of range, even for a table of 0 rows."""
    s, _, _, B = sc24_case(B=4)
    cores, q, r = cores_of(s, 0), list(s.q), list(s.r)
    for rows in (s.num_embeddings, 0):
        out, uq, *_ = torch.ops.dlrmbench.ecorec_forward(cores, q, r, torch.zeros(0, dtype=torch.long),
                                                         torch.zeros(B + 1, dtype=torch.long), B, 4, 1, rows)
        assert torch.equal(out, torch.zeros(B, s.dim)) and uq.numel() == 0


def assert_matches_replay(case, isa=None):
    """The op's pooled rows and core gradients match the float64 replay; its unique ids, micro-batches, prefix groups
    and occurrence bags are what they must be."""
    s, values, offsets, B, m, min_chunk, seed = case
    isa = isa or ops.cpu_isa()
    cores = cores_of(s, seed)
    grad = torch.randn(B, s.dim, generator=torch.Generator().manual_seed(seed + 2))
    with ops.use_cpu_isa(isa):
        out, grads, (unique, co, occ_bags, bounds, groups) = run_op(s, cores, values, offsets, B, m, min_chunk, grad)
    want_out, want_grads = replay(s, cores, values, offsets, grad)
    close(out, want_out.float(), 1e-4)
    for g, w in zip(grads, want_grads):
        close(g, w.float(), 1e-4)
    ids = sorted(set(values.tolist()))
    assert unique.tolist() == ids
    cb = bounds.tolist()
    assert list(zip(cb, cb[1:])) == micro_batch_bounds(len(ids), m, min_chunk)  # the artifact's rule, both sides
    assert groups.tolist() == [len({i // s.p[-1] for i in ids[lo:hi]}) for lo, hi in zip(cb, cb[1:])]
    bags = torch.repeat_interleave(torch.arange(B), offsets[1:] - offsets[:-1])
    for u, i in enumerate(ids):  # each unique id's occurrences, in position order, name their bags
        want = bags[values == i].tolist()
        assert occ_bags[co[u]:co[u + 1]].tolist() == want


@settings(max_examples=60, deadline=None)
@given(step_cases())
def test_composition_equals_the_cpu_kernels(case):
    s, values, offsets, B, m, min_chunk, seed = case
    cores = cores_of(s, seed)
    grad = torch.randn(B, s.dim, generator=torch.Generator().manual_seed(seed + 2))
    out, grads, saved = run_op(s, cores, values, offsets, B, m, min_chunk, grad)
    c_out, c_grads, c_saved = run_op(s, cores, values, offsets, B, m, min_chunk, grad, impl=composed)
    for a, b in zip(saved, c_saved):
        assert torch.equal(a, b)
    close(c_out, out, 1e-5)
    for a, b in zip(c_grads, grads):
        close(a, b, 1e-5)


def sc24_case(B=512, seed=3):
    s = tt.TTShape.create(27_000, 32, [32, 32], p=(30, 30, 30), q=(2, 4, 4))
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 6, (B,), generator=gen)
    values = (torch.rand(int(lengths.sum()), generator=gen) ** 3 * s.num_embeddings).long()
    return s, values, torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]), B


@pytest.mark.parametrize("B", [512, 24_000], ids=["one-chunk", "sorted-in-chunks"])
def test_reruns_and_thread_counts_are_bit_identical(B):
    """A batch of ~60,000 ids is sorted and listed per bag in one chunk per thread (ecorec_index.cpp): the outputs,
    what the backward reads and the gradients are the same for 1, 2 and 3 threads."""
    s, values, offsets, B = sc24_case(B)
    cores = cores_of(s, 0)
    grad = torch.randn(B, s.dim, generator=torch.Generator().manual_seed(5))
    def run():
        out, grads, saved = run_op(s, cores, values, offsets, B, 4, 16, grad)
        return [out, *grads, *saved]

    assert_identical([with_threads(t, run) for t in (1, 1, 2, 3)], "ecorec_forward / _backward (threads 1, 1, 2, 3)")


def test_bad_input_is_refused_by_name():
    s, values, offsets, B = sc24_case(B=8)
    cores, q, r = cores_of(s, 0), list(s.q), list(s.r)
    with pytest.raises(ValueError, match="offsets has 8 entries, expected batch_size \\+ 1 = 9"):
        torch.ops.dlrmbench.ecorec_forward(cores, q, r, values, offsets[:-1], B, 4, 1, s.num_embeddings)
    t = torch.tensor
    with pytest.raises(ValueError, match=r"offsets decrease at bag 1 \(2 -> 1\)"):
        torch.ops.dlrmbench.ecorec_forward(cores, q, r, t([1, 2, 3]), t([0, 2, 1, 3]), 3, 4, 1, s.num_embeddings)
    with pytest.raises(ValueError, match="micro_batches and min_chunk must be >= 1"):
        torch.ops.dlrmbench.ecorec_forward(cores, q, r, values, offsets, B, 0, 1, s.num_embeddings)
    past = values.clone()
    past[0] = s.num_embeddings  # inside the cores' cover (27,000 rows exactly: none) or past it
    with pytest.raises((ValueError, IndexError)):
        torch.ops.dlrmbench.ecorec_forward(cores, q, r, past, offsets, B, 4, 1, s.num_embeddings)
    with pytest.raises(ValueError, match="num_rows = 28000 but the cores cover 27000 rows"):
        torch.ops.dlrmbench.ecorec_forward(cores, q, r, values, offsets, B, 4, 1, 28_000)
    # what the backward reads back: its unique ids name rows of the cores, its num_rows fits them
    out, uq, co, ob, cb, _ = torch.ops.dlrmbench.ecorec_forward(cores, q, r, values, offsets, B, 4, 1, s.num_embeddings)
    grads, g = [torch.zeros_like(c) for c in cores], torch.ones(B, s.dim)
    past_end = uq.clone()
    past_end[-1] = s.num_embeddings + 5
    with pytest.raises(ValueError, match=r"unique ids must lie in \[0, 27000\), got .* 27005"):
        torch.ops.dlrmbench.ecorec_backward(cores, q, r, past_end, co, ob, cb, g, grads, s.num_embeddings)
    with pytest.raises(ValueError, match="num_rows = 28000 but the cores cover 27000 rows"):
        torch.ops.dlrmbench.ecorec_backward(cores, q, r, uq, co, ob, cb, g, grads, 28_000)
    for bad in (-3, 2**62):  # below the rows, and far past them: refused by name before any sorting
        wrong = values.clone()
        wrong[-1] = bad
        with pytest.raises((ValueError, IndexError), match=str(bad)):
            torch.ops.dlrmbench.ecorec_forward(cores, q, r, wrong, offsets, B, 4, 1, s.num_embeddings)


def build(native, optim, m, min_chunk):
    tables = [TableSpec("t", 200, 16), TableSpec("u", 90, 16)]
    return get_impl("ecorec")(tables, optim, ranks=[3, 5], p=(6, 5, 7), q=(2, 2, 4), tt_min_rows=0,
                              micro_batches=m, min_chunk=min_chunk, native_step=native)


@pytest.mark.parametrize("optim", [EmbeddingOptim("sgd", lr=0.1), EmbeddingOptim("adagrad", lr=0.1)],
                         ids=["sgd", "adagrad"])
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10**6), m=st.integers(1, 5), min_chunk=st.integers(1, 10))
def test_the_native_step_trains_as_the_composition_does(optim, seed, m, min_chunk):
    """Two steps of EcoRec with the native op and with its reference composition: the same pooled rows, the same
    cores after each update (within float32 summation order), the same work counts."""
    gen = torch.Generator().manual_seed(seed)
    native, reference = build(True, optim, m, min_chunk), build(False, optim, m, min_chunk)
    for it in range(2):
        lengths = torch.randint(0, 5, (2 * 24,), generator=gen)
        rows = torch.tensor([200] * 24 + [90] * 24)
        owner = torch.repeat_interleave(rows, lengths)
        values = (torch.rand(int(lengths.sum()), generator=gen) ** 2 * owner).long()
        sf = SparseFeatures(values, torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]), 24)
        up = torch.randn(24, 32, generator=gen)
        outs = []
        for emb in (native, reference):
            out = emb(sf)
            (out * up).sum().backward()
            emb.optimizer_step()
            outs.append(out.detach())
        torch.testing.assert_close(outs[0], outs[1], rtol=1e-5, atol=1e-6)
        # Adagrad's first steps move an element by about the rate whatever its gradient (g / sqrt(g^2)): where g is
        # near the rounding of the two summation orders, the cores differ by a few 1e-6 at lr 0.1
        atol = 1e-6 if optim.kind == "sgd" else 1e-5
        for name in ("t", "u"):
            for a, b in zip(native.table_parameters(name), reference.table_parameters(name)):
                torch.testing.assert_close(a, b, rtol=1e-5, atol=atol)
        wn, wr = native.work_report(), reference.work_report()
        assert (wn.nnz, wn.unique, wn.e1, wn.gemms, wn.flops) == (wr.nnz, wr.unique, wr.e1, wr.gemms, wr.flops)
        assert wn.extra["micro_batches"] == wr.extra["micro_batches"]


def test_work_counts_come_from_the_op():
    s, values, offsets, B = sc24_case()
    cores = cores_of(s, 0)
    work = TTWork()
    out, saved = ops.ecorec_forward(cores, s, values, offsets, B, 4, 16, work)
    ops.ecorec_backward(cores, s, saved, torch.ones(B, s.dim), [torch.zeros_like(c) for c in cores], work)
    U = len(set(values.tolist()))
    assert work.unique == U and work.micro_batches == len(micro_batch_bounds(U, 4, 16))
    assert work.flops["fwd"] == sum(g * s.prefix_flops() + n * s.last_flops() for n, g in saved.chunks)
    assert work.peak_intermediate_bytes >= max(n for n, _ in saved.chunks) * s.dim * 4


@pytest.mark.gpu
def test_the_gpu_op_equals_the_cpu_kernels():
    """On a GPU the op is the composition (csrc/ecorec_step_composed.cpp over the CUDA stage and pooling kernels)."""
    s, values, offsets, B = sc24_case(B=4096)
    cores = cores_of(s, 0)
    grad = torch.randn(B, s.dim, generator=torch.Generator().manual_seed(5))
    cpu = run_op(s, cores, values, offsets, B, 4, 16, grad)
    gpu = run_op(s, [c.cuda() for c in cores], values.cuda(), offsets.cuda(), B, 4, 16, grad.cuda())
    for a, b in zip(gpu[2], cpu[2]):
        assert torch.equal(a.cpu(), b)
    close(gpu[0], cpu[0], 1e-5)
    for a, b in zip(gpu[1], cpu[1]):
        close(a, b, 1e-4)
