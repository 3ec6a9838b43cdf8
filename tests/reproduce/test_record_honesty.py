"""Fault suite, records that do not lie: quartiles stay within the data; a SIGKILL is `oom` only when the kernel's
OOM-kill counter says so, else `failed` with "killed (signal 9)"."""
import signal

from reproduce.harness import launch
from reproduce.harness.point import RunPoint
from reproduce.harness.record_store import read_record
from reproduce.harness.worker import _stats


def test_quartiles_stay_within_the_data():
    s = _stats([10.0, 11.0, 30.0])
    assert 10.0 <= s["p25"] <= s["median"] <= s["p75"] <= 30.0 and s["min"] == 10.0
    assert _stats([5.0]) == {"median": 5.0, "p25": 5.0, "p75": 5.0, "iqr": 0.0, "min": 5.0}


def test_sigkill_is_oom_only_with_the_kernels_word(tmp_path, monkeypatch):
    p = RunPoint(impl="dense-torch", data="uniform", batch_size=8)
    log = tmp_path / "x.log"
    log.write_text("")
    killed = launch.finish_point(p, tmp_path / "a.r0.json", log, -signal.SIGKILL, None)
    assert killed.status == "failed" and killed.reason.startswith("killed (signal 9)")
    oom = launch.finish_point(p, tmp_path / "b.r0.json", log, -signal.SIGKILL, None, oom=True)
    assert oom.status == "oom" and "OOM killer" in oom.reason
    assert read_record(tmp_path / "b.r0.json").status == "oom"
    counter = tmp_path / "memory.events"
    counter.write_text("low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\n")
    monkeypatch.setattr(launch, "OOM_COUNTERS", (tmp_path / "missing", counter))
    assert launch.oom_kills() == 2
    monkeypatch.setattr(launch, "OOM_COUNTERS", (tmp_path / "missing",))
    assert launch.oom_kills() is None
