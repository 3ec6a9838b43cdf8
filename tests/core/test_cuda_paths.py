"""Every CUDA op against its pure-torch reference at the sizes that take each kernel path: grids of more than one
grid-stride pass (more than 2^20 blocks' worth of work), shared memory beyond the default 48 KB (granted on
request), operands beyond a block's shared memory (the global-memory paths), and every index error path.

The same checks run on the CPU at small sizes (unmarked), so the checks themselves are exercised on every
machine; the ``gpu`` tests run them on CUDA at full size."""
import math

import pytest
import torch

from impls.core import ops, tt
from impls.core import reference as ref

GRID_CAP = 1 << 20  # cuda_util.cuh blocks_for: at most 2^20 blocks, then each block strides over the rest


def _shape(p, q, r):
    return tt.TTShape.create(math.prod(p), math.prod(q), r, p=p, q=q)


def _cores(s, device, seed=0):
    return [c.to(device) for c in tt.init_cores(s, "normal", torch.Generator().manual_seed(seed))]


def _close(a, b, rtol=1e-4):
    scale = max(float(b.abs().max()) if b.numel() else 0.0, 1e-30)
    torch.testing.assert_close(a.cpu(), b.cpu(), rtol=rtol, atol=1e-5 * scale)


def _inputs(s, G, n, device, seed):
    """Cores, G prefix ids and n items (groups non-decreasing) of shape s, and the generator that drew them."""
    gen = torch.Generator().manual_seed(seed)
    cores = _cores(s, device, seed)
    prefix_ids = torch.randint(0, math.prod(s.p[:-1]), (G,), generator=gen).to(device)
    item_group = torch.sort(torch.randint(0, G, (n,), generator=gen))[0].to(device)
    item_last = torch.randint(0, s.p[-1], (n,), generator=gen).to(device)
    return cores, prefix_ids, item_group, item_last, gen


def check_forward(s, G, n, device, seed=0):
    """tt_prefix, tt_last and tt_stages against the references (G prefix ids, n items)."""
    cores, prefix_ids, item_group, item_last, _ = _inputs(s, G, n, device, seed)
    prefix = ops.tt_prefix(cores, s, prefix_ids)
    want_prefix = ref.tt_prefix_ref(cores, s, prefix_ids)
    _close(prefix, want_prefix)
    _close(ops.tt_last(prefix, cores, s, item_group, item_last), ref.tt_last_ref(want_prefix, cores, s, item_group,
                                                                                   item_last))
    _close(ops.tt_stages(cores, s, prefix_ids, item_group, item_last),
           ref.tt_last_ref(want_prefix, cores, s, item_group, item_last))


def check_backward(s, G, n, device, seed=0):
    """tt_stages_backward (tt_last_backward + tt_prefix_backward) against autograd through the references."""
    cores, prefix_ids, item_group, item_last, gen = _inputs(s, G, n, device, seed)
    grad_items = torch.randn(n, s.dim, generator=gen).to(device)
    grads = [torch.zeros_like(c) for c in cores]
    ops.tt_stages_backward(cores, s, prefix_ids, item_group, item_last, grad_items, grads)
    leaves = [c.detach().requires_grad_(True) for c in cores]
    out = ref.tt_last_ref(ref.tt_prefix_ref(leaves, s, prefix_ids), leaves, s, item_group, item_last)
    want = torch.autograd.grad(out, leaves, grad_items, allow_unused=True)
    for g, w in zip(grads, want):
        _close(g, torch.zeros_like(g) if w is None else w, rtol=1e-3)


