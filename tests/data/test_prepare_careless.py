"""`data prepare` for a careless or unlucky user (issue 59, the data cases): a symlinked --out is written through to the
folder it names; a device too small is one DiskFull line with nothing left behind (never a SIGBUS), a full device at
the lock too; a raw file that changes while it is read is one error naming it; a truncated Parquet or gzip file is
named and counted as a file, not as malformed lines; a label column read with no rule where many values are not 0/1
fails with the rule that is likely wanted; --strict refuses NUL bytes; the hint to train quotes its path."""
from __future__ import annotations

import errno
import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from impls.data import lockfile, safe_write
from impls.data.staging import InputChanged
from impls.data.tabular import prepare_tabular
from impls.data.textio import MalformedInput
from reproduce.cli import cli
from tests.data.clicklog import write_clicklog
from tests.data.test_tabular import schema, write_csv

pa = pytest.importorskip("pyarrow")
PREPARE = ["data", "prepare", "tabular", "--label", "rating>=4", "--dense", "hour", "--categorical",
           "user,item,genre:sep=|", "--split", "random:0:0.8"]


def _prepare(raw: Path, out: Path, *extra: str):
    return CliRunner().invoke(cli, [*PREPARE, "--raw", str(raw), "--out", str(out), *extra], terminal_width=400)


def _nothing_left(out: Path) -> None:
    siblings = sorted(p.name for p in out.parent.iterdir() if p.name.startswith(out.name))
    assert siblings == [], siblings


# ---- 6. a symlinked --out


def test_a_symlinked_out_is_written_to_the_folder_it_names(tmp_path):
    raw = write_clicklog(tmp_path / "log.csv", 300)
    target, link = tmp_path / "real", tmp_path / "link"
    target.mkdir()
    link.symlink_to(target)
    res = _prepare(raw, link)
    assert res.exit_code == 0, res.output
    assert link.is_symlink() and (target / "COMPLETE").is_file() and (target / "meta.json").is_file()
    assert not (tmp_path / "link.partial").exists() and not (tmp_path / "real.partial").exists()
    again = _prepare(raw, link)  # the same inputs: reused through the link
    assert again.exit_code == 0 and "already complete: reused" in again.output, again.output


def test_a_symlinked_out_to_nothing_or_a_file_is_refused(tmp_path):
    raw = write_clicklog(tmp_path / "log.csv", 300)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "file").write_text("mine\n")
    (tmp_path / "to-file").symlink_to(tmp_path / "file")
    for link, said in (("dangling", "is a symbolic link to nothing"), ("to-file", "is a file")):
        res = _prepare(raw, tmp_path / link)
        assert res.exit_code == 2 and said in res.output, res.output
    assert (tmp_path / "file").read_text() == "mine\n" and not (tmp_path / "nowhere").exists()


def test_a_symlinked_staging_folder_is_refused_untouched(tmp_path):
    raw = write_clicklog(tmp_path / "log.csv", 300)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "keep.txt").write_text("mine\n")
    (tmp_path / "out.partial").symlink_to(tmp_path / "mine")
    res = _prepare(raw, tmp_path / "out")
    assert res.exit_code == 2 and "is a symbolic link" in res.output, res.output
    assert (tmp_path / "mine" / "keep.txt").read_text() == "mine\n" and not (tmp_path / "out").exists()


# ---- 7. a device too small, or full


def test_a_device_too_small_for_the_arrays_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(safe_write.os, "posix_fallocate", full)
    raw = write_clicklog(tmp_path / "log.csv", 300)
    res = _prepare(raw, tmp_path / "out")
    assert res.exit_code == 1 and "no space left on the device holding" in res.output, res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1, res.output
    _nothing_left(tmp_path / "out")


def test_a_full_device_at_the_lock_is_one_line(tmp_path, monkeypatch):
    def full(path, text, what=""):
        Path(path).touch()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(lockfile, "write_text", full)
    res = _prepare(write_clicklog(tmp_path / "log.csv", 300), tmp_path / "out")
    assert res.exit_code == 1 and "no space left on the device holding" in res.output, res.output
    _nothing_left(tmp_path / "out")


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 2 MiB tmpfs (root only; skipped where mounting is not allowed)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if not shutil.which("mount") or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                                                  capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_prepare_onto_a_tiny_tmpfs_says_disk_full_not_sigbus(tmp_path, small_tmpfs):
    n = 200_000  # arrays of about 7 MiB: more than the device holds (written vectorized: the log's content is moot)
    i = np.arange(n)
    rows = np.char.add(np.char.add(i.astype(str), ",u"), (i % 300).astype(str))
    for col in (np.char.add(",i", (i % 5000).astype(str)), np.full(n, ",a|b"), np.char.add(",", (i % 24).astype(str)),
                np.char.add(",", (i % 5 + 1).astype(str))):
        rows = np.char.add(rows, col)
    raw = tmp_path / "log.csv"
    raw.write_text("ts,user,item,genre,hour,rating\n" + "\n".join(rows.tolist()) + "\n")
    cmd = [sys.executable, "-m", "reproduce", *PREPARE, "--raw", str(raw), "--out", str(small_tmpfs / "prep")]
    for _ in range(2):  # and again on the still-full device: the same line
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert out.returncode == 1, (out.returncode, out.stdout, out.stderr)  # not -7 (SIGBUS)
        assert "no space left on the device holding" in out.stdout + out.stderr and "Traceback" not in out.stderr
        assert sorted(os.listdir(small_tmpfs)) == []  # nothing left behind: no lock, no staging folder


