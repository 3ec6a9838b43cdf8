"""Fault suite, data folders (impls/data/staging.py): one writer per --out, a finished folder reused only for the
same content key and otherwise refused naming each difference, never replaced, and nothing of the user's deleted or
overwritten - by `data synth`, `data prepare` (criteo and tabular) and `data reorder`."""
import json
import os
import socket
import subprocess
import sys

import pytest
from click.testing import CliRunner

from impls.data.export import write_synthetic
from impls.data.prepare import prepare_criteo
from impls.data.presets import get_preset
from impls.data.staging import MARKER
from reproduce.cli import cli
from tests.data.test_criteo import write_kaggle
from tests.data.test_tabular import schema, write_csv

SPEC = dict(num_tables=2, rows=50, dim=4, hotness=2)
SYNTH = ["--num-tables", "2", "--rows", "50", "--dim", "4"]


def files_of(path):
    return {p.relative_to(path): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def test_synth_over_a_prepared_dataset_with_a_users_file_keeps_both(tmp_path):
    """Case 1: `data synth --out D`, D a prepared dataset holding a user's notes: refused, nothing deleted."""
    raw = tmp_path / "train.txt"
    write_kaggle(raw, 30)
    out = tmp_path / "d"
    prepare_criteo("k", [raw], out, "kaggle")
    (out / "notes.txt").write_text("what I found")
    before = files_of(out)
    res = CliRunner().invoke(cli, ["data", "synth", "uniform", "--out", str(out), "--samples", "16", *SYNTH])
    assert res.exit_code == 2 and "made from other inputs" in res.output and "kind" in res.output, res.output
    assert files_of(out) == before and not (tmp_path / "d.partial").exists()


def test_a_second_writer_is_refused_naming_the_holder_and_a_stale_lock_is_taken_over(tmp_path):
    """Case 2, deterministically: a live process holds --out's lock: the second prepare is refused naming it and
    touches nothing; once that process is gone its lock is stale and taken over."""
    raw = tmp_path / "train.txt"
    write_kaggle(raw, 30)
    out = tmp_path / "p"
    holder = subprocess.Popen(["sleep", "60"])
    try:
        (tmp_path / "p.lock").write_text(f"{holder.pid} {socket.gethostname()}\n")
        with pytest.raises(ValueError, match=f"--out {out} is being written by process {holder.pid}"):
            prepare_criteo("k", [raw], out, "kaggle")
        assert not out.exists() and not (tmp_path / "p.partial").exists()
    finally:
        holder.kill()
        holder.wait()
    meta = prepare_criteo("k", [raw], out, "kaggle")
    assert sum(meta.rows.values()) == 30 and (out / "train").is_dir() and not (tmp_path / "p.lock").exists()


def test_two_prepares_started_together_leave_one_complete_dataset(tmp_path):
    """Case 2, racing: two `data prepare tabular` runs with different flags into one --out, started together. Each
    either prepares, or is refused (the other holds the lock, or finished first with other inputs); the folder ends
    complete with its splits, and a rerun of the winner reuses it."""
    raw = tmp_path / "clicks.csv"
    from tests.data.clicklog import write_clicklog

    write_clicklog(raw, 20_000)
    out = tmp_path / "prep"
    base = [sys.executable, "-m", "reproduce", "data", "prepare", "tabular", "--raw", str(raw), "--out", str(out),
            "--label", "rating>=4", "--dense", "hour", "--split", "random:0:0.8"]
    cmds = [base + ["--categorical", "user,item,genre:sep=|"], base + ["--categorical", "user,item"]]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for c in cmds]
    outs = [(p.wait(timeout=600), p.stdout.read()) for p in procs]
    won = [i for i, (code, _) in enumerate(outs) if code == 0]
    assert len(won) >= 1, outs
    for code, text in outs:
        assert code == 0 or (code == 2 and ("is being written by process" in text or "made from other inputs" in text)
                             ), text
    assert (out / MARKER).is_file() and (out / "train" / "labels.npy").is_file() and (out / "val").is_dir()
    again = subprocess.run(cmds[won[0]], capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "already complete: reused" in again.stdout, again.stdout + again.stderr
    assert not (tmp_path / "prep.lock").exists() and not (tmp_path / "prep.partial").exists()


def test_reorder_into_a_folder_of_user_files_is_refused(tmp_path):
    """Case 3: `data reorder --out D` with the user's files in D: refused, untouched; into a new folder it is
    written, and the same command again reuses it."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "t0.npy").write_bytes(b"my own array")
    before = files_of(mine)
    args = ["data", "reorder", "uniform", "--table", "t0", "--batches", "1", "-b", "64", *SYNTH]
    res = CliRunner().invoke(cli, [*args, "--out", str(mine)])
    assert res.exit_code == 2 and "refusing to overwrite" in res.output and files_of(mine) == before, res.output
    res = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "r")])
    assert res.exit_code == 0 and "wrote" in res.output, res.output
    res = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "r")])
    assert res.exit_code == 0 and "reused" in res.output, res.output
    res = CliRunner().invoke(cli, [*args, "--seed", "3", "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and "seed: made from 0, asked 3" in res.output, res.output


def test_reuse_compares_the_raw_bytes_and_the_strict_flag(tmp_path):
    """Case 4: the same raw name and size with other content (every label flipped) is refused, naming the file;
    --strict on a dataset prepared without it is refused, naming strict; the key is stored in meta.json."""
    raw = write_csv(tmp_path / "clicks.csv")
    out = tmp_path / "p"
    from impls.data.tabular import prepare_tabular

    first = prepare_tabular([raw], schema(), out)
    assert json.loads((out / "meta.json").read_text())["key"]["raw files"][0][2] == first.key["raw files"][0][2]
    text = raw.read_text()
    flipped = text.replace(",5\n", ",X\n").replace(",2\n", ",5\n").replace(",X\n", ",2\n")
    assert len(flipped) == len(text) and flipped != text
    raw.write_text(flipped)
    with pytest.raises(ValueError, match=r"raw file clicks.csv: same size, other content \(sha256 "):
        prepare_tabular([raw], schema(), out)
    raw.write_text(text)
    assert prepare_tabular([raw], schema(), out) == first  # the same bytes: reused
    with pytest.raises(ValueError, match="strict: made from false, asked true"):
        prepare_tabular([raw], schema(), out, strict=True)


def test_an_output_of_an_older_version_is_not_reused_blindly(tmp_path):
    out = tmp_path / "d"
    write_synthetic("u", get_preset("uniform", **SPEC), out, 8)
    (out / MARKER).write_text("ok\n")  # a marker from before outputs carried their key
    with pytest.raises(ValueError, match="cannot be told whether it matches"):
        write_synthetic("u", get_preset("uniform", **SPEC), out, 8)


def test_a_lock_of_another_host_is_never_taken_over(tmp_path):
    from impls.data.lockfile import Locked, acquire

    lock = tmp_path / "x.lock"
    lock.write_text(f"{os.getpid() + 1_000_000} some-other-host\n")  # no such pid here: it may be alive there
    with pytest.raises(Locked, match="on host some-other-host"):
        acquire(lock, "x is being written")


def test_a_lock_being_created_is_not_taken_over(tmp_path):
    """A lock exists the moment it is linked in with its holder's pid; a lock file that is empty (a file system
    without hard links, between its creation and its write) counts as held while young, as stale when old."""
    from impls.data.lockfile import Locked, acquire, release

    lock = tmp_path / "y.lock"
    lock.write_text("")
    with pytest.raises(Locked, match="just created"):
        acquire(lock, "y is being written")
    os.utime(lock, (1, 1))  # long ago: its creator died before writing its pid
    assert acquire(lock, "y is being written") == lock and lock.read_text().split()[0] == str(os.getpid())
    release(lock)
    assert not lock.exists() and not list(tmp_path.glob(".*tmp"))
