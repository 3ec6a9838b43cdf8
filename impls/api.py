"""The one interface every embedding implementation in dlrmbench implements.

TableSpec describes a table, SparseFeatures a batch of jagged lookups in the table-major fbgemm TBE
layout, EmbeddingOptim the embedding optimizer, and EmbeddingCollection the pooled-lookup module
with its optimizer, oracle (``materialize``) and reports. Implementations register under a name;
``get_impl(name)`` imports them lazily so an optional dependency (fbgemm, torchrec) only matters to
the implementation that needs it.

What a sharding layer may use is declared here too, so that it never reads a system's attributes:
``options_for_tables`` (a collection over part of the tables), ``supports_external_update`` /
``external_update_options`` / ``gradient_tensors`` (gradients left for the caller to reduce before
``optimizer_step`` applies them), ``per_replica_state`` (options a replica cannot share), ``gather_table``
(a table assembled on every rank), and ``ShardedCollection``: a system that shards itself over ranks
(``build_distributed``), with the ``placement`` and ``plan_info`` a run record keeps.
"""
from __future__ import annotations

import abc
import dataclasses
import importlib
import inspect
import zlib
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, NamedTuple, Sequence

import torch
from torch import Tensor, nn

from impls import table_options
from impls.core.ops import bounds_check

POOLINGS = ("sum", "mean")


@dataclass(frozen=True)
class TableSpec:
    """One embedding table."""

    name: str
    num_embeddings: int  # rows
    dim: int
    pooling: str = "sum"  # "sum" | "mean"
    hotness: float = 1.0  # mean lookups per sample (a statistic for planners and generators)

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("TableSpec.name must be a non-empty string")
        if int(self.num_embeddings) <= 0:
            raise ValueError(f"table {self.name!r}: num_embeddings must be > 0, got {self.num_embeddings}")
        if int(self.dim) <= 0:
            raise ValueError(f"table {self.name!r}: dim must be > 0, got {self.dim}")
        if self.pooling not in POOLINGS:
            raise ValueError(f"table {self.name!r}: pooling must be one of {POOLINGS}, got {self.pooling!r}")
        if not self.hotness > 0:
            raise ValueError(f"table {self.name!r}: hotness must be > 0, got {self.hotness}")

    @property
    def dense_bytes(self) -> int:
        """fp32 bytes of the uncompressed table."""
        return self.num_embeddings * self.dim * 4


def table_seed(seed: int, table: str) -> int:
    """The initialization seed of one table: a function of the run seed and the table's name only, so a
    table starts from the same weights whichever collection, shard or rank holds it."""
    return (seed * 1_000_003 + zlib.crc32(table.encode())) % (1 << 62)


def column_offsets(tables: Sequence[TableSpec]) -> list[int]:
    """The first output column of each table in a collection's [B, sum(dims)] output (tables side by side)."""
    out, at = [], 0
    for t in tables:
        out.append(at)
        at += t.dim
    return out


def check_tables(tables: Sequence[TableSpec]) -> tuple[TableSpec, ...]:
    """Validate a table list: non-empty, TableSpec instances, unique names."""
    tables = tuple(tables)
    if not tables:
        raise ValueError("at least one table is required")
    for t in tables:
        if not isinstance(t, TableSpec):
            raise TypeError(f"expected TableSpec, got {type(t).__name__}")
    names = [t.name for t in tables]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"duplicate table names: {dup}")
    return tables


