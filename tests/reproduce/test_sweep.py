"""The sweep engine under failure: a sweep killed midway resumes without redoing finished points; a point that
crashes, is OOM-killed or hangs past the time limit is recorded and the sweep goes on; profiles and extra grids;
the slurm launcher's script runs the same points (through a stand-in srun) and resumes on resubmission."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hypothesis import given, strategies as st

from reproduce.harness.resolve import interleaved, load_experiment
from reproduce.harness.fault import Fault
from reproduce.harness.record_store import record_path
from reproduce.harness.record_store import read_record
from reproduce.analysis.aggregate import summarize_experiment
from reproduce.harness.sweep import run_experiment, todo

EXPERIMENT = """
name = "tiny"
point_timeout_s = 120
repeats = 1
[defaults]
mode = "embedding-only"
iters = 2
warmup = 1
num_batches = 1
threads = 1
[grid]
impl = {impls}
data = ["uniform"]
batch_size = {batches}
[data_options]
num_tables = 2
rows = 1000
dim = 8
[rounds]
probe_s = 0.1  # the noise probes' window drift: 0.1 s per core and kind of work (a sweep's default is 2 s)
"""


def experiment(tmp_path: Path, impls=("dense-fbgemm", "ttrec"), batches=(64,), extra: str = "") -> Path:
    """A tiny experiment of ``impls``. Its plain baseline is dense-fbgemm, not dense-torch: torch.optim imports
    torch._dynamo on its first use, ~3 s of every worker process, and nothing here depends on which system runs."""
    path = tmp_path / "tiny.toml"
    path.write_text(EXPERIMENT.format(impls=json.dumps(list(impls)), batches=json.dumps(list(batches))) + extra)
    return path


def sweep_cmd(path: Path, root: Path, *args: str) -> list[str]:
    """`dlrmbench sweep` in a process of its own; a local one without the noise probes (about 10 s each: what they
    record is tested on the in-process sweep of test_repeats_interleave_and_summarize_with_intervals)."""
    local = "--launcher" not in args
    return [sys.executable, "-m", "reproduce", "sweep", str(path), "--root", str(root), *args,
            *(["--no-probe"] if local else [])]


def sweep_here(path: Path, root: Path, *args: str, env: dict[str, str] | None = None):
    """`dlrmbench sweep` (local, without the noise probes) in this process: click's result (``exit_code``,
    ``output``). Its runs are worker processes all the same; the sweep whose own process matters (a signal, a kill)
    runs as ``sweep_cmd``."""
    from click.testing import CliRunner

    from reproduce.cli import cli

    return CliRunner().invoke(cli, ["sweep", str(path), "--root", str(root), "--no-probe", *args], env=env,
                              terminal_width=200)


def dry_run(path: Path, root: Path):
    """`dlrmbench sweep --dry-run` in this process (it launches nothing)."""
    return sweep_here(path, root, "--dry-run")


def workers_of(root: Path) -> list[int]:
    """Live worker processes writing under ``root``: their output goes to a run's log there (a worker forked from the
    fork server has the server's command line)."""
    pids = []
    for d in Path("/proc").iterdir():
        try:
            out = os.readlink(d / "fd" / "1")
        except (OSError, ValueError):
            continue
        if out.startswith(f"{root}/") and "/logs/" in out:
            pids.append(int(d.name))
    return pids


