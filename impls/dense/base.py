"""What the dense baselines share: the constructor, and memory that is the full fp32 tables (plus
Adagrad state of the same size) and the intermediates of the last step."""
from __future__ import annotations

import abc
from typing import Any, Sequence

import torch

from impls.api import EmbeddingCollection, EmbeddingOptim, MemoryReport, TableSpec


class DenseCollection(EmbeddingCollection):
    def __init__(
        self,
        tables: Sequence[TableSpec],
        optim: EmbeddingOptim,
        ctx: Any | None = None,
        *,
        device: str | torch.device = "cpu",
        check_bounds: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__(tables, optim, ctx, check_bounds=check_bounds, seed=seed)
        self._last_intermediates = 0
        self.build(torch.device(device))

    @abc.abstractmethod
    def build(self, device: torch.device) -> None:
        """Allocate and initialize the tables (dense_table_init) and the optimizer on ``device``."""

    def memory_report(self) -> MemoryReport:
        params = sum(t.dense_bytes for t in self.tables)
        return MemoryReport(
            params=params,
            optimizer_state=params if self.optim.kind == "adagrad" else 0,
            peak_intermediates=self._last_intermediates,
        )
