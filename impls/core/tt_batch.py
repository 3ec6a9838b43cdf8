"""Per-batch index structures the TT schedules build from one table's jagged lookups: the bag of
each occurrence, the sorted unique ids with their inverse and counts (native jagged_unique), and the
prefix groups of sorted ids. Plain torch over the native ops; shared by every TT system."""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from impls.core import ops


def bag_ids(offsets: Tensor, nnz: int) -> Tensor:
    """Occurrence -> bag index, for offsets [B+1] over nnz ids."""
    lengths = offsets[1:] - offsets[:-1]
    return torch.repeat_interleave(torch.arange(lengths.numel(), device=offsets.device), lengths, output_size=nnz)


class Dedup(NamedTuple):
    unique: Tensor  # [U] sorted ascending
    inverse: Tensor  # [nnz] values[i] == unique[inverse[i]]
    counts: Tensor  # [U]
    sorted_positions: Tensor  # [nnz] occurrences in (id, position) order
    count_offsets: Tensor  # [U+1] occurrences of unique u are sorted_positions[co[u]:co[u+1]]


def dedup(values: Tensor, offsets: Tensor, batch_size: int) -> Dedup:
    u = ops.jagged_unique(values, offsets, 1, batch_size)
    co = torch.zeros(u.counts.numel() + 1, dtype=torch.int64, device=values.device)
    torch.cumsum(u.counts, 0, out=co[1:])
    return Dedup(u.unique, u.inverse, u.counts, u.sorted_positions, co)


class Groups(NamedTuple):
    prefix_ids: Tensor  # [E1] distinct prefix ids (id div p_last), ascending
    group_of: Tensor  # [n] group of each sorted id (non-decreasing)


def prefix_groups(sorted_ids: Tensor, last_radix: int) -> Groups:
    """Distinct prefixes of ascending ids: a prefix group is a contiguous run of them."""
    prefix = torch.div(sorted_ids, last_radix, rounding_mode="floor")
    ids, group_of = torch.unique_consecutive(prefix, return_inverse=True)
    return Groups(ids, group_of)


def bag_ranges(offsets: Tensor, spans: list[tuple[int, int]]) -> list[tuple[int, int, Tensor]]:
    """For each span [start, end) of occurrences: the bags [b0, b1) holding it and their offsets clipped and
    rebased to start. One host read for all the spans (a device sync on a GPU)."""
    if not spans:
        return []
    starts, ends = (torch.tensor(x, dtype=torch.int64, device=offsets.device) for x in zip(*spans))
    b0s, b1s = torch.stack([torch.searchsorted(offsets[1:], starts, right=True),
                            torch.searchsorted(offsets[:-1], ends, right=False)]).tolist()
    return [(b0, b1, offsets[b0 : b1 + 1].clamp(start, end) - start)
            for (start, end), b0, b1 in zip(spans, b0s, b1s)]


class Workspace:
    """Named float32 buffers a schedule reuses across chunks and steps (grown, never shrunk), as the GPU
    systems reuse preallocated or cached buffers; on the CPU it also spares re-faulting fresh pages."""

    def __init__(self) -> None:
        self._bufs: dict[str, Tensor] = {}

    def get(self, name: str, rows: int, cols: int, device: torch.device) -> Tensor:
        need = rows * cols
        buf = self._bufs.get(name)
        if buf is None or buf.numel() < need or buf.device != device:
            buf = torch.empty(max(need, 1), device=device)
            self._bufs[name] = buf
        return buf[:need].view(rows, cols)


def redundancy(values: Tensor, offsets: Tensor, batch_size: int, last_radix: int) -> tuple[int, int, int]:
    """(nnz, U, E1) of one table's batch: lookups, distinct ids, distinct prefix groups (id div p_last)."""
    if values.numel() == 0:
        return 0, 0, 0
    dd = dedup(values, offsets, batch_size)
    return values.numel(), dd.unique.numel(), prefix_groups(dd.unique, last_radix).prefix_ids.numel()