class SparseFeatures:
    """A batch of jagged lookups, table-major (the fbgemm TBE / Meta-trace layout).

    ``values`` holds int64 row ids; bag (t, b) is ``values[offsets[t*B+b] : offsets[t*B+b+1]]``.
    """

    __slots__ = ("values", "offsets", "batch_size")

    def __init__(self, values: Tensor, offsets: Tensor, batch_size: int) -> None:
        for name, t in (("values", values), ("offsets", offsets)):
            if not isinstance(t, Tensor):
                raise TypeError(f"SparseFeatures.{name} must be a torch.Tensor (int64), got {type(t).__name__}; "
                                f"convert with torch.as_tensor(x, dtype=torch.int64)")
        if isinstance(batch_size, bool) or int(batch_size) != batch_size:
            raise ValueError(f"batch_size must be a whole number, got {batch_size!r}")
        self.values = values
        self.offsets = offsets
        self.batch_size = int(batch_size)

    @property
    def num_tables(self) -> int:
        if self.batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {self.batch_size}")
        return (self.offsets.numel() - 1) // self.batch_size

    @property
    def nnz(self) -> int:
        return self.values.numel()

    @property
    def device(self) -> torch.device:
        return self.values.device

    def __repr__(self) -> str:
        return f"SparseFeatures(T={self.num_tables}, B={self.batch_size}, nnz={self.nnz}, device={self.device})"

    def _check_shapes(self, tables: Sequence[TableSpec]) -> None:
        if self.batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {self.batch_size}")
        for name, t in (("values", self.values), ("offsets", self.offsets)):
            if t.dtype != torch.int64:
                raise ValueError(f"SparseFeatures.{name} must be int64, got {t.dtype}")
            if t.dim() != 1:
                raise ValueError(f"SparseFeatures.{name} must be 1-D, got shape {tuple(t.shape)}")
        expected = len(tables) * self.batch_size + 1
        if self.offsets.numel() != expected:
            raise ValueError(
                f"offsets has {self.offsets.numel()} entries; {len(tables)} tables x batch {self.batch_size} "
                f"needs T*B+1 = {expected}"
            )
        if self.values.device != self.offsets.device:
            raise ValueError(f"values on {self.values.device} but offsets on {self.offsets.device}")

    def validate(self, tables: Sequence[TableSpec]) -> "SparseFeatures":
        """Raise ValueError naming the table, bag and id of the first bad entry; return self when valid."""
        self._check_shapes(tables)
        bounds_check(self.values, self.offsets, tables, self.batch_size)
        return self

    def check_layout(self, tables: Sequence[TableSpec]) -> "SparseFeatures":
        """The batch's layout without reading its ids: shapes and dtypes, and T*B+1 offsets that run from 0 to
        the number of ids and never decrease. O(T*B) and one device sync; what ``check_bounds=False`` still
        checks, so a malformed batch is refused (naming table, bag and offset) before any table moves."""
        self._check_shapes(tables)
        o = self.offsets
        if bool((o[0] != 0) | (o[-1] != self.nnz) | (o[1:] < o[:-1]).any()):
            bounds_check(self.values, self.offsets, tables, self.batch_size)  # offsets are checked first
            raise AssertionError("bounds_check passed offsets that check_layout refused")  # never reached
        return self

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "SparseFeatures":
        return SparseFeatures(
            self.values.to(device, non_blocking=non_blocking),
            self.offsets.to(device, non_blocking=non_blocking),
            self.batch_size,
        )

    def table(self, t: int) -> tuple[Tensor, Tensor]:
        """(values, offsets) of table t alone, offsets rebased to start at 0 (length B+1)."""
        B = self.batch_size
        off = self.offsets[t * B : (t + 1) * B + 1]
        start, end = int(off[0]), int(off[-1])
        return self.values[start:end], off - start

    def tables(self) -> list[tuple[Tensor, Tensor]]:
        """``table(t)`` of every table, with one host read of the table boundaries (one device sync on a GPU
        instead of two per table)."""
        B = self.batch_size
        bounds = self.offsets[:: B].tolist()  # offsets[t * B], t = 0..T
        return [(self.values[bounds[t] : bounds[t + 1]], self.offsets[t * B : (t + 1) * B + 1] - bounds[t])
                for t in range(len(bounds) - 1)]

    def select_tables(self, idx: Sequence[int]) -> "SparseFeatures":
        """A batch holding only the given tables, in the given order."""
        vals, offs, base = [], [], 0
        for t in idx:
            v, o = self.table(t)
            vals.append(v)
            offs.append(o[:-1] + base)
            base += v.numel()
        offs.append(torch.tensor([base], dtype=torch.int64, device=self.offsets.device))
        values = torch.cat(vals) if vals else self.values[:0]
        return SparseFeatures(values, torch.cat(offs), self.batch_size)

    def split_batch(self, n: int) -> list["SparseFeatures"]:
        """Cut the batch into n contiguous sample ranges (rank slices); sizes differ by at most one."""
        if not 1 <= n <= self.batch_size:
            raise ValueError(f"cannot split a batch of {self.batch_size} into {n} parts")
        T, B = self.num_tables, self.batch_size
        bounds = [B * i // n for i in range(n + 1)]
        out = []
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            vals, offs, base = [], [], 0
            for t in range(T):
                o = self.offsets[t * B + lo : t * B + hi + 1]
                vals.append(self.values[int(o[0]) : int(o[-1])])
                offs.append(o[:-1] - o[0] + base)
                base += int(o[-1] - o[0])
            offs.append(torch.tensor([base], dtype=torch.int64, device=self.offsets.device))
            out.append(SparseFeatures(torch.cat(vals), torch.cat(offs), hi - lo))
        return out


@dataclass(frozen=True)
class EmbeddingOptim:
    """The embedding optimizer: plain SGD or exact (per-element, duplicate-aggregated) Adagrad."""

    kind: str = "sgd"  # "sgd" | "adagrad"
    lr: float = 0.01
    eps: float = 1e-8
    initial_accumulator: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ("sgd", "adagrad"):
            raise ValueError(f"embedding optimizer must be 'sgd' or 'adagrad', got {self.kind!r}")
        if not self.lr > 0:
            raise ValueError(f"learning rate must be > 0, got {self.lr}")

    def init_state(self, param: Tensor) -> Tensor | None:
        """The optimizer state for a parameter (Adagrad's squared-gradient sum), or None for SGD."""
        if self.kind == "sgd":
            return None
        return torch.full_like(param, self.initial_accumulator)

    @torch.no_grad()
    def apply_rows(self, weight: Tensor, state: Tensor | None, rows: Tensor, grad: Tensor) -> None:
        """Update ``weight[rows] -= step(grad)`` for unique ``rows`` whose gradients are already aggregated."""
        if self.kind == "sgd":
            weight.index_add_(0, rows, grad, alpha=-self.lr)
            return
        acc = state.index_select(0, rows).addcmul_(grad, grad)
        state.index_copy_(0, rows, acc)
        weight.index_add_(0, rows, grad / (acc.sqrt() + self.eps), alpha=-self.lr)

    @torch.no_grad()
    def apply_dense(self, weight: Tensor, state: Tensor | None, grad: Tensor) -> None:
        """Update a whole parameter from its dense gradient."""
        if self.kind == "sgd":
            weight.add_(grad, alpha=-self.lr)
            return
        state.addcmul_(grad, grad)
        weight.addcdiv_(grad, state.sqrt().add_(self.eps), value=-self.lr)


@dataclass
class MemoryReport:
    """Analytic bytes held by an embedding collection (not measured; the harness measures peaks)."""

    params: int = 0
    optimizer_state: int = 0
    cache: int = 0
    peak_intermediates: int = 0

    @property
    def total(self) -> int:
        return self.params + self.optimizer_state + self.cache + self.peak_intermediates

    def to_dict(self) -> dict[str, int]:
        return {**dataclasses.asdict(self), "total": self.total}


@dataclass
class WorkReport:
    """Counters of the last step, returned by the ops (never guessed)."""

    nnz: int = 0  # lookups
    unique: int = 0  # U: distinct (table, id) pairs
    e1: int = 0  # E1: distinct first-stage TT prefixes (TT methods only)
    gemms: int = 0
    flops: int = 0
    intermediate_bytes: int = 0
    comm_bytes: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


HARNESS_KEYS = frozenset({"device", "check_bounds", "seed"})  # set by the harness, never an option
BUILD_ARGS = frozenset({"tables", "optim", "ctx", "comm", "stats", "plan"})  # objects the harness passes


def keyword_names(fn: Any) -> tuple[set[str], bool]:
    """The parameter names ``fn`` takes by keyword (self / cls left out), and whether it takes ``**kwargs``."""
    params = inspect.signature(fn).parameters.values()
    named = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"self", "cls"}
    return named, any(p.kind is p.VAR_KEYWORD for p in params)


