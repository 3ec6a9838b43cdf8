import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.api import SparseFeatures, TableSpec
from impls.core.ops import bounds_check_raw, format_bounds_problem
from impls.core.reference import bounds_check_ref
from tests.conftest import devices


@st.composite
def maybe_bad_batches(draw):
    """Jagged batches with ids and offsets that may be out of range, negative or non-monotone."""
    T = draw(st.integers(1, 4))
    B = draw(st.integers(1, 5))
    rows = draw(st.lists(st.integers(1, 20), min_size=T, max_size=T))
    lengths = draw(st.lists(st.integers(0, 4), min_size=T * B, max_size=T * B))
    offsets = [0]
    for n in lengths:
        offsets.append(offsets[-1] + n)
    nnz = offsets[-1]
    values = draw(st.lists(st.integers(-3, 25), min_size=nnz, max_size=nnz))
    if draw(st.booleans()) and len(offsets) > 2:  # corrupt one offset
        i = draw(st.integers(0, len(offsets) - 1))
        offsets[i] = draw(st.integers(-2, nnz + 2))
    return (torch.tensor(values, dtype=torch.int64), torch.tensor(offsets, dtype=torch.int64),
            torch.tensor(rows, dtype=torch.int64), B)


@pytest.mark.parametrize("device", devices())
@settings(max_examples=300, deadline=None)
@given(batch=maybe_bad_batches())
def test_matches_reference(device, batch):
    values, offsets, rows, B = batch
    got = bounds_check_raw(values.to(device), offsets.to(device), rows.to(device), B).cpu()
    assert got.tolist() == bounds_check_ref(values, offsets, rows, B).tolist()


def test_messages_name_table_bag_and_id():
    tables = [TableSpec("users", 10, 4), TableSpec("items", 5, 4)]
    B = 2
    # table 1 ("items"), bag 1 holds id 7 >= 5
    sf = SparseFeatures(torch.tensor([1, 2, 3, 4, 7]), torch.tensor([0, 1, 2, 3, 5]), B)
    with pytest.raises(ValueError, match=r"id out of range: table 'items' \(index 1\), bag 1, id 7 at values\[4\]"):
        sf.validate(tables)
    sf = SparseFeatures(torch.tensor([1, -2, 3, 4, 0]), torch.tensor([0, 1, 2, 3, 5]), B)
    with pytest.raises(ValueError, match=r"negative id: table 'users' \(index 0\), bag 1, id -2"):
        sf.validate(tables)
    sf = SparseFeatures(torch.tensor([1, 2, 3, 4, 0]), torch.tensor([0, 2, 1, 3, 5]), B)
    with pytest.raises(ValueError, match=r"offsets decrease: table 'users' \(index 0\), bag 1, offsets\[2\] = 1"):
        sf.validate(tables)
    sf = SparseFeatures(torch.tensor([1, 2, 3, 4, 0]), torch.tensor([0, 2, 2, 3, 4]), B)
    with pytest.raises(ValueError, match=r"last offset must equal the number of ids"):
        sf.validate(tables)
    sf = SparseFeatures(torch.tensor([1, 2, 3, 4, 0]), torch.tensor([1, 2, 2, 3, 5]), B)
    with pytest.raises(ValueError, match=r"offsets\[0\] must be 0"):
        sf.validate(tables)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("values, offsets, expected", [
    ([], [0], [0, -1, -1, -1, 0]),  # no tables, no ids: valid
    ([1, 2], [0], [3, -1, -1, 0, 0]),  # ids but no bag holds them
    ([], [2], [1, -1, -1, 0, 2]),  # offsets[0] != 0, and no table to name
])
def test_no_tables(device, values, offsets, expected):
    args = (torch.tensor(values, dtype=torch.int64), torch.tensor(offsets), torch.zeros(0, dtype=torch.int64), 3)
    assert bounds_check_ref(*args).tolist() == expected
    on_device = [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]
    assert bounds_check_raw(*on_device).cpu().tolist() == expected
    if expected[0]:  # the message names the batch, not a table that does not exist
        assert "the batch" in format_bounds_problem(expected, [])


@pytest.mark.gpu
def test_cuda_inputs_on_two_devices_are_refused():
    with pytest.raises(ValueError, match="must be on one device"):
        bounds_check_raw(torch.tensor([1], device="cuda"), torch.tensor([0, 1]), torch.tensor([5], device="cuda"), 1)
    with pytest.raises(ValueError, match="must be on one device"):
        bounds_check_raw(torch.tensor([1], device="cuda"), torch.tensor([0, 1], device="cuda"), torch.tensor([5]), 1)


def test_shape_and_dtype_errors():
    tables = [TableSpec("a", 10, 4)]
    with pytest.raises(ValueError, match=r"T\*B\+1 = 3"):
        SparseFeatures(torch.tensor([1]), torch.tensor([0, 1]), 2).validate(tables)
    with pytest.raises(ValueError, match="int64"):
        SparseFeatures(torch.tensor([1], dtype=torch.int32), torch.tensor([0, 1, 1]), 2).validate(tables)
    with pytest.raises(ValueError, match="batch_size must be > 0"):
        SparseFeatures(torch.tensor([1]), torch.tensor([0, 1]), 0).validate(tables)


def test_format_valid_ids_range():
    tables = [TableSpec("a", 10, 4)]
    assert "valid ids are 0..9" in format_bounds_problem([5, 0, 3, 7, 12], tables)


def test_fake_kernel_shape():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        out = torch.ops.dlrmbench.bounds_check(torch.empty(5, dtype=torch.int64), torch.empty(3, dtype=torch.int64),
                                               torch.empty(1, dtype=torch.int64), 2)
    assert out.shape == (5,) and out.dtype == torch.int64
