"""Fault suite, the batch type: a numpy array or a list instead of a tensor, or a fractional batch size, is a clear
error at construction, not a misleading dtype message or an AttributeError later."""
import numpy as np
import pytest
import torch

from impls.api import SparseFeatures


def test_non_tensors_and_fractional_batches_are_refused():
    off = torch.tensor([0, 1, 2])
    with pytest.raises(TypeError, match="values must be a torch.Tensor .*got ndarray.*torch.as_tensor"):
        SparseFeatures(np.array([0, 1], dtype=np.int64), off, 2)
    with pytest.raises(TypeError, match="offsets must be a torch.Tensor .*got list"):
        SparseFeatures(torch.tensor([0, 1]), [0, 1, 2], 2)
    with pytest.raises(ValueError, match="batch_size must be a whole number, got 2.7"):
        SparseFeatures(torch.tensor([0, 1]), off, 2.7)
    assert SparseFeatures(torch.tensor([0, 1]), off, 2.0).batch_size == 2
    assert SparseFeatures(torch.tensor([0, 1]), off, np.int64(2)).batch_size == 2


def test_unchecked_fast_paths_never_touch_the_callers_tensors():
    """check_bounds=False: an out-of-range id is dense-fbgemm's row 0 (fbgemm's clamp, on a copy), an error in
    dense-torch and in the TT systems' native ops; the caller's values and offsets stay as they were."""
    from impls.api import EmbeddingOptim, TableSpec, get_impl, registered_names

    tables = [TableSpec("a", 100, 8), TableSpec("b", 50, 8)]
    for name in ("dense-torch", "dense-fbgemm", "ttrec", "elrec", "ecorec"):
        if name not in registered_names():
            continue
        try:
            cls = get_impl(name)
        except ImportError:
            continue
        emb = cls(tables, EmbeddingOptim("sgd", lr=0.1), check_bounds=False,
                  **({"ranks": 4} if name in ("ttrec", "elrec", "ecorec") else {}))
        values, offsets = torch.tensor([1, 500, 3, 4]), torch.tensor([0, 2, 3, 3, 4])
        kept = values.clone(), offsets.clone()
        try:
            out = emb(SparseFeatures(values, offsets, 2))
            assert name == "dense-fbgemm" and out.shape == (2, 16)
            good = emb(SparseFeatures(torch.tensor([1, 0, 3, 4]), offsets.clone(), 2))
            assert torch.equal(out, good)  # id 500 read as row 0
        except (RuntimeError, ValueError) as exc:
            assert name != "dense-fbgemm", exc
            assert "500" in str(exc) or "outside" in str(exc)
        assert torch.equal(values, kept[0]) and torch.equal(offsets, kept[1]), name


@pytest.mark.parametrize("offsets,message", [
    ([0, 3, 2, 6, 8], r"offsets decrease: table 'a' \(index 0\), bag 1, offsets\[2\] = 2"),
    ([0, 2, 4, 7, 6], r"offsets decrease: table 'b' \(index 1\), bag 1, offsets\[4\] = 6"),
    ([1, 2, 4, 6, 8], r"offsets\[0\] must be 0"),
    ([0, 2, 4, 6, 7], r"the last offset must equal the number of ids: table 'b' \(index 1\), bag 1"),
    ([0, 2, 9, 6, 8], r"offsets decrease: table 'b' \(index 1\), bag 0"),
])
def test_unchecked_paths_refuse_a_malformed_layout_before_any_table_moves(offsets, message):
    """check_bounds=False skips the per-id check only: offsets that start off 0, decrease or miss the end are
    refused, naming table, bag and offset, before any system updates a table (ttrec used to update table b in
    the backward and then fail on table a)."""
    from impls.api import EmbeddingOptim, TableSpec, get_impl

    tables = [TableSpec("a", 1000, 8), TableSpec("b", 1000, 8)]
    for name in ("dense-torch", "dense-fbgemm", "ttrec", "elrec", "ecorec"):
        try:
            cls = get_impl(name)
        except ImportError:
            continue
        emb = cls(tables, EmbeddingOptim("sgd", lr=0.1), check_bounds=False, seed=1)
        before = [emb.materialize(t.name).clone() for t in tables]
        with pytest.raises(ValueError, match=message):
            out = emb(SparseFeatures(torch.arange(1, 9), torch.tensor(offsets), 2))
            out.sum().backward()
            emb.optimizer_step()
        for t, w in zip(tables, before):
            assert torch.equal(emb.materialize(t.name), w), f"{name} moved table {t.name}"


@pytest.mark.parametrize("name", ["ttrec", "elrec", "ecorec"])
def test_an_id_in_the_tt_shapes_padding_is_refused_unchecked_too(name):
    """A TT table of 113 rows has cores covering 4 * 5 * 6 = 120: ids 113..119 read padding rows. With
    check_bounds=False the TT systems' native ops still refuse them, naming the row (not only ids >= 120)."""
    from impls.api import EmbeddingOptim, TableSpec, get_impl

    emb = get_impl(name)([TableSpec("a", 113, 8)], EmbeddingOptim("sgd", lr=0.1), check_bounds=False, seed=0,
                         ranks=4, tt_min_rows=1)
    offsets = torch.tensor([0, 2, 3])
    emb(SparseFeatures(torch.tensor([1, 112, 3]), offsets, 2))  # the last row is a row
    for bad in (113, 119):
        with pytest.raises(ValueError, match=rf"reads row {bad} .*of a table of 113 rows"):
            emb(SparseFeatures(torch.tensor([1, bad, 3]), offsets.clone(), 2))
