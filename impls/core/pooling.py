"""Mean pooling on top of a sum-pooled lookup: a bag's mean is its sum divided by its length, and an empty bag
pools to zeros (``F.embedding_bag(mode="mean")``'s convention). The backward of the division divides the
incoming gradient the same way, so a system that runs its own backward uses the same ``bag_lengths``."""
from __future__ import annotations

import torch
from torch import Tensor


def bag_lengths(offsets: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """[B, 1] lengths of the bags of one table (offsets of length B + 1), an empty bag counted as 1."""
    return offsets.diff().clamp(min=1).to(dtype).unsqueeze(1)


def mean_pool(summed: Tensor, offsets: Tensor) -> Tensor:
    """[B, D] means from [B, D] bag sums (differentiable)."""
    return summed / bag_lengths(offsets, summed.dtype)
