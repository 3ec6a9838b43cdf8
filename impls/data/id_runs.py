"""Index arithmetic of runs laid end to end: the bags of a multi-hot layout (values.bin) are runs of ids."""
from __future__ import annotations

import numpy as np


def run_index(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[k] .. starts[k] + lengths[k] - 1`` of every run k, concatenated in run order (gathering
    with them copies the runs into one buffer)."""
    starts, lengths = np.asarray(starts, dtype=np.int64), np.asarray(lengths, dtype=np.int64)
    return np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))


def run_values(lengths: np.ndarray, values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The values of bags ``rows`` (in that order) of ``values`` laid out bag after bag with sizes ``lengths``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    return values[run_index((np.cumsum(lengths) - lengths)[rows], lengths[rows])]
