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
