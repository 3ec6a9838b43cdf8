"""Table placement for table-wise sharding and the table groups of EcoRec's pipeline.

Placement (EcoRec's ecorec/costs/sharding_plan.py and TT-Rec's round-robin): ``sequential`` deals tables round-robin (the TT-Rec / dense baselines),
``greedy`` is LPT list scheduling on a per-table cost (EcoRec's statistics-based load balancing: the cost is
the table's unique-id count in a sampled batch; tables by descending cost, each to the least-loaded rank),
``random`` deals a seeded permutation round-robin. A per-rank capacity on parameter bytes makes a placement
that cannot fit an error naming the table.

Groups (§4.6): each rank cuts its table list into ``g`` groups whose sizes lie on a line of slope
k = skew * 2(n - g) / (g(g - 1)) around n / g, largest first; ``reorder`` reverses the list (cheapest tables
first) before it is cut. Whole sizes as the SC24 artifact makes them (ecorec/utils.py ``partition_number``):
every group starts at one table and each further table goes to the group furthest below its target, ties to
the earlier group; here in exact rational arithmetic, so a tie is a tie (the artifact compares floats). The backward
pass has its own groups, as the artifact makes them: the forward list reversed, cut by the partition whose targets
rise (backward_group_tables)."""
from __future__ import annotations

import random as _random
from fractions import Fraction
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
            # least accumulated cost, ties to the lower rank (the artifact's greed_partition); a rank still empty
            # when only as many tables are left as empty ranks takes one (only zero-cost tables get there)
            empty = [r for r in range(world_size) if not owned[r]]
            pool = empty if len(order) - k <= len(empty) else range(world_size)
            prefs = sorted(pool, key=lambda r: (load[r], r))
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


def slope_group_sizes(n: int, groups: int, skew: float, decreasing: bool = True) -> list[int]:
    """Sizes of ``groups`` consecutive groups over ``n`` tables on EcoRec's slope; every group gets at least one
    table when n >= groups (the rest are empty otherwise). ``decreasing``: the forward groups, largest first
    (n=40, g=4, skew=1 -> [19,13,7,1]; n=8, g=3, skew=0.6 -> [4,3,1], the artifact's). Otherwise the artifact's
    backward sizes, smallest first: its partition with the targets rising, whose ties go to the smaller group,
    so not always the forward sizes reversed (n=13, g=4, skew=1: [1,3,4,5] against [6,4,2,1])."""
    if groups < 1:
        raise ValueError(f"need at least one group, got {groups}")
    if not 0.0 <= skew <= 1.0:
        raise ValueError(f"skew must be in [0, 1], got {skew}")
    if n < groups:
        sizes = [1] * n + [0] * (groups - n)
        return sizes if decreasing else sizes[::-1]
    if groups == 1:
        return [n]
    k = Fraction(str(skew)) * 2 * (n - groups) / (groups * (groups - 1))  # str: 0.6 is 3/5, not its float
    center = Fraction(groups - 1, 2)
    sign = 1 if decreasing else -1
    targets = [Fraction(n, groups) + sign * k * (center - i) for i in range(groups)]
    sizes = [1] * groups
    for _ in range(n - groups):
        gap = [t - s for t, s in zip(targets, sizes)]
        sizes[gap.index(max(gap))] += 1  # the furthest below its target; ties: the earlier group
    return sorted(sizes, reverse=decreasing)


def _cut(order: Sequence[int], sizes: Sequence[int]) -> list[list[int]]:
    out, start = [], 0
    for size in sizes:
        out.append(list(order[start : start + size]))
        start += size
    return out


def group_tables(owned: Sequence[int], groups: int, skew: float = 0.0, reorder: bool = False) -> list[list[int]]:
    """Cut one rank's table list into pipeline groups (``reorder``: cheapest first, i.e. the list reversed)."""
    order = list(reversed(owned)) if reorder else list(owned)
    return _cut(order, slope_group_sizes(len(order), groups, skew))


def backward_group_tables(owned: Sequence[int], groups: int, skew: float = 0.0, reorder: bool = False) -> list[list[int]]:
    """The backward pass's groups as the SC24 artifact cuts them (table_wise.py): the forward list reversed, cut
    by the rising partition (slope_group_sizes(..., decreasing=False)), in the order they run."""
    forward = list(reversed(owned)) if reorder else list(owned)
    return _cut(forward[::-1], slope_group_sizes(len(forward), groups, skew, decreasing=False))
