"""THE interface: ``EmbeddingCollection``, the pooled-lookup module every implementation is, with its optimizer,
oracle (``materialize``) and reports, and ``ShardedCollection``, a system that shards itself over ranks. What a
sharding layer may use is declared here, so that it never reads a system's attributes: ``options_for_tables`` (a
collection over part of the tables), ``supports_external_update`` / ``external_update_options`` /
``gradient_tensors`` (gradients left for the caller to reduce before ``optimizer_step`` applies them),
``per_replica_state`` (options a replica cannot share), ``gather_table`` (a table assembled on every rank),
``build_distributed`` with the ``placement`` and ``plan_info`` a run record keeps. Each implementation declares the
options it takes (``option_keys``; ``dist_option_keys`` for what builds a sharded one): the harness checks a point's
options against them."""
from __future__ import annotations

import abc
from typing import Any, ClassVar, Mapping, Sequence

import torch
from torch import Tensor, nn

from impls import table_options
from impls.state import move_state
from impls.types import (EmbeddingOptim, GradientTensor, MemoryReport, SparseFeatures, TableSpec, WorkReport,
                         check_tables)

HARNESS_KEYS = frozenset({"device", "check_bounds", "seed"})  # set by the harness, never an option
BUILD_ARGS = frozenset({"tables", "optim", "ctx", "comm", "stats", "plan"})  # objects the harness passes


