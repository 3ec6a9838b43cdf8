"""Placement (sequential, greedy LPT, random) and EcoRec's pipeline groups."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.sharding.plan import PlacementError, backward_group_tables, group_tables, place_tables, slope_group_sizes


def test_slope_example_from_the_paper():
    assert slope_group_sizes(40, 4, 1.0) == [19, 13, 7, 1]


def test_slope_sizes_are_the_artifacts():
    """The SC24 artifact's partition_number (decreasing) on cases where rounding decides: exact ties go to the
    earlier group ([4,2,2] under plain largest-remainder rounding of unrounded floats)."""
    assert slope_group_sizes(8, 3, 0.6) == [4, 3, 1]
    assert slope_group_sizes(13, 4, 1.0) == [6, 4, 2, 1]
    assert slope_group_sizes(10, 4, 0.0) == [3, 3, 2, 2]
    assert slope_group_sizes(26, 4, 0.5) == [9, 7, 6, 4]


def test_lpt_ties_go_to_the_lowest_rank():
    """The artifact's greed_partition: among equal loads the lowest-index rank (not the one with fewer tables)."""
    assert place_tables([4, 2, 2, 1, 1], 2, "greedy") == [[0, 3], [1, 2, 4]]
    # equal loads: rank 0 although it holds more tables; the last table goes to the still empty rank
    assert place_tables([0, 0, 0, 0], 2, "greedy") == [[0, 1, 2], [3]]
    assert place_tables([0, 0, 0], 3, "greedy") == [[0], [1], [2]]


@given(st.integers(1, 200), st.integers(1, 12), st.floats(0.0, 1.0))
def test_slope_groups_cover_and_decrease(n, g, skew):
    sizes = slope_group_sizes(n, g, skew)
    assert len(sizes) == g and sum(sizes) == n
    if n >= g:
        assert min(sizes) >= 1
        assert all(a >= b for a, b in zip(sizes, sizes[1:])) or skew == 0.0
        if skew == 0.0:
            assert max(sizes) - min(sizes) <= 1


def test_backward_sizes_are_the_artifacts():
    # ecorec/utils.py partition_number(n, g, skew, decreasing=False): its backward pass's group sizes
    assert slope_group_sizes(13, 4, 1.0, decreasing=False) == [1, 3, 4, 5]  # forward [6, 4, 2, 1]
    assert slope_group_sizes(8, 3, 0.6, decreasing=False) == [2, 3, 3]  # forward [4, 3, 1]
    assert slope_group_sizes(40, 4, 1.0, decreasing=False) == [1, 7, 13, 19]
    assert slope_group_sizes(26, 4, 0.5, decreasing=False) == [4, 6, 7, 9]
    assert slope_group_sizes(10, 4, 0.0, decreasing=False) == [2, 2, 3, 3]
    assert slope_group_sizes(2, 4, 1.0, decreasing=False) == [0, 0, 1, 1]


def test_backward_groups_cut_the_reversed_forward_list():
    owned = list(range(13))
    assert group_tables(owned, 4, 1.0) == [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9], [10, 11], [12]]
    # not the forward groups reversed: [12], [11, 10, 9], ... against [12], [11, 10], [9, 8, 7, 6], ...
    assert backward_group_tables(owned, 4, 1.0) == [[12], [11, 10, 9], [8, 7, 6, 5], [4, 3, 2, 1, 0]]
    assert backward_group_tables([5, 1, 7], 2, 0.0, reorder=True) == [[5], [1, 7]]  # forward [[7, 1], [5]]
    for n in range(1, 20):
        for g in range(1, 6):
            fwd = [i for grp in group_tables(list(range(n)), g, 1.0) for i in grp]
            bwd = [i for grp in backward_group_tables(list(range(n)), g, 1.0) for i in grp]
            assert bwd == fwd[::-1]  # every table once, in reverse running order


def test_groups_and_reordering():
    owned = [5, 1, 7, 2, 0]  # greedy order: descending cost
    assert group_tables(owned, 2, 0.0) == [[5, 1, 7], [2, 0]]
    assert group_tables(owned, 2, 0.0, reorder=True) == [[0, 2, 7], [1, 5]]
    assert group_tables([3], 4) == [[3], [], [], []]  # fewer tables than groups: empty stages


@settings(max_examples=200)
@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=60), st.integers(1, 8))
def test_greedy_is_lpt(costs, world):
    if len(costs) < world:
        with pytest.raises(PlacementError, match="at least"):
            place_tables(costs, world, "greedy")
        return
    owned = place_tables(costs, world, "greedy")
    flat = sorted(i for o in owned for i in o)
    assert flat == list(range(len(costs)))  # each table exactly once
    assert all(o for o in owned)  # every rank holds a table
    loads = [sum(costs[i] for i in o) for o in owned]
    assert max(loads) - min(loads) <= max(costs)  # the LPT bound
    for o in owned:  # each rank's list in descending cost
        assert [costs[i] for i in o] == sorted((costs[i] for i in o), reverse=True)


def test_sequential_random_and_capacity():
    assert place_tables([1] * 5, 2, "sequential") == [[0, 2, 4], [1, 3]]
    r = place_tables([1] * 6, 3, "random", seed=1)
    assert sorted(sum(r, [])) == list(range(6)) and all(r)
    # a table too large for any rank, and a placement that runs out of room
    with pytest.raises(PlacementError, match="'big'.*fits on no rank"):
        place_tables([1, 1], 2, "greedy", sizes=[10, 200], capacity=100, names=["small", "big"])
    owned = place_tables([5, 4, 3], 2, "greedy", sizes=[60, 70, 40], capacity=100)
    assert owned == [[0, 2], [1]]  # LPT would pick rank 1 for table 2; it has no room left
    with pytest.raises(PlacementError, match="needs at least 4 tables, got 3"):
        place_tables([1, 1, 1], 4)
    with pytest.raises(ValueError, match="unknown placement"):
        place_tables([1, 1], 2, "best")
