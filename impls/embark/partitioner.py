"""The EMBark planner's partitioner (TorchRec's name for the step that places shards on devices): given every RB
table's split, place the shards greedily in descending cost (equal cost: the larger shard first, as HugeCTR's
planner.py), each on the cheapest bucket that has room and holds no shard of the same table. The result is typed:
a ``ShardAssignment`` (the bucket each shard went to, and the largest bucket cost) or ``Unplaceable`` (the table whose
shard fit nowhere)."""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Sequence

from impls.api import TableSpec
from impls.embark.cost import CostModel
from impls.embark.proposer import Splits


@dataclass(frozen=True)
class ShardAssignment:
    where: dict[int, dict[tuple[int, int], int]]  # table -> (column shard k, row shard j) -> bucket
    max_cost: float  # the largest bucket's RB cost


@dataclass(frozen=True)
class Unplaceable:
    table: int  # a shard of this table fit on no bucket


def place(tables: Sequence[TableSpec], rb: Sequence[int], model: CostModel, splits: Splits,
          base_mem: float) -> ShardAssignment | Unplaceable:
    """Every RB shard of ``splits`` on a bucket (``base_mem`` bytes already taken on each by DP / UB)."""
    n = model.num_buckets
    cost, mem = [0.0] * n, [base_mem] * n
    holds: list[set[int]] = [set() for _ in range(n)]
    shards = []
    for t in rb:
        r, c = splits.r[t], splits.c[t]
        a, b = model.shard_cost(tables[t], r, c)
        size = model.shard_bytes(tables[t], r, c)
        shards += [(a + b, size, t, k, j) for k in range(c) for j in range(r)]
    shards.sort(key=lambda s: (-s[0], -s[1], s[2], s[3], s[4]))
    where: dict[int, dict[tuple[int, int], int]] = {t: {} for t in rb}
    cap = model.bucket_cap()
    heap = [(0.0, bk) for bk in range(n)]  # buckets by current cost, then index
    for w, size, t, k, j in shards:
        skipped = []
        while heap:
            c0, bk = heapq.heappop(heap)
            if t in holds[bk] or mem[bk] + size > cap:
                skipped.append((c0, bk))
                continue
            cost[bk] = c0 + w
            mem[bk] += size
            holds[bk].add(t)
            where[t][(k, j)] = bk
            heapq.heappush(heap, (cost[bk], bk))
            break
        else:
            return Unplaceable(t)
        for item in skipped:
            heapq.heappush(heap, item)
    return ShardAssignment(where, max(cost))