class EmbeddingCollection(nn.Module, abc.ABC):
    """Pooled lookups over several tables, with the embedding optimizer attached.

    ``forward`` returns [B, sum(dims)] in table order. Gradients flowing back into that output update
    the tables: implementations with a fused update apply it during backward (``optimizer_step`` is then
    a no-op), the others apply it in ``optimizer_step``.
    """

    name: ClassVar[str] = ""
    supports_dist: ClassVar[bool] = False
    # False: it applies its update inside backward and leaves no gradient (fbgemm's TBE, TorchRec's fused optimizer)
    supports_external_update: ClassVar[bool] = True
    per_replica_state: ClassVar[dict[str, str]] = {}  # option -> what state a replica would hold on its own
    comm_counted: ClassVar[bool] = True  # its collectives go through impls/sharding/comm.py (bytes and blocked time)
    distributed_only: ClassVar[bool] = False  # needs a DistContext (EMBark's clusters, TorchRec's DMP)
    # how the system shards over several ranks unless told otherwise (impls/sharding/build.py)
    dist_defaults: ClassVar[dict[str, Any]] = {"sharding": "table-wise", "placement": "sequential", "pipeline": "none"}
    # the options it takes on one device; a ShardedCollection also declares what its build_distributed takes
    option_keys: ClassVar[frozenset[str]] = frozenset()
    dist_option_keys: ClassVar[frozenset[str]] = frozenset()

    def __init__(
        self,
        tables: Sequence[TableSpec],
        optim: EmbeddingOptim,
        ctx: Any | None = None,
        *,
        check_bounds: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.tables = check_tables(tables)
        if not isinstance(optim, EmbeddingOptim):
            raise TypeError(f"optim must be an EmbeddingOptim, got {type(optim).__name__}")
        if ctx is not None and not self.supports_dist:
            raise NotImplementedError(f"{self.name} has no distributed mode yet")
        self.optim = optim
        self.ctx = ctx
        self.check_bounds = check_bounds
        self.seed = seed
        self._work = WorkReport()

    @classmethod
    def option_names(cls) -> frozenset[str]:
        """The options this system takes on one device (``-o KEY=VALUE``, ``[impl_options]``): what it declares in
        ``option_keys``. The harness sets ``device``, ``check_bounds`` and ``seed`` itself and passes the BUILD_ARGS
        objects; tests/impls/test_declared_options.py holds each declaration to the constructor."""
        return frozenset(cls.option_keys)

    @classmethod
    def table_param_bytes(cls, tables: Sequence[TableSpec], options: dict[str, Any]) -> list[int]:
        """Parameter bytes each table will hold under ``options``, computed before anything is allocated (a
        sharding planner's sizes). Uncompressed fp32 unless a system stores tables another way."""
        return [t.dense_bytes for t in tables]

    @classmethod
    def options_for_tables(cls, options: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
        """``options`` for a collection of this system over only the tables ``names`` (per-table mappings cut
        down; a system with other table-naming options restricts those too)."""
        return table_options.restrict(options, names)

    @classmethod
    def external_update_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """``options`` under which a collection leaves every gradient of a backward in ``.grad`` of its
        ``gradient_tensors`` and applies them only in ``optimizer_step`` (same numbers as its own schedule), so
        that a caller can sum them over replicas or run several backward passes first."""
        if not cls.supports_external_update:
            raise ValueError(f"{cls.name} updates its tables inside backward and leaves no gradients to reduce; "
                             f"shard it table-wise")
        return dict(options)

    def gradient_tensors(self) -> list[GradientTensor]:
        """Every trainable tensor an external update reads, in a fixed order: by default each parameter is a
        table updated by rows."""
        return [GradientTensor(p, True) for p in self.parameters()]

    @property
    def output_dim(self) -> int:
        return sum(t.dim for t in self.tables)

    def table_index(self, table: str) -> int:
        for i, t in enumerate(self.tables):
            if t.name == table:
                return i
        raise KeyError(f"no table named {table!r}; tables: {[t.name for t in self.tables]}")

    def checked(self, features: SparseFeatures) -> SparseFeatures:
        """Validate the batch against this collection's tables: every id (check_bounds, the default), else
        only the layout (offsets), so a malformed batch never reaches a table in either mode. Under torch.export or
        torch.compile with check_bounds=False only what the graph knows without reading a value (shapes, dtypes):
        the graph reads nothing back to the host."""
        if not isinstance(features, SparseFeatures):
            raise TypeError(f"expected SparseFeatures, got {type(features).__name__}")
        if self.check_bounds:
            if torch.compiler.is_exporting():
                raise ValueError(f"{self.name}: check_bounds=True reads every id on the host, which an exported graph "
                                 f"cannot; export a module built with check_bounds=False (and check ids before)")
            return features.validate(self.tables)
        if torch.compiler.is_compiling():  # a traced graph (export, compile) reads no id or offset on the host
            return features.check_shapes(self.tables)
        return features.check_layout(self.tables)

    @abc.abstractmethod
    def forward(self, features: SparseFeatures) -> Tensor: ...

    def optimizer_step(self) -> None:
        """Apply the embedding update of the last backward (no-op when fused into backward)."""

    def prefetch(self, features: SparseFeatures) -> None:
        """A hint, given at the start of a step: ``features`` is the batch after the current one. A system with
        a load pipeline (EL-Rec's host tables) starts gathering its rows now; the default ignores it."""

    @abc.abstractmethod
    def materialize(self, table: str) -> Tensor:
        """The dense [num_embeddings, dim] table this collection represents (a test oracle)."""

    def gather_table(self, table: str) -> Tensor:
        """The whole dense table on every rank. A collective where the table is spread over ranks (every rank
        calls it); ``materialize`` where one collection holds it."""
        return self.materialize(table)

    def table_parameters(self, table: str) -> list[Tensor]:
        """The trainable tensors behind one table (the dense table itself unless overridden)."""
        return [self.materialize(table)]

    def materialize_from(self, table: str, params: Sequence[Tensor]) -> Tensor:
        """The dense table as a differentiable function of ``table_parameters`` (a test oracle)."""
        return params[0]

    @abc.abstractmethod
    def memory_report(self) -> MemoryReport: ...

    def work_report(self) -> WorkReport:
        return self._work

    def optimizer_state(self) -> dict[nn.Parameter, dict[str, Tensor]]:
        """The embedding update's state per parameter (the tensors themselves, e.g. Adagrad's ``{"sum": ...}``;
        nothing under SGD): what a KeyedOptimizer view of the update exposes (impls/ebc). Empty by default."""
        return {}

    def kept_dense(self) -> dict[str, str]:
        """The tables a compressing system keeps as plain tables, each with why (none by default)."""
        return {}

    def _apply(self, fn: Any, recurse: bool = True) -> "EmbeddingCollection":
        """nn.Module's ``_apply`` (``.to``, ``.double``, ``.cuda``), and the same ``fn`` over the state a system holds
        outside its parameters and buffers (gradient buffers, optimizer state, index tables: impls/state.py's
        move_state), so that moving a collection moves all of it."""
        super()._apply(fn, recurse)
        move_state(self, fn, EmbeddingCollection)
        return self


class ShardedCollection(EmbeddingCollection):
    """A collection spread over ranks: each rank holds a part of the tables and ``forward`` returns its local
    batch's rows of all of them. A system that shards itself (EMBark, TorchRec) subclasses this and is built by
    ``build_distributed``; the others are wrapped by impls/sharding (table-wise, data-parallel)."""

    supports_dist: ClassVar[bool] = True
    distributed_only: ClassVar[bool] = True

    @classmethod
    def build_distributed(cls, tables: Sequence[TableSpec], optim: EmbeddingOptim, ctx: Any, comm: Any, *,
                          stats: SparseFeatures | None = None, **options: Any) -> "ShardedCollection":
        """Build over the ranks of ``ctx``, talking through ``comm``; ``stats``: a sampled global batch on rank 0
        (a planner's statistics). By default the constructor takes the options as they are."""
        return cls(tables, optim, ctx, comm=comm, **options)

    def placement(self) -> dict[str, Any] | None:
        """Where each table lives (table names per rank), for the run record; None when not described."""
        return None

    def plan_info(self) -> dict[str, Any] | None:
        """The sharding plan's summary (strategy, cluster counts, predicted cost), for the run record."""
        return None
