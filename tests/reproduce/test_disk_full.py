"""A full disk: a record that cannot be written ends the command with a message naming the folder (no traceback), and
no temporary file is left behind (the record's, or a lock's)."""
import errno
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from impls.data import lockfile
from reproduce.cli import cli
from reproduce.harness import record_store
from reproduce.harness.record_store import DiskFull, write_record
from reproduce.harness.records import Record


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_record_on_a_full_disk_says_so_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    monkeypatch.setattr(record_store.os, "fsync", _full)
    with pytest.raises(DiskFull, match=f"no space left on the device holding {tmp_path}"):
        write_record(tmp_path / "p.r0.json", Record.failed({"impl": "x"}, "why", point_id_="p"))
    assert list(tmp_path.iterdir()) == []


def test_a_lock_on_a_full_disk_says_so_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    def write_then_fail(path, text, what=""):
        Path(path).touch()  # the file is created, its content is not
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(lockfile, "write_text", write_then_fail)
    with pytest.raises(DiskFull, match=f"no space left on the device holding {tmp_path}"):
        lockfile.acquire(tmp_path / "r.json.lock", "r.json is being run")
    assert list(tmp_path.iterdir()) == []


def test_run_ends_with_a_message_not_a_traceback(tmp_path, monkeypatch):
    monkeypatch.setattr(record_store.os, "fsync", _full)  # the launcher's writes (the worker is another process)
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["run", "--impl", "dense-torch", "--data", "uniform", "--num-tables", "2",
                                   "--rows", "100", "--dim", "4", "-b", "8", "--iters", "1", "--warmup", "0",
                                   "--mode", "embedding-only", "--out", str(out)])
    assert res.exit_code == 1 and "no space left on the device" in res.output, res.output
    assert isinstance(res.exception, SystemExit) and "Traceback" not in res.output  # a message, not an OSError
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")], sorted(os.listdir(out))
