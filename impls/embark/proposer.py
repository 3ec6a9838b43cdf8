"""The EMBark planner's proposer (TorchRec's name for what suggests how to cut tables): the current row / column
split of every RB table, which tables may still be split, and which one to split next (HugeCTR's rank d'h/r + 80 d'
of the hottest shard)."""
from __future__ import annotations

from dataclasses import dataclass, field

from impls.api import TableSpec

HOWS = ("row", "col")


@dataclass
class Splits:
    """Row split r and column split c of each RB table (powers of two)."""

    r: dict[int, int] = field(default_factory=dict)
    c: dict[int, int] = field(default_factory=dict)

    @classmethod
    def whole(cls, tables: list[int]) -> "Splits":
        return cls({t: 1 for t in tables}, {t: 1 for t in tables})

    def copy(self) -> "Splits":
        return Splits(dict(self.r), dict(self.c))

    def split(self, t: int, how: str) -> None:
        (self.r if how == "row" else self.c)[t] *= 2

    def unsplit(self, t: int, how: str) -> None:
        (self.r if how == "row" else self.c)[t] //= 2

    def can_split(self, table: TableSpec, t: int, how: str, buckets: int) -> bool:
        """Doubling keeps r * c <= buckets; a row split needs rows to split, a column split an even width > 32."""
        r, c = self.r[t], self.c[t]
        if 2 * r * c > buckets:
            return False
        if how == "row":
            return r * 2 <= table.num_embeddings
        d = table.dim / c
        return d % 2 == 0 and d > 32 and table.dim % (2 * c) == 0


def hot_rank(t: TableSpec, r: int, c: int) -> float:
    """HugeCTR's split rank of a table, d' h / r + 80 d': per shard, its hotness divided by the row split r
    (HugeCTR's planner.py ranks shards by hotness / r the same way), so splitting moves on to the next table once a
    table's shards are cooler than it."""
    d = t.dim / c
    return d * t.hotness / r + 80 * d


def hottest(tables: list[TableSpec], candidates: list[int], splits: Splits) -> int:
    """The candidate table to split next: the highest hot_rank, ties to the lower index."""
    return max(candidates, key=lambda x: (hot_rank(tables[x], splits.r[x], splits.c[x]), -x))
