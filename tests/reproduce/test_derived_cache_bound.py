"""The derived cache is bounded and cleared (reproduce/harness/derived_cache.py): a hit marks its entry used, pruning
keeps the most recently used entries, and clear() (make clean) removes every entry and nothing else."""
from __future__ import annotations

import os
from pathlib import Path

from reproduce.harness import derived_cache as dc

RULE = Path(dc.__file__)


def test_prune_keeps_the_most_recently_used_and_clear_leaves_other_files(tmp_path, monkeypatch):
    monkeypatch.setenv("DLRMBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(dc, "_pruned", True)  # this test prunes by hand
    for i in range(5):
        assert dc.derived("t", RULE, f"source {i}".encode(), lambda i=i: i) == i
    found = sorted(dc.entries(), key=lambda f: f.stat().st_mtime_ns)
    assert len(found) == 5
    for k, f in enumerate(found):  # distinct ages, the first the oldest
        os.utime(f, ns=(10**18 + k * 10**9, 10**18 + k * 10**9))
    oldest = found[0]
    dc.derived("t", RULE, b"source 0", lambda: 0)  # a hit: entry 0 becomes the most recent
    assert oldest.stat().st_mtime_ns > found[-1].stat().st_mtime_ns
    assert dc.prune(3) == 2
    kept = set(dc.entries())
    assert oldest in kept and len(kept) == 3
    (tmp_path / "notes.txt").write_text("mine")
    assert dc.clear() == 3 and not dc.entries()
    assert (tmp_path / "notes.txt").read_text() == "mine" and not [d for d in tmp_path.iterdir() if d.is_dir()]


def test_a_miss_prunes_when_the_last_pruning_is_old(tmp_path, monkeypatch):
    monkeypatch.setenv("DLRMBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(dc, "MAX_ENTRIES", 2)
    monkeypatch.setattr(dc, "_pruned", True)
    for i in range(4):
        dc.derived("t", RULE, f"s{i}".encode(), lambda: 0)
    assert len(dc.entries()) == 4
    (tmp_path / dc.MARKER).touch()  # pruned just now: a new process's miss leaves the folder as it is
    monkeypatch.setattr(dc, "_pruned", False)
    dc.derived("t", RULE, b"a new file version", lambda: 0)
    assert len(dc.entries()) == 5 and dc._pruned
    os.utime(tmp_path / dc.MARKER, (0, 0))  # pruned long ago: the next process's first miss prunes
    monkeypatch.setattr(dc, "_pruned", False)
    dc.derived("t", RULE, b"another file version", lambda: 0)
    assert len(dc.entries()) == 2
