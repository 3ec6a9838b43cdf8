"""A careless or unlucky user loses nothing (issue 59, the harness's cases): a rerun keeps the finished record until the
new one is complete (killed outright part-way, the old one is there, byte for byte); nothing is written through a
symbolic link (a record, a log, a lock), and a sweep records such a point as failed and goes on; a point id states
every option its point states, and a record that contradicts its name is refused naming the file; a resumed sweep
clears the locks of dead holders (a reused pid included); a run that failed for lack of disk space is redone; a
record field of the wrong type is named with its file; option values are refused before any process starts."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from impls.data import lockfile
from reproduce.cli import cli
from reproduce.harness.fault import FAULT_ENV
from reproduce.harness.launch import finish_point
from reproduce.harness.point import RunPoint
from reproduce.harness.record_store import (DiskFull, check_identity, log_path, pending_path, read_record, record_path,
                                            write_json, write_record)
from reproduce.harness.records import Record
from reproduce.harness.resolve import load_experiment
from reproduce.harness.sweep import is_done, plan, tidy_set, todo, unreadable
from tests.reproduce.test_sweep import dry_run, experiment, sweep_here, workers_of

ROOT = Path(__file__).resolve().parents[2]
RUN = ["run", "--impl", "dense-fbgemm", "--data", "uniform", "--num-tables", "2", "--rows", "100", "--dim", "4", "-b",
       "8", "--iters", "2", "--warmup", "0", "--mode", "embedding-only"]
POINT = RunPoint(impl="dense-fbgemm", data="uniform", batch_size=8, iters=2, warmup=0, mode="embedding-only",
                 data_options={"num_tables": 2, "rows": 100, "dim": 4})


def _run(out: Path, *extra: str):
    return CliRunner().invoke(cli, [*RUN, "--out", str(out), *extra], terminal_width=200)


def _record(out: Path) -> Path:
    (rec,) = sorted(out.glob("*.json"))
    return rec


def _leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.rglob("*") if p.name.endswith((".new", ".lock", ".tmp", ".progress")))


# ---- 1. a rerun keeps the finished record until the new one is complete


def test_a_rerun_killed_outright_leaves_the_finished_record_as_it_was(tmp_path):
    out = tmp_path / "out"
    assert _run(out).exit_code == 0
    rec = _record(out)
    before = rec.read_bytes()
    env = {**os.environ, FAULT_ENV: "0:0:hang"}  # the rerun's worker waits at its first step: killed there
    proc = subprocess.Popen([sys.executable, "-m", "reproduce", *RUN, "--out", str(out)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while not workers_of(tmp_path):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)  # the launcher and its worker, with no cleanup at all
    proc.wait(timeout=60)
    assert rec.read_bytes() == before  # the finished record is there, untouched
    res = _run(out)  # the next run takes over what the killed one left and replaces the record when complete
    assert res.exit_code == 0, res.output
    assert "replaced the earlier ok record" in res.output and rec.name in res.output.replace("\n", "")
    assert read_record(rec).ok and rec.read_bytes() != before
    assert _leftovers(out) == [], _leftovers(out)


def test_a_failed_rerun_replaces_the_record_only_with_a_complete_one(tmp_path):
    out = tmp_path / "out"
    assert _run(out).exit_code == 0
    rec = _record(out)
    res = CliRunner().invoke(cli, [*RUN, "--out", str(out)], env={FAULT_ENV: "0:0:exit"})
    assert res.exit_code == 1 and "replaced the earlier ok record" in res.output
    assert read_record(rec).status.value == "failed" and _leftovers(out) == []  # the new record, whole


# ---- 2 and 8. nothing is written through a symbolic link


def test_a_symlinked_log_is_refused_with_one_line_and_the_users_file_is_untouched(tmp_path):
    out, mine = tmp_path / "out", tmp_path / "mine.txt"
    mine.write_text("precious\n")
    rec = record_path(out, POINT)
    log_path(rec).parent.mkdir(parents=True)
    log_path(rec).symlink_to(mine)
    res = _run(out)
    assert res.exit_code == 1 and "is a symbolic link" in res.output and str(log_path(rec)) in res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1, res.output
    assert mine.read_text() == "precious\n" and not rec.exists()


@pytest.mark.parametrize("which", ["record", "pending record", "pending log"])
def test_a_symlink_where_a_run_writes_is_refused_before_it_starts(tmp_path, which):
    out, mine = tmp_path / "out", tmp_path / "mine.json"
    mine.write_text(json.dumps({"point": {}, "status": "ok"}))  # looks like a record: still never written through
    rec = record_path(out, POINT)
    link = {"record": rec, "pending record": pending_path(rec), "pending log": pending_path(log_path(rec))}[which]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(mine)
    res = _run(out)
    assert res.exit_code == 1 and "is a symbolic link" in res.output and "Traceback" not in res.output, res.output
    assert json.loads(mine.read_text()) == {"point": {}, "status": "ok"} and not workers_of(tmp_path)


def test_a_lock_name_that_is_a_symlink_is_never_written_through(tmp_path):
    mine = tmp_path / "mine.txt"
    mine.write_text("precious\n")
    old = time.time() - 3600
    os.utime(mine, (old, old))
    lock = tmp_path / "r.json.lock"
    lock.symlink_to(mine)
    took = lockfile.acquire(lock, "r.json is being run")
    try:
        assert not lock.is_symlink() and lockfile.holder(lock)[0] == os.getpid()
    finally:
        lockfile.release(took)
    assert mine.read_text() == "precious\n"


def test_a_sweep_records_a_symlinked_point_as_failed_and_goes_on(tmp_path):
    path = experiment(tmp_path, impls=("dense-fbgemm",), batches=(64, 128))
    exp = load_experiment(path, root=tmp_path)
    first, second = (record_path(exp.out_dir, p) for p in exp.points)
    mine = tmp_path / "mine.txt"
    mine.write_text("precious\n")
    first.parent.mkdir(parents=True)
    first.symlink_to(mine)
    dry = dry_run(path, tmp_path)
    assert dry.exit_code == 0 and "is a symbolic link" in dry.output, dry.output
    out = sweep_here(path, tmp_path)
    assert out.exit_code == 1 and "Traceback" not in out.output, out.output
    assert not isinstance(out.exception, Exception) or isinstance(out.exception, SystemExit), out.exception
    assert "is a symbolic link" in out.output and "1 of the runs of this sweep did not finish" in out.output
    assert read_record(second).ok and first.is_symlink() and mine.read_text() == "precious\n"


# ---- 3. a point id states the whole point


@pytest.mark.parametrize("key,value", [("tt_min_rows", 0), ("tt_oversize", "allow")])
def test_an_option_stated_at_any_value_gets_an_id_of_its_own(key, value):
    plain = RunPoint(impl="ecorec", data="uniform", batch_size=8)
    stated = RunPoint(impl="ecorec", data="uniform", batch_size=8, impl_options={key: value})
    assert plain.point_id != stated.point_id


def test_two_trainings_that_differ_in_a_stated_option_write_two_records(tmp_path):
    from tests.reproduce.test_tt_says import TINY

    out = tmp_path / "out"
    for extra in ([], ["-o", "tt_min_rows=0"]):
        res = CliRunner().invoke(cli, ["run", "--impl", "ecorec", *TINY, *extra, "--out", str(out)])
        assert res.exit_code == 0 and "replaced" not in res.output, res.output
    assert len(list(out.glob("*.json"))) == 2


def test_a_record_of_an_older_schema_is_refused_naming_it_and_its_point_runs_again(tmp_path):
    path = experiment(tmp_path, impls=("dense-fbgemm",))
    exp = load_experiment(path, root=tmp_path)
    (p,) = exp.points
    old = record_path(exp.out_dir, p)
    d = Record.failed(p.to_dict(), "ran", point_id_=p.point_id).to_dict()
    write_json(old, {**d, "schema": 2})
    with pytest.raises(ValueError, match=f"{old.name}: not a record .*schema 2 .*rerun its point"):
        read_record(old)
    assert [t for p, r, t in plan(exp)] == [True] and todo(exp) == [(p, 0)]  # not done: its point runs again
    assert any(old.name in line and "schema 2" in line for line in unreadable(exp))  # and the sweep names it


def test_every_committed_record_is_named_by_the_id_its_point_gives():
    bad = []
    for f in sorted(ROOT.glob("results/*/*/*.json")):
        d = json.loads(f.read_text())
        if isinstance(d, dict) and "point" in d and "status" in d:
            try:
                check_identity(f, read_record(f))
            except ValueError as exc:
                bad.append(str(exc))
    assert not bad, bad[:3]


# ---- 4. a record that contradicts its name is refused, naming the file


def _set_with(tmp_path: Path, edit) -> tuple[Path, Path]:
    """An experiment (its TOML) whose result set holds a record of each point, ``edit`` applied to the second's JSON;
    and that record."""
    path = experiment(tmp_path, impls=("ttrec",), batches=(8, 16))
    exp = load_experiment(path, root=tmp_path)
    for p in exp.points:
        write_record(record_path(exp.out_dir, p), Record.failed(p.to_dict(), "x", point_id_=p.point_id))
    rec = record_path(exp.out_dir, exp.points[1])
    d = json.loads(rec.read_text())
    edit(d)
    rec.write_text(json.dumps(d))
    return path, rec


def _readers_name(path: Path, rec: Path, tmp_path: Path, match: str) -> None:
    """Every reader of the set refuses it with one line naming the file: the store, summarize and plot."""
    from reproduce.analysis.aggregate import load_records

    with pytest.raises(ValueError, match=match):
        load_records(rec.parent)
    for command in ("summarize", "plot"):
        res = CliRunner().invoke(cli, [command, str(path), "--root", str(tmp_path)], terminal_width=400)
        assert res.exit_code == 2 and str(rec) in res.output and "Traceback" not in res.output, (command, res.output)


def test_summarize_and_plot_refuse_a_record_whose_point_contradicts_its_name(tmp_path):
    def edit(d):
        d["point"].update(impl="dense-torch", batch_size=384)  # edited by hand: its name and id say otherwise

    path, rec = _set_with(tmp_path, edit)
    _readers_name(path, rec, tmp_path, f"{rec}: its file name says point ttrec__uniform__b16")


def test_a_sweep_lists_a_contradicting_record_and_runs_its_point_again(tmp_path):
    path = experiment(tmp_path, impls=("dense-fbgemm",), batches=(64,))
    exp = load_experiment(path, root=tmp_path)
    (p,) = exp.points
    rec = record_path(exp.out_dir, p)
    write_record(rec, Record.failed(p.to_dict(), "x", point_id_=p.point_id))
    d = json.loads(rec.read_text())
    d["point"]["batch_size"] = 384
    rec.write_text(json.dumps(d))
    assert not is_done(p, exp.out_dir)
    dry = dry_run(path, tmp_path)
    assert dry.exit_code == 0 and str(rec) in dry.output.replace("\n", "") and "todo" in dry.output, dry.output


# ---- 5. a resumed sweep clears the locks of dead holders


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_resumed_sweep_clears_the_locks_its_killed_runs_left(tmp_path):
    import socket

    path = experiment(tmp_path, impls=("dense-fbgemm",), batches=(64,))
    exp = load_experiment(path, root=tmp_path)
    rec = record_path(exp.out_dir, exp.points[0])
    rec.parent.mkdir(parents=True)
    lock = rec.with_name(rec.name + ".lock")
    lock.write_text(f"{_dead_pid()} {socket.gethostname()}\n")
    pending_path(rec).write_text("{")  # what the killed run left pending
    todo(exp)
    assert lock.exists() and pending_path(rec).exists()  # a query only reads
    tidy_set(exp)
    assert not lock.exists() and not pending_path(rec).exists()


def test_a_lock_whose_pid_was_given_to_another_process_is_stale():
    import socket

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        host = socket.gethostname()
        start = lockfile.started(proc.pid)
        assert start is not None
        here = Path(f"/tmp/dlrmbench-test-{os.getpid()}.lock")
        for text, stale in ((f"{proc.pid} {host} {start}", False), (f"{proc.pid} {host} {int(start) - 1}", True),
                            (f"{proc.pid} {host}", False), (f"{_dead_pid()} {host}", True),
                            (f"{_dead_pid()} another-host", False)):
            here.write_text(text + "\n")
            assert lockfile.stale(here) is stale, text
        here.unlink()
    finally:
        proc.kill()
        proc.wait()


# ---- 9. a run that failed for lack of disk space is redone


def test_a_run_that_ran_out_of_disk_space_records_nothing_and_is_redone(tmp_path):
    rec = record_path(tmp_path, POINT)
    earlier = Record.failed(POINT.to_dict(), "an earlier failure", point_id_=POINT.point_id)
    write_record(rec, earlier)
    failure = Record.failed(POINT.to_dict(), "OSError: [Errno 28] No space left on device", point_id_=POINT.point_id)
    write_record(pending_path(rec), failure)
    with pytest.raises(DiskFull, match="ran out of disk space"):
        finish_point(POINT, rec, log_path(rec), 1, None, pending=True)
    assert read_record(rec).reason == "an earlier failure" and not pending_path(rec).exists()
    log = pending_path(log_path(rec))  # no record at all: the worker's log says why
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("Traceback ...\nreproduce.harness.records.DiskFull: [Errno 28] no space left on the device\n")
    with pytest.raises(DiskFull):
        finish_point(POINT, rec, log_path(rec), 1, None, pending=True)
    write_record(rec, failure)  # such a failure recorded by an earlier version: not done, redone on resume
    assert not is_done(POINT, tmp_path)


# ---- 13. a record field of the wrong type is named with its file


@pytest.mark.parametrize("field,value", [("timing_ms", "slow"), ("samples_per_s", "fast"),
                                         ("timing_ms", {"total": {"median": "x"}}), ("loss", [1.0, "nan?"])])
def test_a_record_field_of_the_wrong_type_is_refused_naming_file_and_field(tmp_path, field, value):
    def edit(d):
        d[field] = value

    path, rec = _set_with(tmp_path, edit)
    with pytest.raises(ValueError, match=f"{rec}: not a record .*field {field}"):
        read_record(rec)
    _readers_name(path, rec, tmp_path, f"field {field}")


# ---- 14. option values are refused before any process starts


@pytest.mark.parametrize("value", ["0", "-1", "[0, 2]"])
def test_ranks_below_one_are_refused_before_any_process_starts(tmp_path, value):
    res = CliRunner().invoke(cli, ["run", "--impl", "ecorec", "--data", "uniform", "--rows", "100", "--dim", "8",
                                   "-b", "8", "--iters", "1", "--warmup", "0", "-o", f"ranks={value}", "-o",
                                   "tt_min_rows=0", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "ranks must be >= 1" in res.output, res.output
    assert not (tmp_path / "x").exists()
