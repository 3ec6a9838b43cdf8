"""`dlrmbench run --world-size N` under torchrun: one record from rank 0 with every rank's measurements, the
same training as one process over the global batch, a crashed rank ending the run with a reason, and bad
distributed input rejected before or at start-up."""
import pytest

from reproduce.config import RunPoint
from reproduce.launch import check_rendezvous, launch_point

SMALL = dict(data="uniform", iters=3, warmup=1, num_batches=2, mode="embedding-only", lr=0.05,
             data_options={"num_tables": 4, "rows": 2000, "dim": 8}, dist_timeout_s=30.0)


def test_two_ranks_train_like_one_process_over_the_global_batch(tmp_path):
    opts = {"ranks": 4, "micro_batches": 2}
    one = launch_point(RunPoint(impl="ecorec", batch_size=64, impl_options=opts, **SMALL), tmp_path)
    two = launch_point(RunPoint(impl="ecorec", batch_size=32, world_size=2, impl_options=opts, **SMALL), tmp_path)
    assert one["status"] == "ok", one
    assert two["status"] == "ok", two
    # the loss of every timed step: the sum of the ranks' shares equals the single process's loss
    assert two["loss"] == pytest.approx(one["loss"], rel=1e-5, abs=1e-7)
    d = two["dist"]
    assert d["world_size"] == 2 and d["backend"] == "gloo" and len(d["per_rank"]) == 2
    for r in d["per_rank"]:  # each rank sent ids and pooled rows to its peer every step
        assert r["comm_bytes_per_step"]["emb.fwd"] > 0 and r["comm_bytes_per_step"]["emb.ids.values"] > 0
        assert set(r["comm_bytes_per_peer"]["emb.fwd"]) == {str(1 - r["rank"])}
    assert d["comm_bytes_per_step"] > 0 and d["comm_blocked_ms"] >= 0
    assert two["samples_per_s"] > 0 and two["work"]["nnz"] == one["work"]["nnz"]


def test_a_crashed_rank_fails_the_run_with_its_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("DLRMBENCH_FAULT", "1:2")
    # a hang would end at the launcher's limit with "time limit ... exceeded" instead of the rank's reason
    rec = launch_point(RunPoint(impl="ttrec", batch_size=32, world_size=2, impl_options={"ranks": 4}, **SMALL),
                       tmp_path, timeout_s=300)
    assert rec["status"] == "failed"
    assert "rank 1 died first (exit code 3)" in rec["reason"] and "time limit" not in rec["reason"]


@pytest.mark.slow
@pytest.mark.parametrize("victim", [0, 2])
def test_the_killed_rank_is_blamed_not_its_peers(tmp_path, monkeypatch, victim):
    """kill -9 of rank 0 or of a middle rank of 4: the survivors see a reset connection, the record names the victim."""
    monkeypatch.setenv("DLRMBENCH_FAULT", f"{victim}:1:kill")
    rec = launch_point(RunPoint(impl="dense-torch", batch_size=16, world_size=4, **SMALL), tmp_path, timeout_s=300)
    assert rec["status"] == "failed"
    assert rec["reason"].startswith(f"rank {victim} died first (signal 9, SIGKILL)"), rec["reason"]
    assert not list(tmp_path.glob("*.error"))  # the ranks' error files were read and removed


def test_bad_distributed_input(tmp_path):
    # more ranks than tables for table-wise sharding: a clear error at start-up, in the record
    rec = launch_point(RunPoint(impl="ttrec", batch_size=16, world_size=3, impl_options={"ranks": 4},
                                **{**SMALL, "data_options": {"num_tables": 2, "rows": 100, "dim": 8}}), tmp_path)
    assert rec["status"] == "failed" and "needs at least 3 tables, got 2" in rec["reason"]
    with pytest.raises(ValueError, match="not HOST:PORT"):
        RunPoint(impl="ttrec", batch_size=16, world_size=2, nnodes=2, rdzv_endpoint="nohost", **{
            k: v for k, v in SMALL.items()})
    with pytest.raises(ValueError, match="needs --rdzv-endpoint"):
        RunPoint(impl="ttrec", batch_size=16, world_size=2, nnodes=2, **SMALL)
    with pytest.raises(ValueError, match="embark runs over ranks only"):
        RunPoint(impl="embark", batch_size=16, **SMALL)
    with pytest.raises(ValueError, match="whole number of nodes"):
        RunPoint(impl="ttrec", batch_size=16, world_size=4, gpus_per_node=3, **SMALL)
    unreachable = RunPoint(impl="ttrec", batch_size=16, world_size=2, nnodes=2,
                           rdzv_endpoint="no-such-host.invalid:29500", **SMALL)
    with pytest.raises(ValueError, match="cannot resolve"):
        check_rendezvous(unreachable)
    with pytest.raises(ValueError, match="cannot resolve"):
        launch_point(unreachable, tmp_path)  # refused before anything starts
