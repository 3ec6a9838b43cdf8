"""`dlrmbench run --world-size N` under torchrun: one record from rank 0 with every rank's measurements, the
same training as one process over the global batch, a crashed rank ending the run with a reason, and bad
distributed input rejected before or at start-up."""
import re
from pathlib import Path

import pytest

from reproduce.harness.options import check_point
from reproduce.harness.point import RunPoint
from reproduce.harness.launch import check_rendezvous, launch_point
from tests.reproduce.window_runs import run_forked

SMALL = dict(data="uniform", iters=3, warmup=1, num_batches=2, mode="embedding-only", lr=0.05,
             data_options={"num_tables": 4, "rows": 2000, "dim": 8}, dist_timeout_s=30.0)


def test_two_ranks_train_like_one_process_over_the_global_batch(tmp_path):
    opts = {"ranks": 4, "micro_batches": 2}
    (one,) = run_forked([RunPoint(impl="ecorec", batch_size=64, impl_options=opts, **SMALL)], tmp_path)
    two = launch_point(RunPoint(impl="ecorec", batch_size=32, world_size=2, impl_options=opts, **SMALL), tmp_path)
    assert one["status"] == "ok", one
    assert two.status == "ok", two
    # the loss of every timed step: the sum of the ranks' shares equals the single process's loss
    assert two.body.loss == pytest.approx(one["loss"], rel=1e-5, abs=1e-7)
    d = two.body.dist
    assert d["world_size"] == 2 and d["backend"] == "gloo" and len(d["per_rank"]) == 2
    for r in d["per_rank"]:  # each rank sent ids and pooled rows to its peer every step
        assert r["comm_bytes_per_step"]["emb.fwd"] > 0 and r["comm_bytes_per_step"]["emb.ids.values"] > 0
        assert set(r["comm_bytes_per_peer"]["emb.fwd"]) == {str(1 - r["rank"])}
    assert d["comm_bytes_per_step"] > 0 and d["comm_blocked_ms"] >= 0
    assert two.body.samples_per_s > 0 and two.body.work["nnz"] == one["work"]["nnz"]


def test_ranks_agree_on_the_end_of_the_warm_up_and_the_timed_steps(tmp_path):
    """Warm-up until settled and a time budget over ranks: every rank stops warming up at the same step and times
    the same number of steps (else a collective would hang); the record says how many and by which rule."""
    fields = {**SMALL, "warmup_max": 8, "time_budget_s": 0.3, "max_iters": 40}
    rec = launch_point(RunPoint(impl="dense-fbgemm", batch_size=32, world_size=2, threads=1, **fields), tmp_path)
    assert rec.status == "ok", rec
    loop = rec.body.loop
    assert 1 <= loop["warmup_steps"] <= 8 and 3 <= loop["timed_steps"] <= 40
    assert len(rec.body.iterations_ms["total"]) == loop["timed_steps"] and "time budget" not in loop["rule"]
    assert "fill 0.3 s" in loop["rule"] and len(rec.body.iterations_ms["cpu"]) == loop["timed_steps"]
    assert rec.body.occupancy["ranks_on_node"] == 2 and rec.body.code["digest"]


def test_a_crashed_rank_fails_the_run_with_its_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("DLRMBENCH_FAULT", "1:2")
    # a hang would end at the launcher's limit with "time limit ... exceeded" instead of the rank's reason
    rec = launch_point(RunPoint(impl="ttrec", batch_size=32, world_size=2, impl_options={"ranks": 4}, **SMALL),
                       tmp_path, timeout_s=300)
    assert rec.status == "failed"
    assert "rank 1 died first (exit code 3)" in rec.reason and "time limit" not in rec.reason


@pytest.mark.slow
@pytest.mark.parametrize("victim", [0, 1])
def test_the_killed_rank_is_blamed_not_its_peers(tmp_path, monkeypatch, victim):
    """kill -9 of rank 0 or of the middle rank of 3: the survivors see a reset connection, the record names the
    victim."""
    monkeypatch.setenv("DLRMBENCH_FAULT", f"{victim}:1:kill")
    rec = launch_point(RunPoint(impl="dense-fbgemm", batch_size=16, world_size=3, **SMALL), tmp_path, timeout_s=300)
    assert rec.status == "failed"
    assert rec.reason.startswith(f"rank {victim} died first (signal 9, SIGKILL)"), rec.reason
    assert not list(tmp_path.glob("*.error"))  # the ranks' error files were read and removed


@pytest.mark.slow
def test_a_stopped_rank_is_blamed_and_the_run_ends_after_timeout_and_grace(tmp_path, monkeypatch):
    """SIGSTOP of rank 1 of 2: its peer times out in a collective after dist_timeout_s and fails first, but the record
    blames the rank that stopped making progress; the launcher's wait for the frozen rank is the harness's short grace
    (reproduce/harness/torchrun.py's GRACE_S, torchrun's 30 s where torchrun runs the ranks)."""
    from reproduce.harness.torchrun import GRACE_S

    monkeypatch.setenv("DLRMBENCH_FAULT", "1:1:stop")
    point = RunPoint(impl="dense-fbgemm", batch_size=16, world_size=2, **{**SMALL, "dist_timeout_s": 5.0})
    rec = launch_point(point, tmp_path, timeout_s=300)
    assert rec.status == "failed"
    assert rec.reason.startswith("rank 1 (last began step 0) stopped making progress: the other ranks waited 5 s"), \
        rec.reason
    # the frozen rank ignored SIGTERM and the launcher killed it GRACE_S later by its notes' clock in the log
    log = Path(rec.log).read_text()
    stamp = r"\[launcher (\d\d):(\d\d):(\d\d\.\d+)\] "
    term = re.search(stamp + r"rank 0 failed first .*SIGTERM to rank 1", log)
    kill = re.search(stamp + r"SIGKILL to rank 1 \(pid \d+\) \(still running", log)
    assert term and kill, log[-2000:]
    secs = [int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3)) for m in (term, kill)]
    assert GRACE_S - 0.5 <= (secs[1] - secs[0]) % 86400 < 30
    assert not list(tmp_path.glob("*.step")) and not list(tmp_path.glob("*.error"))