class GradientTensor(NamedTuple):
    """A trainable tensor whose gradient an external update reads after backward (see ``gradient_tensors``)."""

    param: nn.Parameter
    row_sparse: bool  # a table: its gradient is a set of rows (a sparse COO tensor, or None if no row was hit)


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
        """The options this system takes on one device (``-o KEY=VALUE``, ``[impl_options]``): the keyword
        parameters of its constructor, following ``**kwargs`` up to the base that takes them. The harness
        sets ``device``, ``check_bounds`` and ``seed`` itself and passes the BUILD_ARGS objects."""
        names: set[str] = set()
        for klass in cls.__mro__:
            init = klass.__dict__.get("__init__")
            if init is None:
                continue
            own, more = keyword_names(init)
            names |= own
            if not more:
                break
        return frozenset(names - BUILD_ARGS - HARNESS_KEYS)

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
        only the layout (offsets), so a malformed batch never reaches a table in either mode."""
        if not isinstance(features, SparseFeatures):
            raise TypeError(f"expected SparseFeatures, got {type(features).__name__}")
        if self.check_bounds:
            return features.validate(self.tables)
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


# name -> module that defines (and registers) the implementation; imported on first use.
_MODULES: dict[str, str] = {
    "dense-torch": "impls.dense.torch_bag",
    "dense-fbgemm": "impls.dense.fbgemm_tbe",
    "ttrec": "impls.ttrec.collection",
    "elrec": "impls.elrec.collection",
    "ecorec": "impls.ecorec.collection",
    "embark": "impls.embark.collection",
    "torchrec": "impls.torchrec_peer.collection",
    "hash": "impls.compress.hashing",
    "qr": "impls.compress.qr",
    "md": "impls.compress.md",
}
_REGISTRY: dict[str, type[EmbeddingCollection]] = {}


def register(cls: type[EmbeddingCollection]) -> type[EmbeddingCollection]:
    """Class decorator: make an implementation available under ``cls.name``."""
    if not cls.name:
        raise ValueError(f"{cls.__qualname__} has no registry name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"implementation name {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def registered_names() -> list[str]:
    """Every implementation name the registry knows, whether or not its dependencies are installed."""
    return sorted(set(_MODULES) | set(_REGISTRY))


def get_impl(name: str) -> type[EmbeddingCollection]:
    """The implementation class for ``name``; ValueError for an unknown name, ImportError for a missing
    optional dependency (with the install hint)."""
    if name not in _REGISTRY:
        if name not in _MODULES:
            raise ValueError(f"unknown implementation {name!r}; known: {', '.join(registered_names())}")
        importlib.import_module(_MODULES[name])
    return _REGISTRY[name]