# ---- 10. a raw file that changes while it is read


def test_a_file_appended_to_while_it_is_read_is_one_error_naming_it(tmp_path):
    raw = write_csv(tmp_path / "c.csv")
    grew = []

    def append_once(_bytes):
        if not grew:
            with open(raw, "a") as f:
                f.write("6,u4,i4,a,5,60.0,5\n")
            grew.append(True)

    with pytest.raises(InputChanged, match="raw file\\(s\\) c.csv changed while being read"):
        prepare_tabular([raw], schema(split="random:0:0.6"), tmp_path / "out", progress=append_once)
    _nothing_left(tmp_path / "out")


# ---- 11. a truncated Parquet or gzip file


def _parquet(path: Path, n: int) -> Path:
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    write_clicklog(path.with_suffix(".src"), n)
    pq.write_table(pcsv.read_csv(path.with_suffix(".src")), path)
    path.with_suffix(".src").unlink()
    return path


def test_a_truncated_parquet_file_is_named_and_counted_as_a_file(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    write_clicklog(raw / "a.csv", 600)
    bad = _parquet(raw / "b.parquet", 600)
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    res = _prepare(raw, tmp_path / "out")
    assert res.exit_code == 0, res.output
    assert "raw file b.parquet: dropped" in res.output and "malformed line" not in res.output, res.output
    strict = _prepare(raw, tmp_path / "strict", "--strict")
    assert strict.exit_code == 2 and "b.parquet" in strict.output, strict.output


def test_a_truncated_gzip_file_in_a_folder_is_counted_as_a_file_not_as_lines(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    write_clicklog(raw / "a.csv", 600)
    text = write_clicklog(tmp_path / "b.csv", 8_300).read_bytes()
    packed = gzip.compress(text)
    (raw / "b.csv.gz").write_bytes(packed[: len(packed) * 2 // 5])
    res = _prepare(raw, tmp_path / "out")
    assert res.exit_code == 0, res.output
    assert "raw file b.csv.gz" in res.output and "malformed line" not in res.output, res.output
    with pytest.raises(MalformedInput, match="b.csv.gz"):
        prepare_tabular(sorted(raw.iterdir()), schema(label="rating>=4", dense="hour", categorical="user,item",
                                                     split="random:0:0.8"), tmp_path / "strict", strict=True)


# ---- 12. a label with many values that are not a label, and NUL bytes


def test_a_count_label_read_with_no_rule_fails_with_the_rule_to_give(tmp_path):
    raw = write_clicklog(tmp_path / "log.csv", 2_000)  # ratings 1..5
    res = CliRunner().invoke(cli, ["data", "prepare", "tabular", "--raw", str(raw), "--out", str(tmp_path / "out"),
                                   "--label", "rating", "--categorical", "user,item", "--split", "random"],
                             terminal_width=400)
    assert res.exit_code == 2 and "have a value that is not a label" in res.output, res.output
    assert "--label 'rating>=1'" in res.output
    _nothing_left(tmp_path / "out")


def test_strict_refuses_a_nul_byte_naming_the_line(tmp_path):
    rows = [("1", "u1", "i1", "a", 3, 20.0, 5), ("2", "u\x002", "i1", "b", 7, 30.0, 2),
            ("3", "u3", "i2", "a", 1, 20.0, 4), ("4", "u1", "i3", "b", 0, 40.0, 1)]
    raw = write_csv(tmp_path / "n.csv", rows)
    with pytest.raises(MalformedInput, match="n.csv:3: user: a NUL byte"):
        prepare_tabular([raw], schema(split="random:0:0.5"), tmp_path / "strict", strict=True)
    meta = prepare_tabular([raw], schema(split="random:0:0.5"), tmp_path / "lenient")
    assert sum(meta.rows.values()) == 4


# ---- 14. the hint to train names a path with spaces quoted


def test_the_train_hint_quotes_a_path_with_spaces(tmp_path):
    out = tmp_path / "my data" / "prep"
    out.parent.mkdir()
    res = _prepare(write_clicklog(tmp_path / "log.csv", 300), out)
    assert res.exit_code == 0 and f"--data '{out}'" in res.output, res.output
