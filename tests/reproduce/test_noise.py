"""The noise probe's per-core window drift: it covers every core and both kinds of fixed work, restores the process's
affinity and thread count, and reaches the report's noise block; probes written before it existed still read."""
import json
import os

import pytest
import torch

from reproduce.analysis.report import noise_lines
from reproduce.harness.noise import WORK, noise_level, window_drift

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")


def test_window_drift_covers_each_core_and_restores_the_process():
    mask, threads = os.sched_getaffinity(0), torch.get_num_threads()
    w = window_drift(seconds=0.4, window_s=0.2)  # windows long enough for a few samples on a loaded core
    assert os.sched_getaffinity(0) == mask and torch.get_num_threads() == threads
    assert set(w["cores"]) == {str(c) for c in mask}
    for per in w["cores"].values():
        assert set(per) == set(WORK)
        for kind in WORK:
            meds = per[kind]["window_ms"]
            assert meds and min(meds) > 0 and per[kind]["samples"] >= 3 * len(meds)
            assert 0 <= per[kind]["stalls"] < per[kind]["samples"]
            assert per[kind]["spread"] == pytest.approx(max(meds) / min(meds) - 1)
    assert w["spread"] == {k: max(c[k]["spread"] for c in w["cores"].values()) for k in WORK}


def _probe(spread, windows=None):
    p = {"gflops": [100.0], "gflops_median": 100.0, "spread": spread, "loadavg": [1.0, 1.0, 1.0], "cores": 2,
         "threads": 1}
    if windows is not None:
        p["windows"] = {"spread": windows, "cores": {"0": {k: {"samples": 8} for k in windows}}}
    return p


def test_noise_level_takes_the_largest_window_drift_and_reads_older_probes(tmp_path):
    assert noise_level([_probe(0.05)])["window"] is None
    level = noise_level([_probe(0.05, {"compute": 0.1, "memory": 0.3}), _probe(0.02, {"compute": 0.2, "memory": 0.1}),
                         _probe(0.03)])
    assert level["window"] == {"compute": 0.2, "memory": 0.3}
    assert level["noise"] == pytest.approx(0.05)  # the † rule keeps the SGEMM's spread
    older = _probe(0.05, {"compute": 28.9, "memory": 0.3})  # windows without sample counts: before MIN_SAMPLES
    del older["windows"]["cores"]["0"]["compute"]["samples"]
    assert noise_level([older])["window"] is None

    noise = tmp_path / "results" / "sc24" / "m1" / "noise"
    noise.mkdir(parents=True)
    (noise / "a.json").write_text(json.dumps(_probe(0.05, {"compute": 0.12, "memory": 0.34})))
    lines = noise_lines(tmp_path, ["m1"])
    assert len(lines) == 3 and "| 12% / 34% |" in lines[2]
