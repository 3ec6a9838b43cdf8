"""The report's rank statistics: Spearman with its bootstrap interval, and the within-job pair ordering."""
import math

import pandas as pd

from reproduce.analysis.stats import ordered_pairs, spearman_ci


def test_spearman_of_a_monotone_pairing_is_one_with_a_tight_interval():
    rho, lo, hi = spearman_ci([1, 2, 3, 4, 5, 6], [10, 20, 30, 40, 50, 60])
    assert rho == 1.0 and math.isclose(lo, 1.0) and math.isclose(hi, 1.0)
    rho, _, _ = spearman_ci([1, 2, 3, 4], [4, 3, 2, 1])
    assert rho == -1.0
    assert all(math.isnan(x) for x in spearman_ci([1, 2], [1, 2]))


def test_ordered_pairs_counts_only_pairs_of_the_same_job():
    df = pd.DataFrame({
        "data": ["a", "a", "a", "b", "b"],
        "world_size": [4, 4, 4, 4, 4],
        "predicted_step_ms": [1.0, 2.0, 3.0, 5.0, 5.0],  # b: a predicted tie counts as wrong
        "total_ms": [10.0, 30.0, 20.0, 1.0, 2.0],
    })
    # job a: (1,2) right, (1,3) right, (2,3) wrong; job b: tie -> wrong; no cross-job pairs
    assert ordered_pairs(df, ["data", "world_size"]) == (2, 4)
    # beyond a 60 % gap: (10, 30) and (10, 20) right, (1, 2) a tie; (30, 20) differ by 50 %: left out
    assert ordered_pairs(df, ["data", "world_size"], gap=0.6) == (2, 3)


def test_repeat_spread_is_max_over_min_per_point():
    import pandas as pd

    from reproduce.analysis.ratio_tables import repeat_spread

    ok = pd.DataFrame({"point_id": ["a", "a", "b", "b", "b"], "total_ms": [100.0, 110.0, 10.0, 12.0, 11.0],
                       "cpu_ms": [90.0, 90.0, 9.0, 9.0, 9.0]})
    line = repeat_spread(ok)
    assert "wall time median 15%, max 20%" in line and "CPU time median 0%, max 0%" in line


def test_planner_choices_name_the_plan_each_point_ran_and_what_was_set_aside():
    from reproduce.analysis.set_blocks import planner_choices

    reps = pd.DataFrame([
        {"status": "ok", "label": "embark planner", "data": "t180", "world_size": 2, "plan_start": "round_robin",
         "plan_moves": 0, "plan_set_aside": "balanced"},
        {"status": "ok", "label": "embark planner", "data": "t510", "world_size": 4, "plan_start": "hugectr",
         "plan_moves": 3, "plan_set_aside": float("nan")},
        {"status": "ok", "label": "round_robin", "data": "t180", "world_size": 2, "plan_start": float("nan"),
         "plan_moves": float("nan"), "plan_set_aside": float("nan")}])
    (_, line) = planner_choices(reps)
    assert "t180 x2: round_robin (balanced set aside)" in line and "t510 x4: hugectr + 3 moves;" not in line
    assert line.endswith("t510 x4: hugectr + 3 moves.")
    assert planner_choices(reps.drop(columns=["plan_start"])) == []
