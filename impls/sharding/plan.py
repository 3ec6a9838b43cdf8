"""Table placement for table-wise sharding and the table groups of EcoRec's pipeline.

Placement (tt-systems.md §4.7): ``sequential`` deals tables round-robin (the TT-Rec / dense baselines),
``greedy`` is LPT list scheduling on a per-table cost (EcoRec's statistics-based load balancing: the cost is
the table's unique-id count in a sampled batch; tables by descending cost, each to the least-loaded rank),
``random`` deals a seeded permutation round-robin. A per-rank capacity on parameter bytes makes a placement
that cannot fit an error naming the table.

Groups (§4.6): each rank cuts its table list into ``g`` groups whose sizes lie on a line of slope
k = skew * 2(n - g) / (g(g - 1)) around n / g, largest first; ``reorder`` reverses the list (cheapest tables
first) before it is cut."""
from __future__ import annotations

import math
import random as _random
from typing import Sequence

PLACEMENTS = ("sequential", "greedy", "random")


class PlacementError(ValueError):
    """The tables cannot be placed as asked (too few tables, or not enough capacity)."""


def place_tables(
    costs: Sequence[float],
    world_size: int,
    how: str = "sequential",
    sizes: Sequence[int] | None = None,
    capacity: int | None = None,
    seed: int = 0,
    names: Sequence[str] | None = None,
) -> list[list[int]]:
    """The table indices each rank owns, in the order it holds them (greedy: descending cost)."""
    n = len(costs)
    names = list(names) if names is not None else [str(i) for i in range(n)]
    if how not in PLACEMENTS:
        raise ValueError(f"unknown placement {how!r}; choose one of {', '.join(PLACEMENTS)}")
    if world_size < 1:
        raise ValueError(f"world size must be >= 1, got {world_size}")
    if n < world_size:
        raise PlacementError(
            f"table-wise sharding over {world_size} ranks needs at least {world_size} tables, got {n}; "
            f"use fewer ranks or a data-parallel / row-wise configuration"
        )
    sizes = list(sizes) if sizes is not None else [0] * n
    if capacity is not None and capacity <= 0:
        raise ValueError(f"capacity must be > 0 bytes, got {capacity}")
    if how == "greedy":
        order = sorted(range(n), key=lambda i: (-costs[i], i))
    elif how == "random":
        order = list(range(n))
        _random.Random(seed).shuffle(order)
    else:
        order = list(range(n))
    owned: list[list[int]] = [[] for _ in range(world_size)]
    load = [0.0] * world_size
    used = [0] * world_size
    for k, i in enumerate(order):
        if how == "greedy":
            # least accumulated cost; ties: fewer tables, then the lower rank
            prefs = sorted(range(world_size), key=lambda r: (load[r], len(owned[r]), r))
        else:
            prefs = [(k + j) % world_size for j in range(world_size)]
        fits = [r for r in prefs if capacity is None or used[r] + sizes[i] <= capacity]
        if not fits:
            raise PlacementError(
                f"placement cannot fit: table {names[i]!r} ({sizes[i]} bytes) fits on no rank with capacity "
                f"{capacity} bytes (ranks hold {used})"
            )
        r = fits[0]
        owned[r].append(i)
        load[r] += costs[i]
        used[r] += sizes[i]
    return owned


def slope_group_sizes(n: int, groups: int, skew: float) -> list[int]:
    """Sizes of ``groups`` consecutive groups over ``n`` tables, largest first, on EcoRec's slope; every group
    gets at least one table when n >= groups (the rest are empty otherwise). n=40, g=4, skew=1 -> [19,13,7,1]."""
    if groups < 1:
        raise ValueError(f"need at least one group, got {groups}")
    if not 0.0 <= skew <= 1.0:
        raise ValueError(f"skew must be in [0, 1], got {skew}")
    if n < groups:
        return [1] * n + [0] * (groups - n)
    if groups == 1:
        return [n]
    k = skew * 2.0 * (n - groups) / (groups * (groups - 1))
    targets = [round(n / groups + k * ((groups - 1) / 2.0 - i), 9) for i in range(groups)]
    # whole sizes by largest remainder (ties to the earlier group): they stay non-increasing and >= 1
    sizes = [math.floor(t) for t in targets]
    by_remainder = sorted(range(groups), key=lambda i: (-(targets[i] - sizes[i]), i))
    for i in by_remainder[: n - sum(sizes)]:
        sizes[i] += 1
    return sizes


def group_tables(owned: Sequence[int], groups: int, skew: float = 0.0, reorder: bool = False) -> list[list[int]]:
    """Cut one rank's table list into pipeline groups (``reorder``: cheapest first, i.e. the list reversed)."""
    order = list(reversed(owned)) if reorder else list(owned)
    out, start = [], 0
    for size in slope_group_sizes(len(order), groups, skew):
        out.append(order[start : start + size])
        start += size
    return out
