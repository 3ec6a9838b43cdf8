"""The benchmark loop: warm-up until the step time settles (capped), then as many timed steps as fill the time
budget at the settled step time (between iters and max_iters); the record says how many and by which rule."""
import torch

from reproduce.harness.point import RunPoint
from reproduce.harness.training import bench_loop, settled, timed_steps


def P(**fields) -> RunPoint:
    """A run point with the loop's fields (a real one: its checks are on values alone, nothing is opened)."""
    return RunPoint(impl="dense-torch", data="uniform", batch_size=8, **{"warmup": 2, "iters": 3, "max_iters": 50,
                                                                          **fields})


class ScriptedClock:
    """Steps take the scripted times (ms), then the last one forever."""

    def __init__(self, times):
        self.times, self.n = list(times), 0

    def step(self, step, batch, nxt):
        t = self.times[min(self.n, len(self.times) - 1)]
        self.n += 1
        return torch.tensor(1.0), (t / 2, t / 2, 0.0, t, t)


def test_settled_needs_three_steps_within_ten_percent_and_no_longer_falling():
    assert not settled([100.0, 50.0])
    assert settled([300.0, 101.0, 99.0, 100.0, 104.0, 96.0])
    assert not settled([9.0, 9.0, 9.0, 100.0, 130.0, 100.0])  # spread 30 %
    assert not settled([160.0, 130.0, 120.0, 84.0, 80.0, 78.0])  # tight, but 20 % below the steps before


def test_fixed_warmup_and_iters_without_the_options():
    clock = ScriptedClock([500, 100])
    res = bench_loop(P(), None, [None], [], None, clock, None, 0)
    assert clock.n == 5 and len(res.phases["total"]) == 3 and res.loop["warmup_steps"] == 2
    assert res.loop["rule"] == "2 warm-up steps; 3 timed steps" and "cpu" in res.phases


def test_warmup_runs_until_settled_then_the_budget_sets_the_timed_steps():
    clock = ScriptedClock([900, 700, 400, 200, 100, 101, 99, 100, 102, 98, 100])
    res = bench_loop(P(warmup_max=20, time_budget_s=2.0), None, [None], [], None, clock, None, 0)
    assert res.loop["warmup_steps"] == 9 and res.loop["warmup_settled"]  # 99, 100, 102 after 200, 100, 101
    assert len(res.phases["total"]) == 20  # 2 s at the settled 100 ms
    assert timed_steps(P(time_budget_s=100.0), [100.0] * 3) == 50  # capped at max_iters
    assert timed_steps(P(time_budget_s=0.01), [100.0] * 3) == 3  # at least iters


def test_warmup_stops_at_its_cap_when_it_never_settles():
    clock = ScriptedClock([100, 300] * 50)
    res = bench_loop(P(warmup_max=6), None, [None], [], None, clock, None, 0)
    assert res.loop["warmup_steps"] == 6 and not res.loop["warmup_settled"] and len(res.phases["total"]) == 3
