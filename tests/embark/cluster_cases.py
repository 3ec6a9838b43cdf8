"""What each rank of the EMBark cluster tests runs: the sharded step beside the single-device dense-torch step
on the global batch, and the bytes the work layer (impls/work/exchange.py) counts from the plan and the batch."""
from __future__ import annotations

import torch
import torch.distributed as dist

from impls.api import EmbeddingOptim, TableSpec, get_impl
from impls.data.loader import rank_rows, rank_slice
from impls.sharding.comm import Comm
from impls.embark.collection import EmbarkCollection
from impls.embark.shards import Plan, TablePlacement
from impls.model.train import TrainStep
from tests.sharding.sharded_cases import close, global_batch

TABLES = (TableSpec("a", 50, 8), TableSpec("b", 40, 8), TableSpec("c", 30, 8, pooling="mean"),
          TableSpec("d", 60, 8), TableSpec("e", 20, 8), TableSpec("f", 25, 8), TableSpec("g", 16, 8))


def plan_for(world: int) -> Plan:
    """Every kind of shard: table-wise, row-split, column-split, row x column, UB over all and over some, DP."""
    G = world
    mp = (
        TablePlacement(0, (G - 1,)),  # a: table-wise
        TablePlacement(1, tuple(range(G))),  # b: row-split over every rank
        TablePlacement(2, (1 % G, 0), c=2) if G >= 2 else TablePlacement(2, (0,)),  # c (mean): 2 column shards
        TablePlacement(3, tuple(reversed(range(G))), c=2 if G % 2 == 0 else 1),  # d: rows x columns
        TablePlacement(4, tuple(range(G)), cluster="ub"),  # e: unique-based over every rank
        TablePlacement(5, (0,), cluster="ub"),  # f: unique-based on one rank
    )
    return Plan(G, G, dp=(6,), mp=mp)


def hier_plan() -> Plan:
    """4 ranks as 2 nodes of 2: RB tables row-sharded over a node's GPUs (a, b), over both nodes (d), a column
    group per node (c); UB and DP as in plan_for."""
    mp = (TablePlacement(0, (0, 1)), TablePlacement(1, (2, 3)), TablePlacement(2, (0, 1, 2, 3), c=2),
          TablePlacement(3, (0, 1, 2, 3)), TablePlacement(4, (0, 1, 2, 3), cluster="ub"),
          TablePlacement(5, (3,), cluster="ub"))
    return Plan(4, 2, dp=(6,), mp=mp, hierarchical=True)


def expected_bytes(ctx, plan: Plan, batch, B: int, fp16: bool) -> dict[str, int]:
    """Bytes this rank sends per phase, as the work layer (impls/work/exchange.py) counts them from the plan and
    the ranks' local batches."""
    from impls.work.exchange import Exchange, SampledKeys, embark, rank_sizes

    G = ctx.world_size
    ex = Exchange(G)
    embark(ex, TABLES, plan, rank_sizes(B, G), SampledKeys([rank_slice(batch, s, G).sparse for s in range(G)]),
           fp16=fp16, gpus_per_node=ctx.local_world_size)
    return ex.by_phase(ctx.rank)


def modeled_lookups(ctx, plan: Plan, batch, B: int) -> list[float]:
    """Rows every rank's stores look up, as the work layer counts them (impls/work/exchange.embark_lookups)."""
    from impls.work.exchange import SampledKeys, embark_lookups

    G = ctx.world_size
    return embark_lookups(TABLES, plan, SampledKeys([rank_slice(batch, s, G).sparse for s in range(G)]))


