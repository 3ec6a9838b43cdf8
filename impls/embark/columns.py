"""A set of a [b, D] output's columns moved as rows: EMBark's sources add the owners' answer blocks into their
output columns and take the gradient's columns back out. The columns are a union of blocks ``unit`` wide and
aligned to it (unit = gcd of the table widths and shard widths), so the output viewed as [b * D / unit, unit]
rows takes a [b, W] block as b * W / unit rows: one scatter_add_rows to add, one row gather to take - on CPU
2-3x faster than index_add_ / index_select along dimension 1, which walk the columns one by one."""
from __future__ import annotations

import torch
from torch import Tensor

from impls.core import ops


class Columns:
    def __init__(self, cols: Tensor, dim: int, unit: int) -> None:
        """``cols``: the output columns in block order ([W], unit-aligned runs), ``dim``: the output's width D."""
        if cols.numel() % unit or dim % unit:
            raise ValueError(f"columns must come in blocks of {unit}; got {cols.numel()} columns of a {dim}-wide output")
        units = cols.view(-1, unit)
        aligned = units[:, :1] // unit * unit + torch.arange(unit, device=cols.device)  # the aligned run of each start
        if not torch.equal(units, aligned.expand_as(units)):
            raise ValueError(f"columns must come in aligned runs of {unit}")
        self.cols, self.width, self.dim, self.unit = cols, cols.numel(), dim, unit
        self._units = units[:, 0] // unit
        self._rows: dict[int, tuple[Tensor, Tensor]] = {}

    def _index(self, b: int) -> tuple[Tensor, Tensor]:
        """(out row of each block row, 0..n-1) for batch b, cached."""
        if b not in self._rows:
            dev = self._units.device
            rows = (torch.arange(b, device=dev).unsqueeze(1) * (self.dim // self.unit) + self._units).reshape(-1)
            self._rows[b] = (rows, torch.arange(rows.numel(), device=dev))
        return self._rows[b]

    def add_into(self, out: Tensor, block: Tensor) -> None:
        """out[:, cols] += block (out [b, D], block [b, W]; float32)."""
        if self.width == 0:
            return
        rows, iota = self._index(out.shape[0])
        ops.scatter_add_rows(block.contiguous().view(-1, self.unit), iota, rows, out.view(-1, self.unit),
                             check_indices=False)

    def take(self, grad: Tensor) -> Tensor:
        """grad[:, cols] as a contiguous [b, W] block."""
        b = grad.shape[0]
        if self.width == 0:
            return grad.new_zeros(b, 0)
        return grad.contiguous().view(-1, self.unit).index_select(0, self._index(b)[0]).view(b, self.width)
