"""Gradients that many lookups add into one row (TT core rows, a prefix group, a destination row) are summed
in a fixed order: bit-identical from call to call and whatever the thread count on the CPU, and from call
to call on CUDA. Cases have thousands of lookups into a few core rows, so runs are long and the CPU's fixed
chunks (cpu_util.h) are many."""
import math

import pytest
import torch

from impls.core import ops, tt
from impls.core import reference as ref
from tests.core.test_tt_ops import close

ISAS = ops.cpu_isas()  # every ISA build of the CPU TT kernels (AVX-512 builds carry an AVX2 one)

SHAPES = {  # d: (p, q, ranks)
    2: ((40, 30), (4, 4), [8]),
    3: ((6, 5, 7), (2, 4, 4), [8, 8]),
    4: ((3, 4, 5, 6), (2, 2, 2, 4), [4, 6, 8]),
}


def case(d: int, device: str):
    p, q, r = SHAPES[d]
    s = tt.TTShape.create(math.prod(p), math.prod(q), r, p=p, q=q)
    gen = torch.Generator().manual_seed(d)
    cores = [c.to(device) for c in tt.init_cores(s, "normal", gen)]
    G, n = 700, 3000
    prefix_ids = torch.randint(0, math.prod(p[:-1]), (G,), generator=gen)  # repeats on purpose
    item_group = torch.sort(torch.randint(0, G, (n,), generator=gen))[0]
    item_last = torch.randint(0, p[-1], (n,), generator=gen)
    grad_items = torch.randn(n, s.dim, generator=gen)
    return s, cores, *(t.to(device) for t in (prefix_ids, item_group, item_last, grad_items))


def backward(s, cores, prefix_ids, item_group, item_last, grad_items):
    prefix = ops.tt_prefix(cores, s, prefix_ids)
    grad_last = torch.zeros_like(cores[-1])
    d_prefix = ops.tt_last_backward(prefix, cores, s, item_group, item_last, grad_items, grad_last)
    grads = [torch.zeros_like(c) for c in cores[:-1]]
    ops.tt_prefix_backward(cores, s, prefix_ids, d_prefix, grads)
    return [d_prefix, *grads, grad_last]


def with_threads(n: int, fn, *args):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        return fn(*args)
    finally:
        torch.set_num_threads(before)


def assert_identical(runs, what):
    first = runs[0]
    for k, other in enumerate(runs[1:], 1):
        for i, (a, b) in enumerate(zip(first, other)):
            assert torch.equal(a, b), f"{what}: output {i} of call {k} differs by {float((a - b).abs().max()):.3g}"


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("d", [2, 3, 4])
def test_tt_backward_is_bit_identical_across_calls_and_threads(d, isa):
    with ops.use_cpu_isa(isa):
        args = case(d, "cpu")
        runs = [with_threads(t, backward, *args) for t in (2, 1, 2, 2)]
        assert_identical(runs, f"d={d} TT backward on the CPU, {isa} (threads 2, 1, 2, 2)")
        # and it is the right sum
        s, cores, prefix_ids, item_group, item_last, grad_items = args
        prefix = ops.tt_prefix(cores, s, prefix_ids)
        want_prefix, want_last = ref.tt_last_backward_ref(prefix, cores, s, item_group, item_last, grad_items)
        close(runs[0][0], want_prefix, 1e-4)
        close(runs[0][-1], want_last, 1e-4)
        for got, want in zip(runs[0][1:-1], ref.tt_prefix_backward_ref(cores, s, prefix_ids, want_prefix)):
            close(got, want, 1e-4)


def fused_backward(s, cores, prefix_ids, item_group, item_last, grad_items):
    grads = [torch.zeros_like(c) for c in cores]
    ops.tt_stages_backward(cores, s, prefix_ids, item_group, item_last, grad_items, grads)
    return grads


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("d", [2, 3, 4])
def test_fused_tt_backward_is_bit_identical_across_calls_and_threads(d, isa):
    with ops.use_cpu_isa(isa):
        args = case(d, "cpu")
        runs = [with_threads(t, fused_backward, *args) for t in (2, 1, 2, 2)]
        assert_identical(runs, f"d={d} fused TT backward on the CPU, {isa} (threads 2, 1, 2, 2)")
        for got, want in zip(runs[0], backward(*args)[1:]):  # the same sums as the separate stage ops
            close(got, want, 1e-4)


def scatter(src, si, di, rows):
    out = torch.zeros(rows, src.shape[1])
    ops.scatter_add_rows(src, si, di, out)
    return [out]


def test_scatter_add_rows_is_bit_identical_across_calls_and_threads():
    gen = torch.Generator().manual_seed(0)
    src = torch.randn(500, 24, generator=gen)
    si = torch.randint(0, 500, (20000,), generator=gen)
    di = torch.randint(0, 37, (20000,), generator=gen)  # ~540 adds into each destination row
    runs = [with_threads(t, scatter, src, si, di, 37) for t in (2, 1, 2)]
    assert_identical(runs, "scatter_add_rows on the CPU (threads 2, 1, 2)")
    close(runs[0][0], ref.scatter_add_rows_ref(src, si, di, torch.zeros(37, 24)), 1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [2, 3, 4])
def test_tt_backward_is_bit_identical_across_calls_on_cuda(d):
    args = case(d, "cuda")
    runs = [backward(*args) for _ in range(3)]
    assert_identical(runs, f"d={d} TT backward on CUDA")
    cpu = backward(*case(d, "cpu"))
    for got, want in zip(runs[0], cpu):
        close(got, want, 1e-4)


@pytest.mark.gpu
def test_scatter_add_rows_is_bit_identical_across_calls_on_cuda():
    gen = torch.Generator().manual_seed(0)
    src = torch.randn(500, 24, generator=gen).cuda()
    si = torch.randint(0, 500, (20000,), generator=gen).cuda()
    di = torch.randint(0, 37, (20000,), generator=gen).cuda()
    runs = []
    for _ in range(3):
        out = torch.zeros(37, 24, device="cuda")
        ops.scatter_add_rows(src, si, di, out)
        runs.append([out])
    assert_identical(runs, "scatter_add_rows on CUDA")


def test_empty_destinations_and_rows():
    """No entries, zero-width rows, or no destination rows: nothing to add, and no division by a zero size."""
    out = torch.zeros(3, 0)
    ops.scatter_add_rows(torch.zeros(2, 0), torch.tensor([0, 1]), torch.tensor([2, 0]), out)
    empty = torch.tensor([], dtype=torch.int64)
    out = torch.ones(0, 4)
    ops.scatter_add_rows(torch.zeros(2, 4), empty, empty, out)
    out = torch.ones(5, 4)
    ops.scatter_add_rows(torch.zeros(2, 4), empty, empty, out)
    assert torch.equal(out, torch.ones(5, 4))
