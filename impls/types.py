"""The values the interface speaks in: TableSpec (one table), SparseFeatures (a batch of jagged lookups in the
table-major fbgemm TBE layout), EmbeddingOptim (the embedding optimizer), MemoryReport / WorkReport (what a
collection holds and did), GradientTensor (a tensor whose gradient an external update reads)."""
from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Sequence

import torch
from torch import Tensor, nn

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

    def check_shapes(self, tables: Sequence[TableSpec]) -> "SparseFeatures":
        """Shapes, dtypes and devices only (T*B+1 offsets; nothing read from the tensors); self when they fit."""
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
        return self

    def validate(self, tables: Sequence[TableSpec]) -> "SparseFeatures":
        """Raise ValueError naming the table, bag and id of the first bad entry; return self when valid."""
        self.check_shapes(tables)
        bounds_check(self.values, self.offsets, tables, self.batch_size)
        return self

    def check_layout(self, tables: Sequence[TableSpec]) -> "SparseFeatures":
        """The batch's layout without reading its ids: shapes and dtypes, and T*B+1 offsets that run from 0 to
        the number of ids and never decrease. O(T*B) and one device sync; what ``check_bounds=False`` still
        checks, so a malformed batch is refused (naming table, bag and offset) before any table moves."""
        self.check_shapes(tables)
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
        start, end = off[:: B].tolist()  # tolist, not int(): a traced graph (export) keeps them symbolic
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


def _flatten_features(f: SparseFeatures) -> tuple[list[Tensor], int]:
    return [f.values, f.offsets], f.batch_size


def _unflatten_features(children: Sequence[Tensor], batch_size: int) -> SparseFeatures:
    return SparseFeatures(children[0], children[1], batch_size)


# a pytree node (its tensors the leaves, the batch size its static context): torch.export and torch.compile take a
# SparseFeatures as an input, as they take TorchRec's KeyedJaggedTensor
torch.utils._pytree.register_pytree_node(
    SparseFeatures, _flatten_features, _unflatten_features,
    serialized_type_name="impls.types.SparseFeatures",
    flatten_with_keys_fn=lambda f: ([(torch.utils._pytree.GetAttrKey("values"), f.values),
                                     (torch.utils._pytree.GetAttrKey("offsets"), f.offsets)], f.batch_size))


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

    def apply_dense_all(self, weights: list[Tensor], states: list, grads: list[Tensor]) -> None:
        """apply_dense over many parameters at once (torch's multi-tensor ops: the same arithmetic, element by
        element, as apply_dense's)."""
        if not weights:
            return
        if self.kind == "sgd":
            torch._foreach_add_(weights, grads, alpha=-self.lr)
            return
        torch._foreach_addcmul_(states, grads, grads)
        denom = torch._foreach_sqrt(states)
        torch._foreach_add_(denom, self.eps)
        torch._foreach_addcdiv_(weights, grads, denom, value=-self.lr)


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


class GradientTensor(NamedTuple):
    """A trainable tensor whose gradient an external update reads after backward (see ``gradient_tensors``)."""

    param: nn.Parameter
    row_sparse: bool  # a table: its gradient is a set of rows (a sparse COO tensor, or None if no row was hit)
