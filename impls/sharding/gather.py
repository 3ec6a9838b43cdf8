"""A whole table assembled on every rank from the blocks the ranks hold (``gather_table`` of a collection whose
tables are cut over ranks): each rank names its blocks by their first row, row stride and first column, so
row-wise shards (every r-th row), contiguous row ranges and column slices are all one kind of block."""
from __future__ import annotations

from typing import NamedTuple, Sequence

import torch
from torch import Tensor

from impls.api import TableSpec
from impls.sharding.comm import Comm


class Block(NamedTuple):
    """Rows row0, row0 + step, ... and columns col0 .. col0 + width of a table, as a [rows, width] tensor."""

    row0: int
    step: int
    col0: int
    weight: Tensor


def assemble_table(comm: Comm, spec: TableSpec, mine: Sequence[Block]) -> Tensor:
    """The [num_embeddings, dim] table (on CPU) from every rank's blocks; a collective: every rank calls it,
    each with the blocks it holds (possibly none). Every entry of the table must be covered by some block."""
    mine = [Block(int(b.row0), int(b.step), int(b.col0), b.weight.detach().cpu().clone()) for b in mine]
    full = torch.empty(spec.num_embeddings, spec.dim)
    covered = torch.zeros(spec.num_embeddings, spec.dim, dtype=torch.bool)
    for b in (blk for part in comm.all_gather_object(mine) for blk in part):
        rows, width = b.weight.shape
        where = (slice(b.row0, b.row0 + b.step * (rows - 1) + 1, b.step), slice(b.col0, b.col0 + width))
        full[where] = b.weight
        covered[where] = True
    if not bool(covered.all()):
        raise ValueError(f"table {spec.name!r}: the ranks' blocks leave entries uncovered")
    return full
