"""Traffic.by_level, the bytes a step's fused walks must move through each level for make bench's memory-aware limit:
each stream at the smallest level holding its footprint and at every level above it, the compulsory bytes at all,
and the prefix products counted once each way (twice backward: recomputed, and their gradients)."""
import pytest

from impls.core import tt
from impls.core.stage_plan import StageCall, TablePlan
from impls.work.traffic import LEVELS, Traffic


def traffic(groups=10, items=30, nnz=50, dedups=True):
    s = tt.TTShape.create(1000, 16, 8, p=(10, 10, 10), q=(2, 2, 4))
    t = Traffic()
    t.add_plan(TablePlan([StageCall("fwd", groups, items, 0), StageCall("bwd", groups, items, 0)]), s, nnz, dedups)
    return s, t


def test_prefix_products_are_written_and_read_once_each_way():
    s, t = traffic()
    w = s.prefix_width
    assert t.prefixes == 4 * (2 * 10 * w + 2 * 2 * 10 * w)
    assert t.pooling == 2 * 2 * 4 * s.dim * 50 and t.index == 8 * 50 + 32 * 50


@pytest.mark.parametrize("where", LEVELS)
def test_a_stream_crosses_its_level_and_those_above_it(where):
    _, t = traffic()
    cap = {"L2": 100, "L3": 1000}
    size = {"L2": 50, "L3": 500, "DRAM": 5000}[where]
    got = t.by_level({"prefixes": size, "pooling": size, "index": size}, cap, compulsory=7)
    moved = t.prefixes + t.pooling + t.index
    for level in LEVELS:
        above = LEVELS.index(level) <= LEVELS.index(where)  # nearer the registers than where it is served, or there
        assert got[level] == 7 + (moved if above else 0)


def test_streams_split_by_their_own_footprints():
    _, t = traffic()
    got = t.by_level({"prefixes": 10, "pooling": 500, "index": 10**6}, {"L2": 100, "L3": 1000})
    assert got == {"L2": t.prefixes + t.pooling + t.index, "L3": t.pooling + t.index, "DRAM": t.index}
    assert t.by_level({"prefixes": 10, "pooling": 10, "index": 10}, {})["DRAM"] == t.prefixes + t.pooling + t.index