def flat_inter_node_bytes(plan: Plan, B: int, L: int) -> list[int]:
    """Per GPU: the RB partial-sum bytes a flat exchange of ``plan``'s shards sends to the other nodes' GPUs."""
    G = plan.world_size
    sizes = [hi - lo for lo, hi in (rank_rows(B, r, G) for r in range(G))]
    out = []
    for g in range(G):
        D = sum(TABLES[s.table].dim // s.cols for s in plan.gpu_shards(g) if plan.cluster_of(s.table) == "rb")
        out.append(4 * D * sum(sizes[s] for s in range(G) if s // L != g // L))
    return out


def check_embark(ctx, optim_kind: str = "sgd", fp16: bool = False, hierarchical: bool = False) -> dict:
    optim = EmbeddingOptim(optim_kind, lr=0.5 if optim_kind == "sgd" else 0.05, eps=1e-4)
    B = 12
    batch = global_batch(B, 7, tables=TABLES)
    plan = hier_plan() if hierarchical else plan_for(ctx.world_size)
    ref = get_impl("dense-torch")(TABLES, optim, None, seed=3)
    ref_step = TrainStep(ref, mode="embedding-only", seed=3)
    with torch.no_grad():
        ref_out = ref(batch.sparse).clone()
    ref_loss = float(ref_step(batch))

    comm = Comm(ctx)
    coll = EmbarkCollection(TABLES, optim, ctx, plan=plan, comm=comm, seed=3, fp16_comm=fp16)
    step = TrainStep(coll, mode="embedding-only", seed=3, comm=comm, global_batch=B)
    local = rank_slice(batch, ctx.rank, ctx.world_size)
    lo, hi = rank_rows(B, ctx.rank, ctx.world_size)
    tol = 2e-3 if fp16 else None
    with torch.no_grad():
        out = coll(local.sparse)
    if tol:
        assert torch.allclose(out, ref_out[lo:hi], rtol=tol, atol=tol * float(ref_out.abs().max()))
    else:
        close(out, ref_out[lo:hi], "embark forward")
    before = dict(comm.sent)
    loss = torch.tensor([step(local)], dtype=torch.float64)
    sent = {}
    for (phase, _), v in comm.sent.items():
        d = v - before.get((phase, _), 0)
        if d:
            sent[phase] = sent.get(phase, 0) + d
    looked_up = coll.work_report().nnz
    dist.all_reduce(loss)
    assert abs(float(loss) - ref_loss) <= (1e-3 if fp16 else 1e-5) * max(1.0, abs(ref_loss))
    assert looked_up == modeled_lookups(ctx, plan, batch, B)[ctx.rank], (ctx.rank, looked_up, modeled_lookups(ctx, plan, batch, B))
    for t in TABLES:
        w = coll.gather_table(t.name)
        want = ref.materialize(t.name)
        if tol:
            assert torch.allclose(w, want, rtol=tol, atol=tol * float(want.abs().max())), t.name
        else:
            close(w, want, f"embark table {t.name} after one step")
    assert sent == expected_bytes(ctx, plan, batch, B, fp16), (ctx.rank, sent, expected_bytes(ctx, plan, batch, B, fp16))
    return sent


def check_tt_storage(ctx) -> None:
    """A cluster whose shards are ecorec TT tables: the forward is the pooled lookup of the tables the shards
    represent (gathered), and the shards hold fewer parameters than the dense rows."""
    import torch.nn.functional as F

    tables = tuple(TableSpec(f"t{i}", 4000, 16, hotness=2) for i in range(3))
    B = 12
    batch = global_batch(B, 5, tables=tables)
    mp = (TablePlacement(0, tuple(range(ctx.world_size))), TablePlacement(1, (0,)),
          TablePlacement(2, tuple(range(ctx.world_size)), cluster="ub"))
    plan = Plan(ctx.world_size, ctx.world_size, mp=mp)
    coll = EmbarkCollection(tables, EmbeddingOptim("sgd", lr=0.1), ctx, plan=plan, storage="tt",
                            storage_options={"ranks": 4, "tt_min_rows": 0})
    local = rank_slice(batch, ctx.rank, ctx.world_size).sparse
    with torch.no_grad():
        out = coll(local)
    for i, t in enumerate(tables):
        full = coll.gather_table(t.name)
        vals, offs = local.table(i)
        want = F.embedding_bag(vals, full, offs, mode="sum", include_last_offset=True)
        close(out[:, 16 * i : 16 * (i + 1)], want, f"tt storage {t.name}")
    assert coll.memory_report().params < sum(4000 * 16 * 4 for _ in tables) / ctx.world_size


def check_strategy_plans(ctx, strategy: str) -> None:
    """Plans the planner and its baselines make for this world execute to the single-device numbers."""
    from impls.embark.cost import HARDWARE, CostModel
    from impls.embark.planner import make_plan

    B = 12
    batch = global_batch(B, 9, tables=TABLES)
    model = CostModel(HARDWARE["cpu-gloo"], ctx.world_size, ctx.local_world_size, B)
    plan, _ = make_plan(TABLES, model, strategy, clusters=True)
    optim = EmbeddingOptim("sgd", lr=0.5)
    ref = get_impl("dense-torch")(TABLES, optim, None, seed=3)
    ref_step = TrainStep(ref, mode="embedding-only", seed=3)
    ref_loss = float(ref_step(batch))
    comm = Comm(ctx)
    coll = EmbarkCollection(TABLES, optim, ctx, plan=plan, comm=comm, seed=3)
    step = TrainStep(coll, mode="embedding-only", seed=3, comm=comm, global_batch=B)
    loss = torch.tensor([step(rank_slice(batch, ctx.rank, ctx.world_size))], dtype=torch.float64)
    dist.all_reduce(loss)
    assert abs(float(loss) - ref_loss) <= 1e-5 * max(1.0, abs(ref_loss)), (strategy, float(loss), ref_loss)
    for t in TABLES:
        close(coll.gather_table(t.name), ref.materialize(t.name), f"{strategy} plan, table {t.name}")


def check_build_generates_own_shards_only(ctx) -> None:
    """Building a rank's clusters draws the initial rows of its own shards (and its DP replicas), never a whole
    model-parallel table: every draw goes through counter_uniform, counted here."""
    from impls.core import ops
    from impls.embark.shards import shard_rows

    drawn = []
    real = ops.counter_uniform

    def counting(seed, out, *args, **kw):
        drawn.append(out.numel())
        return real(seed, out, *args, **kw)

    ops.counter_uniform = counting
    try:
        plan = plan_for(ctx.world_size)
        EmbarkCollection(TABLES, EmbeddingOptim("sgd", lr=0.1), ctx, plan=plan, seed=3)
    finally:
        ops.counter_uniform = real
    own = sum(shard_rows(TABLES[s.table].num_embeddings, s.rows, s.row) * TABLES[s.table].dim // s.cols
              for s in plan.gpu_shards(ctx.rank))
    dp = sum(TABLES[t].num_embeddings * TABLES[t].dim for t in plan.dp)
    # each shard is drawn at most twice (its storage's own init, then the rows of the whole table) and never more
    assert max(drawn) <= max(own, dp), (drawn, own, dp)
    assert sum(drawn) <= 2 * own + dp, (sum(drawn), own, dp)


def check_calibrated_planner(ctx, profile_path: str) -> None:
    """The calibrated planner (build_distributed, cost=calibrated, a sampled batch on rank 0): every rank takes rank
    0's plan, which executes to the single-device numbers; the record's plan names the cost, the profile (path and
    digest), the storage, every candidate's prediction and the chosen plan's breakdown."""
    B = 12
    batch = global_batch(B, 9, tables=TABLES)
    optim = EmbeddingOptim("sgd", lr=0.5)
    ref = get_impl("dense-torch")(TABLES, optim, None, seed=3)
    ref_loss = float(TrainStep(ref, mode="embedding-only", seed=3)(batch))
    comm = Comm(ctx)
    coll = EmbarkCollection.build_distributed(TABLES, optim, ctx, comm, stats=batch.sparse if ctx.rank == 0 else None,
                                              strategy="embark", cost="calibrated",
                                              calibration=profile_path, seed=3)
    info = coll.plan_info()
    assert info["cost"] == "calibrated" and info["profile"] == profile_path and len(info["profile_sha"]) == 12
    assert info["storage"] in ("dense", "fbgemm") and info["predicted_by"] == "calibrated"
    assert info["margin"] == 0.0 and info["not_worth_its_risk"] is None  # a profile without a measured error
    assert {"round_robin", "table_row_wise", "uniform", "balanced"} <= set(info["candidates"])
    assert info["predicted_step_ms"] == info["predicted"]["total_ms"] <= min(info["candidates"].values()) * (1 + 1e-9)
    plans = comm.all_gather_object(coll.plan)
    assert all(p == plans[0] for p in plans)
    step = TrainStep(coll, mode="embedding-only", seed=3, comm=comm, global_batch=B)
    loss = torch.tensor([step(rank_slice(batch, ctx.rank, ctx.world_size))], dtype=torch.float64)
    dist.all_reduce(loss)
    assert abs(float(loss) - ref_loss) <= 1e-5 * max(1.0, abs(ref_loss)), (float(loss), ref_loss)
    for t in TABLES:
        close(coll.gather_table(t.name), ref.materialize(t.name), f"calibrated plan, table {t.name}")
