"""A set's sweep time is counted one way: each sweep from its first noise probe to its closing one, summed over the
sweeps of a resumed set; a sweep that ended without its closing probe makes the set's time unknown, never 0 s."""
import json

from reproduce.analysis.durations import sweep_span_s
from reproduce.harness.noise import NOISE_DIR


def _probes(out, *stamped):
    folder = out / NOISE_DIR
    folder.mkdir(parents=True)
    for i, (when, stage) in enumerate(stamped):
        (folder / f"{i:02d}.json").write_text(json.dumps({"when": f"2026-12-04T{when}+00:00", "stage": stage}))


def test_each_sweep_counts_from_its_first_probe_to_its_closing_one(tmp_path):
    _probes(tmp_path, ("10:00:00", "before"), ("10:01:00", "round 1"), ("10:02:00", "after"),
            ("11:00:00", "before"), ("11:00:30", "after"))
    assert sweep_span_s(tmp_path) == 150.0


def test_a_sweep_without_its_closing_probe_makes_the_time_unknown(tmp_path):
    _probes(tmp_path, ("10:00:00", "before"), ("10:45:00", "before"), ("10:58:00", "after"))
    assert sweep_span_s(tmp_path) is None
