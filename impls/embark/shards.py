"""EMBark's flexible 3D sharding (EMBark, RecSys'24; HugeCTR's row / column shard key mapping): a model-parallel table
t is cut into c_t column shards of width d_t / c_t and each column group into r_t row shards, one per GPU, so a
shard is (table, row shard j of r, column shard k of c, GPU). Rows are split cyclically as in HugeCTR: key k of a
column group lives on that group's GPU ``k % r`` at local row ``k // r``; shard j holds V // r + [j < V mod r] rows.

A plan also names the data-parallel tables (replicated on every GPU) and the cluster of each model-parallel
table: RB (reduction-based: partial sums) or UB (unique-based: unique vectors)."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Sequence

from impls.api import TableSpec


class Cluster(str, enum.Enum):
    """An embedding cluster: data-parallel, reduction-based (partial sums) or unique-based (unique vectors). A
    str enum, so plans written with the strings "dp" / "rb" / "ub" compare and serialize as before."""

    DP = "dp"
    RB = "rb"
    UB = "ub"

    def __str__(self) -> str:
        return self.value


CLUSTERS = (Cluster.RB, Cluster.UB)  # the model-parallel clusters


@dataclass(frozen=True)
class Shard:
    table: int
    row: int  # j in [0, r)
    rows: int  # r
    col: int  # k in [0, c)
    cols: int  # c
    gpu: int


def shard_rows(num_rows: int, r: int, j: int) -> int:
    """Rows of row shard j of r under the cyclic split."""
    return num_rows // r + (1 if j < num_rows % r else 0)


def check_coverage(tables: Sequence[TableSpec], shards: Sequence[Shard]) -> None:
    """Every (row, column) cell of each sharded table in exactly one shard: per table one r x c grid, each
    (row shard, column shard) once (row shard j owns the rows = j mod r, column shard k the k-th d/c columns)."""
    grids: dict[int, tuple[int, int, set]] = {}
    for s in shards:
        name = tables[s.table].name
        r, c, cells = grids.setdefault(s.table, (s.rows, s.cols, set()))
        if (s.rows, s.cols) != (r, c):
            raise ValueError(f"table {name!r}: shards disagree on the split ({r}x{c} vs {s.rows}x{s.cols})")
        if not (0 <= s.row < r and 0 <= s.col < c):
            raise ValueError(f"table {name!r}: shard ({s.row}, {s.col}) outside its {r}x{c} grid")
        if (s.row, s.col) in cells:
            raise ValueError(f"table {name!r}: rows = {s.row} mod {r}, column block {s.col} covered twice")
        if tables[s.table].dim % c:
            raise ValueError(f"table {name!r}: dim {tables[s.table].dim} does not split into {c} columns")
        cells.add((s.row, s.col))
    for t, (r, c, cells) in grids.items():
        if len(cells) != r * c:
            raise ValueError(f"table {tables[t].name!r}: {r * c - len(cells)} of its {r}x{c} shards are missing")


@dataclass(frozen=True)
class TablePlacement:
    """One model-parallel table: its GPUs (c consecutive groups of r), its column split and its cluster."""

    table: int
    gpus: tuple[int, ...]
    c: int = 1
    cluster: Cluster = Cluster.RB

    def __post_init__(self) -> None:
        if self.cluster in CLUSTERS:  # a string names the same cluster; anything else fails in Plan.validate
            object.__setattr__(self, "cluster", Cluster(self.cluster))

    @property
    def r(self) -> int:
        return len(self.gpus) // self.c

    def shards(self) -> list[Shard]:
        r = self.r
        return [Shard(self.table, j, r, k, self.c, self.gpus[k * r + j]) for k in range(self.c) for j in range(r)]

    def owner(self, key: int, col: int = 0) -> int:
        return self.gpus[col * self.r + key % self.r]


@dataclass(frozen=True)
class Plan:
    world_size: int
    gpus_per_node: int
    dp: tuple[int, ...] = ()
    mp: tuple[TablePlacement, ...] = ()
    name: str = ""
    hierarchical: bool = False  # RB exchanges reduce inside a node, then go over rails (HugeCTR's hier RB)
    notes: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def num_nodes(self) -> int:
        return self.world_size // self.gpus_per_node

    def shards(self) -> list[Shard]:
        return [s for p in self.mp for s in p.shards()]

    def gpu_shards(self, gpu: int) -> list[Shard]:
        return [s for s in self.shards() if s.gpu == gpu]

    def placement(self, table: int) -> TablePlacement | None:
        return next((p for p in self.mp if p.table == table), None)

    def validate(self, tables: Sequence[TableSpec]) -> "Plan":
        """Raise ValueError unless every table is DP xor model-parallel, every (row, column) cell of every
        model-parallel table is covered by exactly one shard, and every split divides what it splits."""
        G, T = self.world_size, len(tables)
        if G < 1 or self.gpus_per_node < 1 or G % self.gpus_per_node:
            raise ValueError(f"world size {G} is not a whole number of nodes of {self.gpus_per_node}")
        seen: dict[int, str] = {}
        for t in self.dp:
            if not 0 <= t < T:
                raise ValueError(f"plan names table {t}; there are {T}")
            seen[t] = "dp"
        for p in self.mp:
            name = tables[p.table].name if 0 <= p.table < T else p.table
            if not 0 <= p.table < T:
                raise ValueError(f"plan names table {p.table}; there are {T}")
            if p.table in seen:
                raise ValueError(f"table {name!r} is placed twice")
            seen[p.table] = p.cluster
            if p.cluster not in CLUSTERS:
                raise ValueError(f"table {name!r}: cluster must be one of {[c.value for c in CLUSTERS]}, got {p.cluster!r}")
            if p.c < 1 or len(p.gpus) % p.c or not p.gpus:
                raise ValueError(f"table {name!r}: {len(p.gpus)} GPUs do not split into {p.c} column groups")
            if tables[p.table].dim % p.c:
                raise ValueError(f"table {name!r}: dim {tables[p.table].dim} does not split into {p.c} columns")
            if any(not 0 <= g < G for g in p.gpus):
                raise ValueError(f"table {name!r}: GPU ids {p.gpus} outside the world of {G}")
            if len(set(p.gpus)) != len(p.gpus):
                raise ValueError(f"table {name!r}: two of its shards on one GPU ({p.gpus})")
        missing = [tables[t].name for t in range(T) if t not in seen]
        if missing:
            raise ValueError(f"tables {missing} are in no cluster")
        check_coverage(tables, self.shards())
        return self

    def cluster_of(self, table: int) -> Cluster:
        if table in self.dp:
            return Cluster.DP
        p = self.placement(table)
        if p is None:
            raise KeyError(f"table {table} is not in the plan")
        return p.cluster
