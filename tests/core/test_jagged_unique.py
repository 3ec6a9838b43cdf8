import pytest
import torch
from hypothesis import given, settings

from impls.core.ops import jagged_unique
from impls.core.reference import jagged_unique_ref
from tests.conftest import devices
from tests.strategies import jagged_batches


@pytest.mark.parametrize("device", devices())
@settings(max_examples=200, deadline=None)
@given(batch=jagged_batches(max_rows=8, max_bag=6))
def test_matches_reference(device, batch):
    tables, sf = batch
    T, B = len(tables), sf.batch_size
    got = jagged_unique(sf.values.to(device), sf.offsets.to(device), T, B)
    ref = jagged_unique_ref(sf.values, sf.offsets, T, B)
    for name, g, r in zip(got._fields, got, ref):
        assert g.cpu().tolist() == r.tolist(), name
    # the invariants, stated directly
    assert torch.equal(got.unique.cpu()[got.inverse.cpu()], sf.values)
    assert int(got.counts.sum()) == sf.nnz
    assert sorted(got.sorted_positions.cpu().tolist()) == list(range(sf.nnz))


@pytest.mark.parametrize("threads", [1, 2])
def test_big_tables_and_wide_id_ranges_match_the_reference(threads):
    """Tables above the one-thread size (sorted by every thread, chunked histograms) beside small ones, with ids
    over 2^40, negative ids (an unchecked batch) and a table of one repeated id."""
    gen = torch.Generator().manual_seed(threads)
    parts = [
        torch.randint(0, 10**8, (150_000,), generator=gen),  # big: 27 bits, 3 radix passes
        torch.randint(0, 50, (300,), generator=gen),  # small, many repeats
        torch.randint(-(2**45), 2**45, (70_000,), generator=gen),  # big, negative and wide
        torch.full((1000,), 7),  # one id
        torch.randint(0, 1000, (90_000,), generator=gen),  # big, heavy repeats (stability decides)
    ]
    T, B = len(parts), 1
    v = torch.cat(parts)
    off = torch.tensor([0] + [int(p.numel()) for p in parts]).cumsum(0)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = jagged_unique(v, off, T, B)
    finally:
        torch.set_num_threads(before)
    ref = jagged_unique_ref(v, off, T, B)
    for name, g, r in zip(got._fields, got, ref):
        assert torch.equal(g, r), name


def test_same_id_in_two_tables_is_two_uniques():
    v = torch.tensor([3, 3, 3, 1])
    off = torch.tensor([0, 2, 4])  # T=2, B=1
    u = jagged_unique(v, off, 2, 1)
    assert u.unique.tolist() == [3, 1, 3]
    assert u.table_offsets.tolist() == [0, 1, 3]
    assert u.counts.tolist() == [2, 1, 1]
    assert u.inverse.tolist() == [0, 0, 2, 1]
    assert u.sorted_positions.tolist() == [0, 1, 3, 2]


def test_empty():
    u = jagged_unique(torch.empty(0, dtype=torch.int64), torch.zeros(4, dtype=torch.int64), 3, 1)
    assert u.unique.numel() == 0 and u.table_offsets.tolist() == [0, 0, 0, 0]


def test_bad_offsets_length():
    with pytest.raises(ValueError, match="T\\*B\\+1"):
        jagged_unique(torch.tensor([1]), torch.tensor([0, 1]), 2, 1)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("offsets, match", [
    ([0, 2], "run from 0 to len\\(values\\) = 3000, got 0 .. 2"),  # ids left out: uninitialized outputs before
    ([1, 3000], "run from 0 to len\\(values\\) = 3000, got 1 .. 3000"),
    ([0, 3001], "got 0 .. 3001"),
])
def test_table_boundaries_that_leave_ids_out_are_refused(device, offsets, match):
    v = torch.arange(3000, device=device)
    with pytest.raises(ValueError, match=match):
        jagged_unique(v, torch.tensor(offsets, device=device), 1, 1)


@pytest.mark.parametrize("device", devices())
def test_decreasing_table_boundaries_are_refused(device):
    v = torch.arange(6, device=device)
    with pytest.raises(ValueError, match="table boundary 2 \\(1\\) are below those at boundary 1 \\(4\\)"):
        jagged_unique(v, torch.tensor([0, 4, 1, 6], device=device), 3, 1)  # T = 3, B = 1


@pytest.mark.gpu
def test_cuda_offsets_on_another_device_are_refused():
    with pytest.raises(ValueError, match="offsets is on cpu, expected cuda"):
        jagged_unique(torch.tensor([1, 2], device="cuda"), torch.tensor([0, 2]), 1, 1)


@pytest.mark.gpu
def test_cuda_big_batch_matches_cpu():
    """Millions of ids over tables of every size: the device sorts and scans against the CPU kernel."""
    gen = torch.Generator().manual_seed(0)
    T, B = 4, 65_536
    lengths = torch.randint(0, 20, (T * B,), generator=gen)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    values = torch.randint(0, 10**7, (int(offsets[-1]),), generator=gen)
    got = jagged_unique(values.cuda(), offsets.cuda(), T, B)
    ref = jagged_unique(values, offsets, T, B)
    for name, g, r in zip(got._fields, got, ref):
        assert torch.equal(g.cpu(), r), name
