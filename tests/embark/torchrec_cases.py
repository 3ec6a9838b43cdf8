"""Each rank of the TorchRec peer tests: DistributedModelParallel against the single-device dense-torch step."""
from __future__ import annotations

import torch
import torch.distributed as dist

from impls.api import EmbeddingOptim, get_impl
from impls.data.loader import rank_rows, rank_slice
from impls.model.train import TrainStep
from tests.sharding.sharded_cases import close, global_batch
from tests.embark.cluster_cases import TABLES

TR_TABLES = tuple(t for t in TABLES if t.dim % 4 == 0)


def check_torchrec(ctx, sharding: str, optim_kind: str = "sgd") -> None:
    from impls.torchrec_peer.collection import TorchRecCollection

    optim = EmbeddingOptim("sgd", lr=0.5) if optim_kind == "sgd" else EmbeddingOptim("adagrad", lr=0.05, eps=1e-4)
    B = 12
    batch = global_batch(B, 7, tables=TR_TABLES)
    ref = get_impl("dense-torch")(TR_TABLES, optim, None, seed=3)
    ref_step = TrainStep(ref, mode="embedding-only", seed=3)
    with torch.no_grad():
        ref_out = ref(batch.sparse).clone()
    ref_loss = float(ref_step(batch))
    coll = TorchRecCollection(TR_TABLES, optim, ctx, seed=3, sharding=sharding)
    chosen = coll.plan_info()["tables"]  # the record's plan: every table's sharding type and ranks
    assert set(chosen) == {t.name for t in TR_TABLES}
    for name, c in chosen.items():
        assert c["type"] in (("table_wise", "column_wise", "data_parallel") if sharding == "planner" else (sharding,))
        assert c["ranks"] and set(c["ranks"]) <= set(range(ctx.world_size)), (name, c)
    from impls.sharding.comm import Comm

    step = TrainStep(coll, mode="embedding-only", seed=3, comm=Comm(ctx), global_batch=B)
    local = rank_slice(batch, ctx.rank, ctx.world_size)
    lo, hi = rank_rows(B, ctx.rank, ctx.world_size)
    with torch.no_grad():
        close(coll(local.sparse), ref_out[lo:hi], f"torchrec {sharding} forward")
    loss = torch.tensor([step(local)], dtype=torch.float64)
    dist.all_reduce(loss)
    assert abs(float(loss) - ref_loss) <= 1e-5 * max(1.0, abs(ref_loss))
    for t in TR_TABLES:
        close(coll.gather_table(t.name), ref.materialize(t.name), f"torchrec {sharding} {t.name} after a step")


def check_refused(ctx, sharding: str) -> None:
    import pytest

    from impls.torchrec_peer.collection import TorchRecCollection

    with pytest.raises(ValueError, match=f"torchrec sharding '{sharding}' is not available"):
        TorchRecCollection(TR_TABLES, EmbeddingOptim("sgd", lr=0.5), ctx, sharding=sharding)