def check_pooling(S, D, rows, device, seed=0):
    """gather_pool and scatter_add_rows over S segments / destination rows of width D."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randn(rows, D, generator=gen).to(device)
    lengths = torch.randint(0, 3, (S,), generator=gen)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)]).to(device)
    index = torch.randint(0, rows, (int(lengths.sum()),), generator=gen).to(device)
    out = torch.zeros(S, D, device=device)
    ops.gather_pool(src, index, offsets, out)
    _close(out, ref.gather_pool_ref(src, index, offsets, torch.zeros(S, D, device=device)))
    dst = torch.randint(0, S, (index.numel(),), generator=gen).to(device)
    out = torch.zeros(S, D, device=device)
    ops.scatter_add_rows(src, index, dst, out)
    _close(out, ref.scatter_add_rows_ref(src, index, dst, torch.zeros(S, D, device=device)))


def check_bounds(nbags, device):
    """A valid batch of nbags one-id bags, then the same with a bad id in the last bag."""
    values = torch.zeros(nbags, dtype=torch.int64, device=device)
    offsets = torch.arange(nbags + 1, device=device)
    rows = torch.tensor([3], device=device)
    assert ops.bounds_check_raw(values, offsets, rows, nbags).cpu().tolist() == [0, -1, -1, -1, 0]
    values[-1] = 3
    assert ops.bounds_check_raw(values, offsets, rows, nbags).cpu().tolist() == [5, 0, nbags - 1, nbags - 1, 3]


def check_index_errors(device):
    """Every index an op reads is range-checked (check_indices=True, the default) with a message naming it."""
    s = _shape((3, 4, 5), (2, 2, 2), [3, 3])
    cores = _cores(s, device)
    ids = lambda *x: torch.tensor(x, dtype=torch.int64, device=device)  # noqa: E731
    prefix = torch.zeros(2, s.prefix_width, device=device)
    out = torch.zeros(2, s.dim, device=device)
    with pytest.raises(ValueError, match=r"prefix_ids\[1\] = 12 is outside \[0, 12\)"):
        ops.tt_prefix(cores, s, ids(0, 12))
    with pytest.raises(ValueError, match=r"item_group\[0\] = 2 is outside \[0, 2\)"):
        ops.tt_last(prefix, cores, s, ids(2, 0), ids(0, 0), out=out)
    with pytest.raises(ValueError, match=r"item_last\[1\] = -1 is outside \[0, 5\)"):
        ops.tt_last(prefix, cores, s, ids(0, 0), ids(0, -1), out=out)
    grads = [torch.zeros_like(c) for c in cores]
    with pytest.raises(ValueError, match="item_group must be non-decreasing"):
        ops.tt_last_backward(prefix, cores, s, ids(1, 0), ids(0, 0), out, grads[-1])
    with pytest.raises(ValueError, match=r"prefix_ids\[0\] = -3 is outside"):
        ops.tt_prefix_backward(cores, s, ids(-3), torch.zeros(1, s.prefix_width, device=device), grads[:-1])
    src, seg_out = torch.zeros(4, 2, device=device), torch.zeros(2, 2, device=device)
    with pytest.raises(ValueError, match=r"index\[1\] = 4 is outside \[0, 4\)"):
        ops.gather_pool(src, ids(0, 4), ids(0, 1, 2), seg_out)
    with pytest.raises(ValueError, match="segment_offsets must run from 0"):
        ops.gather_pool(src, ids(0, 1), ids(0, 1, 3), seg_out)
    with pytest.raises(ValueError, match="segment_offsets decrease"):
        ops.gather_pool(src, ids(0, 1), ids(0, 2, 1, 2), torch.zeros(3, 2, device=device))
    with pytest.raises(ValueError, match=r"src_index\[0\] = 9 is outside"):
        ops.scatter_add_rows(src, ids(9), ids(0), seg_out)
    with pytest.raises(ValueError, match=r"dst_index\[0\] = 2 is outside \[0, 2\)"):
        ops.scatter_add_rows(src, ids(0), ids(2), seg_out)


# --- the same checks, small, on the CPU -------------------------------------------------------------------------
def test_checks_on_cpu():
    check_forward(_shape((3, 4, 5), (2, 2, 2), [3, 3]), 7, 40, "cpu")
    check_forward(_shape((2, 2, 3, 4), (2, 2, 2, 2), [2, 3, 2]), 5, 30, "cpu")
    check_backward(_shape((3, 4, 5), (2, 2, 2), [3, 3]), 7, 40, "cpu")
    check_backward(_shape((2, 2, 3, 4), (2, 2, 2, 2), [2, 3, 2]), 5, 30, "cpu")
    check_pooling(50, 8, 20, "cpu")
    check_bounds(1000, "cpu")
    check_index_errors("cpu")


# --- full size on CUDA ------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_cuda_index_errors():
    check_index_errors("cuda")


@pytest.mark.gpu
def test_cuda_prefix_and_last_beyond_one_grid_pass():
    # tt_prefix: one block per prefix id, tt_last: one block per item: more than 2^20 of each
    s = _shape((64, 64, 8), (2, 4, 4), [8, 8])
    check_forward(s, GRID_CAP + 4321, GRID_CAP + 1234, "cuda")


@pytest.mark.gpu
def test_cuda_d4_chain_in_requested_shared_memory():
    # the d = 4 intermediate G_0 G_1: q0 * q1 * r2 = 8 * 8 * 256 floats = 64 KB > 48 KB (granted on request)
    s = _shape((2, 2, 3, 4), (8, 8, 2, 2), [16, 256, 16])
    assert 48 * 1024 < 4 * s.q[0] * s.q[1] * s.r[2] <= 227 * 1024
    check_forward(s, 300, 600, "cuda")
    check_backward(s, 40, 90, "cuda")


@pytest.mark.gpu
def test_cuda_operands_beyond_shared_memory_use_global_memory():
    # d = 4 intermediate of 16 * 16 * 256 floats = 256 KB, and a d = 3 prefix row of 256 * 256 floats: both
    # beyond a block's 227 KB, so the prefix chain uses a global scratch and tt_last reads global memory
    s4 = _shape((2, 2, 2, 3), (16, 16, 2, 2), [8, 256, 8])
    check_forward(s4, 2000, 300, "cuda")
    s3 = _shape((2, 3, 5), (16, 16, 4), [256, 256])
    assert 4 * (s3.prefix_width + 256 * 4) > 227 * 1024
    check_forward(s3, 50, 300, "cuda")
    check_backward(s3, 20, 60, "cuda")


@pytest.mark.gpu
def test_cuda_backward_beyond_one_grid_pass():
    # core-gradient kernels: one thread per gradient element, p_L * r * q_L > 2^20 * 128 elements
    s = _shape((4, 8, 70_000), (2, 4, 16), [8, 128])
    assert s.p[-1] * s.r[-2] * s.q[-1] > GRID_CAP * 128
    check_backward(s, 3000, 200_000, "cuda")


@pytest.mark.gpu
def test_cuda_pooling_beyond_one_grid_pass():
    # one thread per (segment, column): S * D > 2^20 blocks * 256 threads
    check_pooling(4_300_000, 64, 1000, "cuda")


@pytest.mark.gpu
def test_cuda_bounds_check_beyond_one_block_row():
    check_bounds(3_000_000, "cuda")


@pytest.mark.gpu
def test_cuda_ops_trusting_their_indices_never_synchronize():
    """check_indices=False (what the schedules pass): the TT stages and both pooling ops, forward and backward,
    queue their work without one host-device sync (torch's sync debug mode raises on any)."""
    s = _shape((3, 4, 5, 6), (2, 2, 2, 2), [4, 4, 4])
    cores, prefix_ids, item_group, item_last, gen = _inputs(s, 50, 200, "cuda", 0)
    grad_items = torch.randn(200, s.dim, generator=gen).cuda()
    grads = [torch.zeros_like(c) for c in cores]
    src, out = torch.randn(40, 8, device="cuda"), torch.zeros(10, 8, device="cuda")
    index = torch.randint(0, 40, (30,), generator=gen).cuda()
    offsets, dst = torch.arange(0, 31, 3).cuda(), torch.randint(0, 10, (30,), generator=gen).cuda()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        ops.tt_stages(cores, s, prefix_ids, item_group, item_last, check_indices=False)
        ops.tt_stages_backward(cores, s, prefix_ids, item_group, item_last, grad_items, grads, check_indices=False)
        ops.gather_pool(src, index, offsets, out, check_indices=False)
        ops.scatter_add_rows(src, index, dst, out, check_indices=False)
    finally:
        torch.cuda.set_sync_debug_mode("default")


# --- unchecked bad ids (check_indices=False): one behaviour on both devices ---------------------------------------
def test_raise_index_error_has_nothing_to_raise_on_the_cpu():
    """The CPU kernels raise at the op even when told not to check (no sync to save); the record read is a no-op."""
    s = _shape((3, 4, 5), (2, 2, 2), [3, 3])
    with pytest.raises(ValueError, match=r"prefix_ids\[1\] = 12 is outside \[0, 12\)"):
        ops.tt_prefix(_cores(s, "cpu"), s, torch.tensor([0, 12]), check_indices=False)
    ops.raise_index_error(torch.device("cpu"))


@pytest.mark.gpu
def test_cuda_unchecked_bad_ids_read_zeros_and_raise_when_the_record_is_read():
    s = _shape((3, 4, 5), (2, 2, 2), [3, 3])
    cores = _cores(s, "cuda")
    dev = torch.device("cuda")
    ids = lambda *x: torch.tensor(x, dtype=torch.int64, device="cuda")  # noqa: E731
    ops.raise_index_error(dev)  # an empty record raises nothing
    prefix = ops.tt_prefix(cores, s, ids(0, 12, -3), check_indices=False)
    assert not prefix[1:].any() and prefix[0].any()  # bad prefix ids read zeros
    with pytest.raises(ValueError, match=r"tt_prefix: prefix_ids\[[12]\] = (12|-3) is outside \[0, 12\)"):
        ops.raise_index_error(dev)
    ops.raise_index_error(dev)  # read once, cleared
    out = ops.tt_last(prefix[:1], cores, s, ids(0, 1), ids(0, 0), check_indices=False)
    assert not out[1].any()
    with pytest.raises(ValueError, match=r"tt_last: item_group\[1\] = 1 is outside \[0, 1\)"):
        ops.raise_index_error(dev)
    padded = tt.TTShape.create(55, 8, [3, 3], p=(3, 4, 5), q=(2, 2, 2))  # rows 55..59 are padding
    ops.tt_stages(cores, padded, ids(11), ids(0), ids(4), check_indices=False)
    with pytest.raises(ValueError, match="tt_stages: item 0 reads row 59 of a table of 55 rows"):
        ops.raise_index_error(dev)
    # backward: a bad prefix adds nothing; the good one's gradient equals the CPU's
    grad_items = torch.randn(2, s.dim, device="cuda")
    grads = [torch.zeros_like(c) for c in cores]
    ops.tt_stages_backward(cores, s, ids(0, 12), ids(0, 1), ids(2, 3), grad_items, grads, check_indices=False)
    with pytest.raises(ValueError, match=r"prefix_ids\[1\] = 12 is outside"):
        ops.raise_index_error(dev)
    want = [torch.zeros_like(c).cpu() for c in cores]
    ops.tt_stages_backward([c.cpu() for c in cores], s, torch.tensor([0]), torch.tensor([0]), torch.tensor([2]),
                           grad_items[:1].cpu(), want)
    for got, w in zip(grads, want):
        _close(got, w)
