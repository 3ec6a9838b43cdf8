"""`dlrmbench check-system`: the conformance suite any system, ours or one from outside, passes or fails by name
(checks.py; the cases in cases.py, the float64 oracles in oracle.py, the 2-rank check in ranks.py)."""