def test_killed_sweep_resumes_without_redoing_finished_points(tmp_path):
    path = experiment(tmp_path, impls=("dense-fbgemm",), batches=(64, 128))
    exp = load_experiment(path, root=tmp_path)
    recs = [record_path(exp.out_dir, p) for p in exp.points]
    proc = subprocess.Popen(sweep_cmd(path, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    # let one point finish and the next one start, then stop the sweep while it waits on that run (a signal that
    # lands between two runs stops the sweep only after the run it is starting, and nothing would be left to resume)
    while not (any(r.exists() for r in recs) and workers_of(tmp_path)):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read().decode()
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    log, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0, log.decode()  # stopped, not finished
    assert not workers_of(tmp_path)  # the point in flight was stopped with the sweep
    finished = {r: (r.read_bytes(), r.stat().st_mtime_ns) for r in recs if r.exists()}
    assert 1 <= len(finished) < len(recs)

    out = sweep_here(path, tmp_path)
    assert out.exit_code == 0, out.output
    assert out.output.count("recorded earlier, skipped (resume)") == len(finished)
    for r, (content, mtime) in finished.items():  # never redone
        assert r.read_bytes() == content and r.stat().st_mtime_ns == mtime
    assert all(read_record(r).status == "ok" for r in recs)
    assert (exp.out_dir / "summary.csv").exists() and not (exp.out_dir / "noise").exists()  # --no-probe
    assert not todo(exp)


def test_crashed_point_is_recorded_and_the_sweep_finishes(tmp_path, monkeypatch):
    monkeypatch.setenv("DLRMBENCH_FAULT", "0:1:exit:ttrec")  # ttrec's worker dies at step 1, with no record
    exp = load_experiment(experiment(tmp_path, impls=("ttrec", "dense-fbgemm")), root=tmp_path)
    seen = []
    run_experiment(exp, on_point=lambda i, n, p, k, o: seen.append((p.impl, o.record.status, o.finished)),
                   probe=False)
    summary = summarize_experiment(exp)
    assert seen == [("ttrec", "failed", False), ("dense-fbgemm", "ok", True)]  # the point after it ran
    rec = read_record(record_path(exp.out_dir, exp.points[0]))
    assert "exited with code 3" in rec.reason and Path(rec.log).exists() and rec.wall_s > 0
    rows = summary.read_text().splitlines()
    assert len(rows) == 3 and "failed" in rows[1]
    monkeypatch.delenv("DLRMBENCH_FAULT")
    assert [p.impl for p, _ in todo(exp)] == []  # a failed point has its record: resume does not retry it
    assert [p.impl for p, _ in todo(exp, force=True)] == ["ttrec", "dense-fbgemm"]


def test_kill_and_time_limit_are_recorded(tmp_path, monkeypatch):
    exp = load_experiment(experiment(tmp_path, impls=("dense-fbgemm",)), root=tmp_path)
    monkeypatch.setenv("DLRMBENCH_FAULT", "0:0:kill")
    run_experiment(exp, probe=False)
    rec = read_record(record_path(exp.out_dir, exp.points[0]))
    assert rec.status == "failed" and rec.reason.startswith("killed (signal 9)")  # not the OOM killer
    monkeypatch.setenv("DLRMBENCH_FAULT", "0:0:hang")
    run_experiment(exp, force=True, timeout_s=5, probe=False)
    rec = read_record(record_path(exp.out_dir, exp.points[0]))
    assert rec.status == "failed" and rec.reason == "time limit of 5 s exceeded"
    assert not workers_of(tmp_path)  # the hung worker's process group was killed


def test_launcher_error_is_that_points_failure(tmp_path):
    extra = ('\n[[points]]\nimpl = "dense-fbgemm"\ndata = "uniform"\nbatch_size = 64\nworld_size = 2\nnnodes = 2\n'
             'rdzv_endpoint = "no-such-host.invalid:29500"\n')
    exp = load_experiment(experiment(tmp_path, impls=("dense-fbgemm",), extra=extra), root=tmp_path)
    exp = type(exp)(**{**exp.__dict__, "points": exp.points[1:]})  # only the unreachable multi-node point
    run_experiment(exp, probe=False)
    rec = read_record(record_path(exp.out_dir, exp.points[0]))
    assert rec.status == "failed" and "cannot resolve" in rec.reason


def test_fault_spec():
    assert Fault.parse("1:2") == Fault(1, 2, "exit", "")
    assert Fault.parse("0:3:hang:ecorec").impl == "ecorec"
    with pytest.raises(ValueError, match="RANK:STEP"):
        Fault.parse("1")
    with pytest.raises(ValueError, match="kind 'boom'"):
        Fault.parse("0:0:boom")


def test_profiles_and_extra_grids(tmp_path):
    extra = """
[[grids]]
impl = ["ttrec"]
data = ["uniform"]
batch_size = [256]

[profiles.cpu]
grid = { batch_size = [64] }

[profiles.paper]
grid = { batch_size = [4096, 8192] }
defaults = { iters = 5 }
grids = []

[profiles.cluster]
grid = { world_size = [4, 8] }
defaults = { gpus_per_node = 2, nnodes = "auto", rdzv_endpoint = "head:29500" }
grids = []
points = [{ impl = "ttrec", data = "uniform", batch_size = 32, world_size = 6 }]
"""
    path = experiment(tmp_path, extra=extra)
    cpu = load_experiment(path, root=tmp_path)
    assert cpu.profile == "cpu" and cpu.out_dir == tmp_path / "results" / "tiny" / cpu.machine
    assert [(p.impl, p.batch_size) for p in cpu.points] == [("dense-fbgemm", 64), ("ttrec", 64), ("ttrec", 256)]
    paper = load_experiment(path, root=tmp_path, profile="paper")
    assert paper.out_dir == tmp_path / "results" / "tiny_paper" / cpu.machine
    assert [(p.batch_size, p.iters) for p in paper.points] == [(4096, 5), (8192, 5)] * 2
    cluster = load_experiment(path, root=tmp_path, profile="cluster")  # nodes of 2 ranks, grid and [[points]]
    assert [(p.world_size, p.nnodes) for p in cluster.points] == [(4, 2), (8, 4)] * 2 + [(6, 3)]
    with pytest.raises(ValueError, match="no profile 'gpu'"):
        load_experiment(path, profile="gpu")
    twice = experiment(tmp_path, extra='\n[[grids]]\nimpl = ["ttrec"]\ndata = ["uniform"]\nbatch_size = [64]\n')
    with pytest.raises(ValueError, match="points listed twice"):
        load_experiment(twice)


def test_slurm_script_runs_the_points_and_resumes(tmp_path, monkeypatch):
    extra = ('\n[[points]]\nimpl = "dense-fbgemm"\ndata = "uniform"\nbatch_size = 64\nworld_size = 4\n'
             'gpus_per_node = 2\nnnodes = 2\nrdzv_endpoint = "head:29500"\n')
    path = experiment(tmp_path, extra=extra)
    from click.testing import CliRunner

    from reproduce.cli import cli

    slurm = ["sweep", str(path), "--root", str(tmp_path), "--launcher", "slurm"]
    refused = CliRunner().invoke(cli, slurm)
    assert refused.exit_code == 2 and "needs --machine" in refused.output
    out = CliRunner().invoke(cli, [*slurm, "--timeout", "90", "--machine", "testbox"])
    assert out.exit_code == 0, out.output
    script = tmp_path / "results" / "tiny" / "testbox" / "sweep.sbatch"
    text = script.read_text()
    assert "#SBATCH --nodes=2" in text and "#SBATCH --time=" in text
    assert "--nnodes=2 --nproc-per-node=2 --rdzv-backend=c10d" in text and '$HEAD:' in text
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0

    # run it on this machine: a stand-in srun runs the task here; only the single-process points
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text('#!/bin/bash\nwhile [[ $1 == --* ]]; do shift; done\nexec "$@"\n')
    (bin_dir / "scontrol").write_text("#!/bin/sh\necho localhost\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    lines = text.splitlines()
    single = "\n".join(ln for ln in lines if "nnodes=2" not in ln)
    script.write_text(single)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "localhost",
           "DLRMBENCH_PYTHON": sys.executable, "DLRMBENCH_FAULT": "0:1:exit:ttrec"}
    run = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    exp = load_experiment(path, root=tmp_path, machine="testbox")
    status = {p.impl: read_record(record_path(exp.out_dir, p)).status for p in exp.points[:2]}
    assert status == {"dense-fbgemm": "ok", "ttrec": "failed"}
    assert "exited with code 3" in read_record(record_path(exp.out_dir, exp.points[1])).reason
    assert (exp.out_dir / "summary.csv").exists()
    again = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert again.stdout.count("recorded earlier") == 2


@given(st.integers(1, 6), st.integers(1, 8))
def test_rounds_alternate_so_no_item_always_leads(n, repeats):
    items = [f"p{i}" for i in range(n)]
    order = interleaved(items, repeats)
    assert sorted(order) == sorted((i, r) for i in items for r in range(repeats))  # every run once
    assert [r for _, r in order] == sorted(r for _, r in order)  # round by round
    rounds = [[item for item, k in order if k == r] for r in range(repeats)]
    assert all(rnd == (items if r % 2 == 0 else items[::-1]) for r, rnd in enumerate(rounds))
    if repeats % 2 == 0:  # over an even number of rounds every item's mean place in its rounds is the same
        assert len({sum(rnd.index(item) for rnd in rounds) for item in items}) == 1


def test_repeats_interleave_and_summarize_with_intervals(tmp_path, monkeypatch):
    from reproduce.harness import noise

    full = noise.probe
    monkeypatch.setattr(noise, "probe", lambda **kw: full(**{**kw, "size": 256, "runs": 3}))  # when, not how long
    exp = load_experiment(experiment(tmp_path, impls=("dense-fbgemm", "ttrec")), root=tmp_path, repeats=2)
    order = []
    run_experiment(exp, on_start=lambda p, k, progress: order.append((p.impl, k)))
    summary = summarize_experiment(exp)
    assert order == [("dense-fbgemm", 0), ("ttrec", 0), ("ttrec", 1), ("dense-fbgemm", 1)]  # A B, then B A
    for p, k in exp.tasks():
        rec = read_record(record_path(exp.out_dir, p, k))
        assert rec.status == "ok" and rec.repeat == k and rec.point_id == p.point_id
        assert rec.body.env["machine_slug"] and rec.body.env["machine"]["cores"] >= 1
    import pandas as pd

    df = pd.read_csv(summary)
    assert list(df["repeats"]) == [2, 2] and len(pd.read_csv(exp.out_dir / "repeats.csv")) == 4
    assert (df["total_ms_lo"] <= df["total_ms"]).all() and (df["total_ms"] <= df["total_ms_hi"]).all()
    tt = df[df["impl"] == "ttrec"].iloc[0]
    assert tt["speedup_lo"] <= tt["speedup"] <= tt["speedup_hi"]
    probes = sorted((exp.out_dir / "noise").glob("*.json"))
    assert [json.loads(f.read_text())["stage"] for f in probes] == ["before", "round 1", "after"]  # between rounds
    assert all(json.loads(f.read_text())["threads"] == 1 for f in probes)  # the runs' thread count
    assert all(json.loads(f.read_text())["gflops_median"] > 0 for f in probes)
    more = load_experiment(experiment(tmp_path, impls=("dense-fbgemm", "ttrec")), root=tmp_path, repeats=3)
    assert [(p.impl, k) for p, k in todo(more)] == [("dense-fbgemm", 2), ("ttrec", 2)]  # more repeats: only those


def test_another_machines_records_never_count_here(tmp_path):
    from reproduce.harness.record_store import write_record
    from reproduce.harness.records import Record

    exp = load_experiment(experiment(tmp_path, impls=("dense-fbgemm",)), root=tmp_path)
    other = exp.on("8x-h100-sxm")
    point = exp.points[0]
    write_record(record_path(other.out_dir, point), Record(point.to_dict(), "ok", point_id=point.point_id))
    assert other.out_dir != exp.out_dir and [p.impl for p, _ in todo(exp)] == ["dense-fbgemm"]
    assert todo(other) == []
    out = dry_run(experiment(tmp_path, impls=("dense-fbgemm",)), tmp_path)
    assert out.exit_code == 0 and "1 runs to do" in out.output and exp.machine in out.output


def test_a_truncated_record_is_named_and_run_again(tmp_path):
    path = experiment(tmp_path, impls=("dense-fbgemm",))
    exp = load_experiment(path, root=tmp_path)
    rec = record_path(exp.out_dir, exp.points[0])
    rec.parent.mkdir(parents=True)
    rec.write_text('{"point": {"impl": "dense-to')  # a write cut short
    out = dry_run(path, tmp_path)
    assert out.exit_code == 0, out.output
    assert rec.name in out.output and "not a readable record" in out.output and "1 runs to do" in out.output
    run_experiment(exp, probe=False)
    assert read_record(rec).status == "ok"  # rerun, replaced


def test_run_records_a_launcher_error_instead_of_a_traceback(tmp_path):
    from click.testing import CliRunner

    from reproduce.cli import cli

    res = CliRunner().invoke(cli, ["run", "--impl", "dense-fbgemm", "--data", "uniform", "--num-tables", "2",
                                   "--rows", "100", "--dim", "4", "-b", "8", "--world-size", "2", "--nnodes", "2",
                                   "--rdzv-endpoint", "no-such-host.invalid:29500", "--out", str(tmp_path)])
    assert res.exit_code == 1 and "cannot resolve 'no-such-host.invalid'" in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    (rec,) = tmp_path.glob("*.json")
    assert read_record(rec).status == "failed"


@pytest.mark.slow
def test_kill_9_of_the_sweep_leaves_no_orphan_and_resume_runs_only_the_rest(tmp_path):
    path = experiment(tmp_path, impls=("dense-fbgemm",), batches=(64, 128))
    exp = load_experiment(path, root=tmp_path)
    recs = [record_path(exp.out_dir, p) for p in exp.points]
    proc = subprocess.Popen(sweep_cmd(path, tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # the sweep's own process group, as a shell job would be
    deadline = time.monotonic() + 300
    while not (any(r.exists() for r in recs) and workers_of(tmp_path)):  # one point done, the next one running
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)  # no cleanup at all
    proc.wait(timeout=60)
    deadline = time.monotonic() + 30
    while workers_of(tmp_path):  # the running worker dies with its parent
        assert time.monotonic() < deadline, f"orphaned workers {workers_of(tmp_path)}"
        time.sleep(0.2)
    done = {r: r.stat().st_mtime_ns for r in recs if r.exists()}
    assert 1 <= len(done) < len(recs)
    out = sweep_here(path, tmp_path)
    assert out.exit_code == 0, out.output
    assert out.output.count("recorded earlier, skipped (resume)") == len(done)  # the stale lock was taken over
    assert all(r.stat().st_mtime_ns == t for r, t in done.items()) and all(r.exists() for r in recs)


def test_a_run_held_by_a_live_process_is_not_started_twice(tmp_path):
    from reproduce.harness.launch import launch_point
    from reproduce.harness.record_store import RunLocked

    exp = load_experiment(experiment(tmp_path, impls=("dense-fbgemm",)), root=tmp_path)
    rec = record_path(exp.out_dir, exp.points[0])
    rec.parent.mkdir(parents=True)
    holder = subprocess.Popen(["sleep", "60"])
    try:
        rec.with_name(rec.name + ".lock").write_text(f"{holder.pid}\n")
        with pytest.raises(RunLocked, match=f"being run by process {holder.pid}"):
            launch_point(exp.points[0], exp.out_dir)
        seen = []
        run_experiment(exp, on_point=lambda i, n, p, k, o: seen.append((o.kind, o.finished)), probe=False)
        assert seen == [("locked", False)] and not rec.exists()
    finally:
        holder.kill()
        holder.wait()
    run_experiment(exp, probe=False)  # the holder is gone: its lock is stale and taken over
    assert read_record(rec).status == "ok" and not rec.with_name(rec.name + ".lock").exists()


def test_a_sweep_with_failed_runs_exits_non_zero_naming_them(tmp_path, monkeypatch):
    path = experiment(tmp_path, impls=("dense-fbgemm", "ttrec"))
    out = sweep_here(path, tmp_path, env={"DLRMBENCH_FAULT": "0:0:exit:ttrec"})
    assert out.exit_code == 1 and "1 of the runs of this sweep did not finish" in out.output, out.output
    assert "ttrec__uniform__b64" in out.output and "(failed)" in out.output


def test_options_refused_before_launch():
    from reproduce.harness.point import RunPoint

    with pytest.raises(ValueError, match="is for multi-node runs"):
        RunPoint(impl="dense-fbgemm", data="uniform", batch_size=8, world_size=2, rdzv_endpoint="h:29500")
    from click.testing import CliRunner

    from reproduce.cli import cli

    res = CliRunner().invoke(cli, ["data", "prepare", "criteo-kaggle", "--raw", ".", "--freq-threshold", "-5"])
    assert res.exit_code == 2 and "-5" in res.output


def test_an_experiment_without_a_cpu_profile_runs_as_written(tmp_path):
    # `make reproduce-sc24-table1` passes --profile cpu to an experiment whose only profile is `paper`
    path = experiment(tmp_path, extra='\n[profiles.paper]\ngrid = { batch_size = [4096] }\n')
    for profile in (None, "cpu"):
        exp = load_experiment(path, root=tmp_path, profile=profile)
        assert exp.profile == "cpu" and exp.points and all(p.batch_size != 4096 for p in exp.points)
    assert {p.batch_size for p in load_experiment(path, root=tmp_path, profile="paper").points} == {4096}


def test_a_run_recorded_by_another_sweep_after_this_one_planned_is_not_run_again(tmp_path, monkeypatch):
    """Two sweeps on one folder: the second made its list of runs before the first recorded them. Under the run's lock
    it sees the record and leaves it (no second launch, the record untouched); --force still reruns."""
    import reproduce.harness.sweep as sweep

    exp = load_experiment(experiment(tmp_path, impls=("dense-fbgemm",)), root=tmp_path)
    run_experiment(exp, probe=False)
    rec = record_path(exp.out_dir, exp.points[0])
    before = rec.read_bytes()
    monkeypatch.setattr(sweep, "todo", lambda e, force=False: list(e.tasks()))  # planned before the record existed
    launched = []
    monkeypatch.setattr(sweep, "launch_point", lambda *a, **k: launched.append(a) or read_record(rec))
    outcomes = run_experiment(exp, probe=False)
    assert [o.kind for o in outcomes] == ["earlier"] and "meanwhile" in outcomes[0].note
    assert launched == [] and rec.read_bytes() == before and not rec.with_name(rec.name + ".lock").exists()
    assert [o.kind for o in run_experiment(exp, force=True, probe=False)] == ["ran"] and len(launched) == 1


def test_the_run_lock_is_kept_by_its_holder_and_released_only_by_it(tmp_path):
    from reproduce.harness.record_store import lock_run, release_lock

    rec = tmp_path / "p.r0.json"
    lock = lock_run(rec)
    assert lock_run(rec) == lock and lock.read_text().split()[0] == str(os.getpid())  # re-entrant for its holder
    holder = subprocess.Popen(["sleep", "60"])
    try:
        lock.write_text(f"{holder.pid}\n")  # taken over by another live process meanwhile
        release_lock(lock)
        assert lock.read_text().strip() == str(holder.pid)  # not ours: left alone
    finally:
        holder.kill()
        holder.wait()
    lock.write_text(f"{os.getpid()}\n")  # ours again (a lock of pid only was written on this host)
    release_lock(lock)  # the last of its two takes
    assert not lock.exists()
    lock_run(rec)
    lock_run(rec)
    release_lock(lock)
    assert lock.exists()  # the outer take (a sweep around its launch) still holds it
    release_lock(lock)
    assert not lock.exists()
