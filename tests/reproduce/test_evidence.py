"""The evidence a timed set gives: ratios paired by round with exact order-statistic intervals (a system over itself
is exactly 1), the one rule for the "within noise" mark, an A/A control in every timed set, rounds added until the
headline ratios resolve or the budget ends (a fake clock), and duet rounds on disjoint cores."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from reproduce.analysis.resolving import headline, unresolved_labels, within_noise
from reproduce.analysis.stats import (_coverage, aggregate_interval, interval_name, median_interval, order_k,
                                      paired_ratio)
from reproduce.harness.evidence import Rounds, is_twin_label, twin_label
from reproduce.harness.experiment import experiment, experiment_names


@given(st.lists(st.floats(0.1, 1e4), min_size=1, max_size=40))
def test_a_system_over_itself_is_exactly_one_with_no_interval(values):
    rounds = dict(enumerate(values))
    assert paired_ratio(rounds, rounds) == (1.0, 1.0, 1.0, len(values))


def test_pairing_by_round_is_tight_where_the_unpaired_ratio_is_wide():
    """Both sides slow down together in some rounds (another tenant): per round the ratio is 1.2 every time; an
    unpaired interval (each side's median interval, divided corner by corner) spans the machine's drift."""
    drift = [1.0, 1.3, 0.8, 1.1, 0.9, 1.4, 1.0, 0.85]
    den = {r: 100.0 * d for r, d in enumerate(drift)}
    num = {r: 120.0 * d for r, d in enumerate(drift)}
    v, lo, hi, n = paired_ratio(num, den)
    assert (v, lo, hi, n) == pytest.approx((1.2, 1.2, 1.2, 8))
    _, nlo, nhi = median_interval(list(num.values()))
    _, dlo, dhi = median_interval(list(den.values()))
    assert nlo / dhi < 0.8 and nhi / dlo > 1.7  # unpaired: the whole drift


def test_rounds_of_different_points_pair_only_where_both_ran():
    v, lo, hi, n = paired_ratio({0: 2.0, 1: 4.0, 3: 9.0}, {0: 1.0, 1: 2.0, 2: 5.0})
    assert (v, lo, hi, n) == (2.0, 2.0, 2.0, 2)


@pytest.mark.parametrize("n", range(1, 40))
def test_the_order_statistic_interval_is_exact_and_named_for_its_confidence(n):
    k = order_k(n)
    cover = _coverage(n, k)
    if n >= 6:
        assert cover >= 0.95 and (k + 1 > (n + 1) // 2 or _coverage(n, k + 1) < 0.95)
        assert "95 % CI" in interval_name(n)
    else:  # too few rounds for 95 %: the range, with the confidence it has
        assert k == 1 and cover < 0.95 and "95 %" not in interval_name(n)
        assert ("range" if n > 1 else "no interval") in interval_name(n)
    x = list(np.arange(n, dtype=float)[::-1])
    med, lo, hi = median_interval(x)
    assert lo == k - 1 and hi == n - k and lo <= med <= hi
    assert interval_name(5) == "range of 5 rounds (94 % CI of the median)"


@settings(max_examples=50, deadline=None)
@given(st.integers(6, 40), st.integers(0, 2**31 - 1))
def test_the_median_interval_covers_the_true_median_about_as_often_as_it_says(n, seed):
    rng = np.random.default_rng(seed)
    hits = sum(lo <= 0.0 <= hi for lo, hi in (median_interval(rng.standard_normal(n))[1:] for _ in range(400)))
    assert hits / 400 >= 0.90  # a >= 95 % interval: well above 90 % over 400 draws


def test_within_noise_follows_the_interval_and_the_a_a_band():
    assert within_noise(0.95, 1.10, None) and not within_noise(1.02, 1.10, None)
    assert within_noise(1.02, 1.10, (0.97, 1.04))  # overlaps the A/A band: no verdict
    assert not within_noise(1.06, 1.10, (0.97, 1.04))
    assert within_noise(0.90, 0.96, (0.95, 1.02)) and not within_noise(float("nan"), 1.0, None)


def _reps(pairs: dict[str, list[float]], group=None, twin_of: str | None = None) -> pd.DataFrame:
    group = group or {"data": "d", "max_rows": 0, "rows": 0, "batch_size": 8, "mode": "embedding-only",
                      "optimizer": "sgd", "world_size": 1}
    rows = []
    for label, values in pairs.items():
        for r, v in enumerate(values):
            rows.append({**group, "label": label, "impl": label.split()[0], "point_id": label, "repeat": r,
                         "status": "ok", "total_ms": v, "threads": 1, "oversubscribed": False})
    return pd.DataFrame(rows)


def test_the_dagger_in_a_table_follows_the_interval():
    from reproduce.analysis.ratio_tables import Col, ratio_table

    a = [100, 130, 90, 110, 95, 120]
    reps = _reps({"x": [v * 1.3 for v in a], "y": a, "z": [v * (1.0 + 0.02 * (-1) ** i) for i, v in enumerate(a)]})
    lines = ratio_table(reps, [("data", "data")], [Col("x / y", "x", den="y"), Col("z / y", "z", den="y"),
                                                   Col("y / y", "y", den="y")])
    row = lines[2]
    assert "1.30×" in row and "1.30× †" not in row  # tight, away from 1
    assert "[0.98, 1.02] †" in row  # holds 1
    assert "| 1.00× |" in row  # a system over itself: no interval


def test_the_a_a_control_is_in_every_timed_set_beside_its_original():
    """A set that runs its points in several rounds is timed: it has a control, whose twin comes right after it
    under its own id and label."""
    from reproduce.harness.resolve import resolve

    timed = [n for n in experiment_names() if experiment(n).repeats > 1]
    assert {"sc24", "recsys24", "sc24_table1", "sc24_fig11", "table_size", "aa-schedule"} <= set(timed)
    for name in timed:
        exp = experiment(name)
        assert exp.control, name
        labels = [s.fields.get("label") or s.impl for s in exp.specs]
        i = labels.index(twin_label(exp.control))
        assert labels[i - 1] == exp.control and exp.specs[i].fields["twin"] == 1
    sweep = resolve(experiment("aa-schedule"), root=".", machine="test-machine")
    ids = [p.point_id for p in sweep.points]
    assert len(set(ids)) == 2 and [p.twin for p in sweep.points] == [0, 1]
    assert is_twin_label(sweep.points[1].label)


def test_headline_ratios_and_their_targets_by_the_cores_their_points_use():
    a = [100.0, 101, 99, 100, 102, 98]
    reps = _reps({"eco": a, "el": [v * 1.5 for v in a], twin_label("eco"): [v * 1.01 for v in a]})
    rows = headline(reps, [("el", "eco")], Rounds(), cores=2)
    assert [(r.num, r.den) for r in rows] == [("el", "eco"), (twin_label("eco"), "eco")]
    assert rows[0].target == 0.05 and rows[0].met and rows[0].value == pytest.approx(1.5)
    two = _reps({"eco": a, "el": [v * 1.5 for v in a]}, {**reps.iloc[0][["data", "max_rows", "rows", "batch_size",
                                                                          "mode", "optimizer"]].to_dict(),
                                                        "world_size": 2})
    assert headline(two, [("el", "eco")], Rounds(), cores=2)[0].target == 0.10  # fills the cores
    over = two.assign(oversubscribed=True)
    r = headline(over, [("el", "eco")], Rounds(), cores=2)[0]
    assert r.target is None and unresolved_labels(over, [("el", "eco")], Rounds(), 2) == []
    noisy = _reps({"eco": a, "el": [150.0, 190, 120, 160, 140, 170]})
    assert unresolved_labels(noisy, [("el", "eco")], Rounds(), 2)[0][1] == {"el", "eco"}


def test_the_headline_table_names_the_table_size_and_the_rounds_an_unreached_ratio_would_need():
    from reproduce.analysis.resolving import headline_lines, rounds_needed, shown_half_width

    a = [100.0, 101, 99, 100, 102, 98, 100, 103, 97, 100]
    noisy = [150.0, 190, 120, 160, 140, 170, 130, 185, 125, 165]
    group = {"data": "d", "max_rows": 0, "rows": 1_000_000, "batch_size": 8, "mode": "embedding-only",
             "optimizer": "sgd", "world_size": 1}
    reps = _reps({"eco": a, "el": noisy}, group)
    rounds = Rounds(budget_s=300, max_rounds=12)
    r = headline(reps, [("el", "eco")], rounds, cores=2)[0]
    assert r.where() == "d, 1,000,000 rows, batch 8, 1 rank(s)" and not r.met
    need = rounds_needed(r)
    assert need == int(np.ceil(10 * (r.half_width / 0.05) ** 2)) and need > 10
    lines = headline_lines(reps, [("el", "eco")], rounds, cores=2)
    assert f"no (~{need} rounds would)" in lines[2]
    assert "300 s of added rounds" in lines[-1] and "12 rounds" in lines[-1]
    split = "data 0.2 s, timed 1.0 s, launch and exit 0.1 s (medians)"
    assert headline_lines(reps, [("el", "eco")], rounds, 2, split)[-1].endswith(f"wall time went: {split}.")
    assert "wall time went" not in "".join(headline_lines(_reps({"eco": a, "el": a}, group), [("el", "eco")],
                                                          rounds, 2, split))  # every ratio reached: no note
    # a half-width a hair over its target reads over it (rounded up), never as equal to it
    assert [shown_half_width(w) for w in (0.10001, 0.1, 0.09951, 0.0123)] == ["10.1%", "10.0%", "10.0%", "1.3%"]


def _adaptive(tmp_path, monkeypatch, budget_s: float, resolved_after: int, schedule: str = "sequential",
              min_rounds: int = 1):
    """A two-point experiment with [rounds]; runs recorded by a stand-in; ``more`` names both points until
    ``resolved_after`` extra rounds ran (``more(required=True)``: while fewer than ``min_rounds`` rounds ran); the
    clock advances 10 s per run."""
    import reproduce.harness.sweep as sweep
    from reproduce.harness.resolve import load_experiment

    path = tmp_path / "e.toml"
    path.write_text(f"""
name = "e"
repeats = 2
control = {{ label = "dense-torch" }}
headline = [["ttrec", "dense-torch"]]
rounds = {{ budget_s = {budget_s}, max_rounds = 12, schedule = "{schedule}", min_rounds = {min_rounds} }}
[defaults]
mode = "embedding-only"
threads = 1
[grid]
impl = ["dense-torch", "ttrec"]
data = ["uniform"]
batch_size = [8]
[data_options]
num_tables = 1
rows = 100
dim = 4
""")
    exp = load_experiment(path, root=tmp_path)
    now, ran = [0.0], []

    def fake(exp_, point, repeat, force, timeout_s, starting, cores=None):
        now[0] += 10.0
        ran.append((point.label or point.impl, repeat, cores))
        return sweep.Outcome("ran")

    monkeypatch.setattr(sweep, "_claim_and_run", fake)
    extra = [0]

    def more(required=False):
        if required:
            return list(exp.points) if 1 + max(r for _, r, _ in ran) < min_rounds else []
        extra[0] += 1
        return list(exp.points) if extra[0] <= resolved_after else []

    sweep.run_experiment(exp, probe=False, more=more, clock=lambda: now[0])
    return ran, exp


def test_rounds_are_added_until_the_ratios_resolve(tmp_path, monkeypatch):
    ran, exp = _adaptive(tmp_path, monkeypatch, budget_s=10_000, resolved_after=4)
    assert max(r for _, r, _ in ran) == 2 + 4 - 1  # 2 rounds, then 4 more, then resolved
    assert len(ran) == len(exp.points) * 6


def test_rounds_stop_when_the_budget_would_be_overrun(tmp_path, monkeypatch):
    ran, exp = _adaptive(tmp_path, monkeypatch, budget_s=65, resolved_after=100)
    extra = [r for _, r, _ in ran if r >= 2]
    # 3 points a round at 10 s each: 2 rounds fit in 65 s; the third would have overrun it
    assert len(extra) == 2 * len(exp.points)


def test_rounds_below_the_minimum_run_past_the_budget(tmp_path, monkeypatch):
    """min_rounds = 6: after 2 rounds and a budget that fits 2 more, the points still below 6 rounds get them."""
    ran, exp = _adaptive(tmp_path, monkeypatch, budget_s=65, resolved_after=100, min_rounds=6)
    assert max(r for _, r, _ in ran) == 5 and len(ran) == 6 * len(exp.points)


def test_the_minimum_of_rounds_is_checked():
    with pytest.raises(ValueError, match="min_rounds must lie in"):
        Rounds(min_rounds=50, max_rounds=40)


def test_duet_rounds_pair_runs_on_disjoint_halves_that_swap_every_round(tmp_path, monkeypatch):
    import reproduce.harness.sweep as sweep

    monkeypatch.setattr(sweep, "machine_cores", lambda: (0, 1))
    ran, exp = _adaptive(tmp_path, monkeypatch, budget_s=0, resolved_after=0, schedule="duet")
    by_round = {}
    for label, r, cores in ran:
        by_round.setdefault(r, {})[label] = cores
    first = by_round[0]
    held = [c for c in first.values() if c is not None]
    assert sorted(held) == [(0,), (1,)]  # one pair on the two cores, the third run alone
    pair = sorted(label for label, c in first.items() if c is not None)
    assert pair == ["dense-torch", twin_label("dense-torch")]
    points = {p.label or p.impl: p for p in exp.points}
    units = [[(points[a], r), (points[b], r)] for r, (a, b) in enumerate([pair, pair[::-1], pair])]
    halves = [dict(zip(u and [x[0].label or x[0].impl for x in u], sweep.unit_cores(u, (0, 1)))) for u in units]
    assert halves[0] != halves[1] and halves[0] == halves[2]  # the same pair swaps halves every round


def test_aggregates_over_groups_take_a_bootstrap_that_spans_the_groups_for_a_median():
    groups = [({r: v * 1.0 for r, v in enumerate([1, 1, 1, 1, 1, 1])}, {r: 1.0 for r in range(6)}, 1.0)]
    value, lo, hi, per = aggregate_interval(groups, "max")
    assert value == lo == hi == 1.0 and per == [1.0]
    spread = [({r: s for r in range(6)}, {r: 1.0 for r in range(6)}, 1.0) for s in (0.7, 1.0, 1.2, 1.5)]
    value, lo, hi, _ = aggregate_interval(spread, "median")
    assert lo == pytest.approx(0.7) and hi == pytest.approx(1.5) and value == pytest.approx(1.1)
    value, lo, hi, _ = aggregate_interval(spread, "max")
    assert value == lo == hi == 1.5  # the same settings, no repeat noise: exact


def test_an_exact_claim_is_judged_exactly():
    from reproduce.analysis.claims import exact_verdict

    assert exact_verdict(117.3, 117.0) == "reproduced" and exact_verdict(95.5, 112.0) == "differs"
    assert exact_verdict(111.6, 112.0) == "reproduced" and exact_verdict(110.0, 112.0) == "differs"


def test_the_timed_profiles_use_the_schedule_the_a_a_comparison_chose():
    """Duet where it measured tighter and every ratio's sides can be partners; sequential where a point is a side of
    several ratios (a co-scheduled run's time depends on its partner)."""
    from pathlib import Path

    from reproduce.analysis.resolving import chosen_schedule, tighter_schedule
    from reproduce.harness.machine import reference_machine

    root = Path(__file__).resolve().parents[2]
    tighter = tighter_schedule(root, reference_machine(root / "results"))
    if tighter is None:
        pytest.skip("the aa-schedule sets are not both committed")
    for name in ("sc24", "recsys24"):
        assert experiment(name).rounds.schedule == chosen_schedule(experiment(name), tighter), name
    assert chosen_schedule(experiment("aa-schedule"), "duet") == "duet"
    assert chosen_schedule(experiment("sc24"), "duet") == "sequential"  # EcoRec is a side of three pairs
