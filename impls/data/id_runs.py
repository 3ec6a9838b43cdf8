"""Index arithmetic of runs laid end to end: the bags of a multi-hot layout (values.bin) are runs of ids."""
from __future__ import annotations

import numpy as np


def run_index(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[k] .. starts[k] + lengths[k] - 1`` of every run k, concatenated in run order (gathering
    with them copies the runs into one buffer)."""
    starts, lengths = np.asarray(starts, dtype=np.int64), np.asarray(lengths, dtype=np.int64)
    return np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))
