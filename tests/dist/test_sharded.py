"""Every sharded path equals the single-process step (forward, loss, tables and MLPs after one step) on gloo
with 2 and 4 processes; bytes equal the closed-form volumes; overlap changes no number."""
import traceback

import pytest
import torch
import torch.multiprocessing as mp

from impls.dist.context import DistContext
from tests.dist import sharded_cases as sc

TW = {"sharding": "table-wise"}
CASES = {
    "dense-tw-dlrm": {"impl": "dense-torch", "mode": "dlrm", "options": {}, "exact_forward": True},
    "dense-dp-adagrad": {"impl": "dense-torch", "optim": "adagrad", "lr": 0.05,
                         "options": {"sharding": "data-parallel"}},
    "ttrec-tw": {"impl": "ttrec", "options": {"ranks": 4}},
    "elrec-dp": {"impl": "elrec", "options": {"ranks": 4, "tt_min_rows": 100}},
    "elrec-dp-dlrm-adagrad": {"impl": "elrec", "mode": "dlrm", "optim": "adagrad", "lr": 0.05,
                              "options": {"ranks": 4, "tt_min_rows": 100}},
    "ecorec-twp": {"impl": "ecorec", "options": {"ranks": 4, "micro_batches": 2}},
    "ecorec-twp-sync": {"impl": "ecorec", "options": {"ranks": 4, "micro_batches": 2, "overlap": False}},
    "ecorec-bwp": {"impl": "ecorec", "options": {"ranks": 4, "pipeline": "batch", "pipeline_micro_batches": 3}},
    "elrec-tw-greedy": {"impl": "elrec", "mode": "dlrm", "options": {"ranks": 4, **TW, "placement": "greedy"}},
}


def _run(rank, world, init, names, errors, results):
    try:
        torch.set_num_threads(1)
        ctx = DistContext.init(rank, world, init, timeout_s=60)
        for name in names:
            try:
                facts = sc.check_case(ctx, CASES[name])
            except Exception as exc:  # noqa: BLE001
                errors.put(f"{name} rank {rank}: {traceback.format_exc()}")
                raise
            if rank == 0 or True:
                results.put((name, rank, facts["loss"], facts["bytes"], facts["owned"], facts["local_batch"]))
        ctx.close()
    except BaseException as exc:  # noqa: BLE001
        errors.put(f"rank {rank}: {type(exc).__name__}: {exc}")


def spawn(tmp_path, world, names):
    ctx = mp.get_context("spawn")
    errors, results = ctx.SimpleQueue(), ctx.SimpleQueue()
    mp.start_processes(_run, args=(world, f"file://{tmp_path}/rdzv", names, errors, results), nprocs=world,
                       start_method="spawn", join=True)
    msgs = []
    while not errors.empty():
        msgs.append(errors.get())
    assert not msgs, "\n".join(msgs)
    out = []
    while not results.empty():
        out.append(results.get())
    return out


@pytest.mark.parametrize("world", [2, 4])
def test_sharded_paths_equal_single_process(tmp_path, world):
    results = spawn(tmp_path, world, list(CASES))
    assert len(results) == world * len(CASES)
    loss = {(n, r): l for n, r, l, *_ in results}
    # overlap on and off: the same loss on every rank, to the bit
    for r in range(world):
        assert loss[("ecorec-twp", r)] == loss[("ecorec-twp-sync", r)]