def test_the_grace_patch_bounds_every_close_of_torchrun():
    """reproduce.harness.torchrun caps torchrun's SIGTERM-to-SIGKILL wait at GRACE_S on every path (its failure path passes
    the 30 s default, never --shutdown-timeout)."""
    import subprocess
    import sys

    code = ("import sys, torch.distributed.run as r\n"
            "from torch.distributed.elastic.multiprocessing import api\n"
            "seen = []\n"
            "api.PContext.close = lambda self, death_sig=None, timeout=30: seen.append(timeout)\n"
            "r.main = lambda *a: api.PContext.close(None)\n"
            "import reproduce.harness.torchrun as t\n"
            "sys.argv = ['torchrun']\n"
            "t.main()\n"
            "print(seen)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    from reproduce.harness.torchrun import GRACE_S

    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"[{GRACE_S}]"


def test_bad_distributed_input(tmp_path):
    # more ranks than tables for table-wise sharding: a clear error at start-up, in the record
    rec = launch_point(RunPoint(impl="ttrec", batch_size=16, world_size=2, impl_options={"ranks": 4},
                                **{**SMALL, "data_options": {"num_tables": 1, "rows": 100, "dim": 8}}), tmp_path)
    assert rec.status == "failed" and "needs at least 2 tables, got 1" in rec.reason, rec.reason
    with pytest.raises(ValueError, match="not HOST:PORT"):
        RunPoint(impl="ttrec", batch_size=16, world_size=2, nnodes=2, rdzv_endpoint="nohost", **{
            k: v for k, v in SMALL.items()})
    with pytest.raises(ValueError, match="needs --rdzv-endpoint"):
        RunPoint(impl="ttrec", batch_size=16, world_size=2, nnodes=2, **SMALL)
    with pytest.raises(ValueError, match="embark runs over ranks only"):
        check_point(RunPoint(impl="embark", batch_size=16, **SMALL))  # asks the registry: where points are made
    with pytest.raises(ValueError, match="whole number of nodes"):
        RunPoint(impl="ttrec", batch_size=16, world_size=4, gpus_per_node=3, **SMALL)
    unreachable = RunPoint(impl="ttrec", batch_size=16, world_size=2, nnodes=2,
                           rdzv_endpoint="no-such-host.invalid:29500", **SMALL)
    with pytest.raises(ValueError, match="cannot resolve"):
        check_rendezvous(unreachable)
    with pytest.raises(ValueError, match="cannot resolve"):
        launch_point(unreachable, tmp_path)  # refused before anything starts


def test_a_training_run_over_two_ranks_equals_one_process_and_scores_the_whole_split(tmp_path):
    """`dlrmbench train -n 2`: the same losses and held-out scores as one process over the global batch; every
    held-out sample is scored once, gathered from both ranks."""
    from impls.data.export import write_synthetic
    from impls.data.presets import get_preset

    data = tmp_path / "data"
    write_synthetic("uniform", get_preset("uniform", num_tables=2, rows=300, dim=8), data, 256, 100)
    kw = dict(impl="ecorec", data=str(data), epochs=1, eval_every=4, warmup=0, optimizer="adagrad", lr=0.05,
              mlp_optimizer="adam", mlp_lr=1e-3, bottom=[8], top=[8], impl_options={"ranks": 4, "tt_min_rows": 0},
              dist_timeout_s=30.0)
    (one,) = run_forked([RunPoint(batch_size=64, **kw)], tmp_path)  # the reference: one process, however started
    two = launch_point(RunPoint(batch_size=32, world_size=2, **kw), tmp_path / "two")
    assert one["status"] == "ok" and two.status == "ok", (one, two)
    assert two.body.train["steps"] == one["train"]["steps"] == 4
    assert two.body.loss == pytest.approx(one["loss"], rel=1e-4, abs=1e-6)
    assert [c["samples"] for c in two.body.eval_curve] == [100] and two.body.eval["samples"] == 100
    assert two.body.eval["logloss"] == pytest.approx(one["eval"]["logloss"], rel=1e-4)


def test_two_real_agents_each_say_what_they_ran_and_where_the_record_is(tmp_path):
    """Two torchrun agents over loopback (--nnodes 2, one rank each): both end 0; the one hosting global rank 0 holds
    the record, the other prints that it ran its ranks and that rank 0's node wrote the record (no traceback)."""
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    agents = [subprocess.Popen([sys.executable, "-m", "reproduce", "run", "--impl", "dense-fbgemm", "--data", "uniform",
                                "--num-tables", "2", "--rows", "100", "--dim", "4", "-b", "8", "--iters", "2",
                                "--warmup", "0", "--mode", "embedding-only", "--world-size", "2", "--nnodes", "2",
                                "--rdzv-endpoint", f"127.0.0.1:{port}", "--out", str(tmp_path / name)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for name in ("a", "b")]
    outs = [a.communicate(timeout=240)[0] for a in agents]
    assert [a.returncode for a in agents] == [0, 0], outs
    recorded = [bool(list((tmp_path / name).glob("*.json"))) for name in ("a", "b")]
    assert sorted(recorded) == [False, True]
    other = outs[recorded.index(False)]
    assert "ran this node's ranks" in other and "global rank 0" in other and "Traceback" not in other
