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
