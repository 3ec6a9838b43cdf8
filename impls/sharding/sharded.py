"""What the sharding wrappers (table-wise, data-parallel) share: the system's class and options for the local
collections they build, the accounted communicator, and the start-of-step mark that the work report's byte counts
are taken from. A wrapper knows a system only through the interface (impls/api.py)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch

from impls.api import EmbeddingCollection, EmbeddingOptim, ShardedCollection, TableSpec
from impls.sharding.comm import Comm
from impls.sharding.context import DistContext


class WrappedCollection(ShardedCollection):
    """A system built on one device per rank (``local_cls``), spread over ranks by the subclass."""

    def __init__(
        self,
        tables: Sequence[TableSpec],
        optim: EmbeddingOptim,
        ctx: DistContext,
        *,
        local_cls: type[EmbeddingCollection],
        local_options: Mapping[str, Any] | None = None,
        comm: Comm | None = None,
        device: str | torch.device = "cpu",
        check_bounds: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__(tables, optim, ctx, check_bounds=check_bounds, seed=seed)
        self.name = local_cls.name
        self.local_cls = local_cls
        self.local_options = dict(local_options or {})
        self.comm = comm or Comm(ctx)
        self.device = torch.device(device)
        self._comm_mark: dict = {}

    def build_local(self, tables: Sequence[TableSpec], **options: Any) -> EmbeddingCollection:
        """One single-device collection of the system over ``tables`` (bounds are checked once, here)."""
        return self.local_cls(tables, self.optim, None, device=self.device, check_bounds=False, seed=self.seed,
                              **options)

    def mark_step(self) -> None:
        """The step begins: the work report counts the bytes sent from now on."""
        self._comm_mark = dict(self.comm.sent)
