"""EMBark's engine against TorchRec on the same gloo world: the same tables (HugeCTR's DCNv2 workload, rows capped
so it fits this machine), the same local batch, embedding-only SGD steps. Sides: TorchRec table-wise (its own
planner's placement, fbgemm TBE), our table-wise plan (round_robin: every table whole on one rank) and our
planner's plan (on this machine's calibration profile: `make bench` writes it first when missing), both with fbgemm
storage (the same kernels as TorchRec's). Every rank steps each side once per
round in turn (A B C A B C); per round each side's step is the slowest rank's, and its ratio to TorchRec's in
that round is reported as the median and range over rounds."""
from pathlib import Path

import pytest
import torch

from benchmarks.conftest import report
from tests.sharding.ranks import run_ranks

WORLD, LOCAL_BATCH, MAX_ROWS, ROUNDS = 2, 1024, 20_000, 5
DATA = "dcnv2-multihot"
SECTION = "EMBark vs TorchRec, one gloo world (median over interleaved rounds; range)"


def _sides(ctx, tables, B, profile):
    from impls.api import EmbeddingOptim, get_impl
    from impls.embark.collection import EmbarkCollection
    from impls.sharding.comm import Comm

    class Stats:
        batch_size = B * ctx.world_size

    optim = EmbeddingOptim("sgd", lr=0.01)
    sides = {"torchrec table-wise": get_impl("torchrec")(tables, optim, ctx, sharding="table_wise",
                                                         check_bounds=False)}
    for label, strategy in (("embark table-wise", "round_robin"), ("embark planner", "embark")):
        sides[label] = EmbarkCollection.build_distributed(tables, optim, ctx, Comm(ctx), stats=Stats,
                                                          strategy=strategy, storage="fbgemm", check_bounds=False,
                                                          calibration=profile)
    return sides


def _rank(ctx, rounds, profile):
    import time

    import torch.distributed as dist

    from impls.data.presets import get_preset
    from impls.data.synthetic import SyntheticSource
    from reproduce.harness.allocator import retain_freed_memory

    allocator = retain_freed_memory()  # the policy every measured process of the harness runs under
    src = SyntheticSource(get_preset(DATA, max_rows=MAX_ROWS))
    features = src.batch(ctx.rank, LOCAL_BATCH).sparse
    sides = _sides(ctx, src.tables, LOCAL_BATCH, profile)

    def step(coll):
        dist.barrier()
        t = time.perf_counter()
        coll(features).sum().backward()
        coll.optimizer_step()
        took = torch.tensor([time.perf_counter() - t])
        dist.all_reduce(took, op=dist.ReduceOp.MAX)  # the step of the slowest rank
        return float(took)

    for coll in sides.values():  # warm-up: first-step allocations, fbgemm's caches
        step(coll)
        step(coll)
    times = {k: [] for k in sides}
    for _ in range(rounds):
        for k, coll in sides.items():
            times[k].append(step(coll))
    info = {k: c.plan_info() or {} for k, c in sides.items()}
    return {"times": times, "shards": {k: i.get("shards") for k, i in info.items()}, "nnz": features.nnz,
            "profile_sha": info["embark planner"].get("profile_sha"), "allocator": allocator}


def med(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


@pytest.mark.skipif(not torch.distributed.is_gloo_available(), reason="needs gloo")
def test_embark_vs_torchrec(benchmark, tmp_path):
    pytest.importorskip("torchrec")
    pytest.importorskip("fbgemm_gpu")
    from reproduce.harness.calibration import profile_path
    from reproduce.harness.code import ROOT
    from reproduce.harness.machine import this_machine

    profile = str(profile_path(ROOT / "results", this_machine(), "gloo"))  # missing: the planner says how to write it
    res = benchmark.pedantic(run_ranks, args=(tmp_path, WORLD, _rank, ROUNDS, profile), rounds=1, iterations=1)[0]
    base = res["times"]["torchrec table-wise"]
    summary = {}
    for k, ts in res["times"].items():
        ratio = [t / b for t, b in zip(ts, base)]
        summary[k] = {"step_ms": med(ts) * 1e3, "over_torchrec": med(ratio), "range": [min(ratio), max(ratio)],
                      "shards": res["shards"][k], "rounds": len(ts)}
        report(SECTION, {"side": k, "step ms": summary[k]["step_ms"], "x torchrec": summary[k]["over_torchrec"],
                         "range": f"{min(ratio):.2f}-{max(ratio):.2f}", "shards": str(res["shards"][k])},
               f"{DATA} capped at {MAX_ROWS} rows, local batch {LOCAL_BATCH}, {WORLD} gloo ranks, 1 thread each, "
               f"embedding-only SGD; {ROUNDS} interleaved rounds, each side's step the slowest rank's")
    benchmark.extra_info.update(sides=summary, per_round=res["times"], world=WORLD, local_batch=LOCAL_BATCH,
                                max_rows=MAX_ROWS, data=DATA, nnz_per_rank=res["nnz"],
                                profile=str(Path(profile).relative_to(ROOT)),
                                profile_sha=res["profile_sha"], allocator=res["allocator"])
