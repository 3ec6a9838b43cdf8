"""What every rank of the sharded-layer tests runs (spawned processes import this module): a single-process
reference step on the global batch beside the distributed step on this rank's slice, and the comparisons."""
from __future__ import annotations

import copy

import torch
import torch.distributed as dist

from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, get_impl
from impls.data.batch import Batch
from impls.data.loader import rank_rows, rank_slice
from impls.sharding.build import DIST_KEYS, build_sharded
from impls.sharding.comm import Comm
from impls.sharding.context import DistContext
from impls.model.train import TrainStep

TABLES = tuple(TableSpec(f"t{i}", n, 8) for i, n in enumerate([120, 64, 300, 40, 96, 200, 30, 150]))


def global_batch(B: int, seed: int, tables=TABLES, num_dense: int = 4, max_bag: int = 3) -> Batch:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, max_bag + 1, (len(tables) * B,), generator=g)
    lengths[0] = 0  # an empty bag
    vals = []
    for t, spec in enumerate(tables):
        n = int(lengths[t * B : (t + 1) * B].sum())
        v = torch.randint(0, spec.num_embeddings, (n,), generator=g)
        if n:
            v[0] = spec.num_embeddings - 1  # the last row
        vals.append(v)
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=offsets[1:])
    sparse = SparseFeatures(torch.cat(vals), offsets, B)
    return Batch(torch.randn(B, num_dense, generator=g), sparse, torch.randint(0, 2, (B,), generator=g).float())


def mlp_of(num_dense: int, tables=TABLES):
    """The DLRM MLPs of the test model (what the data-parallel MLP all-reduce carries)."""
    from impls.model.dlrm import DLRM

    coll = get_impl("dense-torch")(tables, EmbeddingOptim("sgd", lr=0.1), None)
    m = DLRM(coll, num_dense, (8,), (8,))
    return torch.nn.ModuleList([m.bottom, m.top])


def close(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    tol = max(1e-6, 1e-5 * float(b.abs().max())) if b.numel() else 1e-6
    if not torch.allclose(a, b, rtol=1e-5, atol=tol):
        raise AssertionError(f"{what}: max |diff| {float((a - b).abs().max()):.3g} (tol {tol:.3g})")


def check_case(ctx: DistContext, case: dict) -> dict:
    """Forward, loss and one step of a sharded collection against the single-process step; returns facts
    about the run (bytes, placement) for the caller's further checks."""
    impl, mode, opts = case["impl"], case.get("mode", "embedding-only"), dict(case.get("options", {}))
    optim = EmbeddingOptim(case.get("optim", "sgd"), lr=case.get("lr", 0.5), eps=1e-4)
    B = case.get("batch", 12)
    batch = global_batch(B, case.get("data_seed", 3))
    cls = get_impl(impl)
    tables = TABLES

    ref = cls(tables, optim, None, seed=5, **copy.deepcopy({k: v for k, v in opts.items()
                                                           if k not in DIST_KEYS}))
    ref_step = TrainStep(ref, mode=mode, num_dense=4, seed=5, bottom=(8,), top=(8,))
    with torch.no_grad():
        ref_out = ref(batch.sparse).clone()
    ref_loss = float(ref_step(batch))
    ref_tables = {t.name: ref.materialize(t.name).clone() for t in tables}

    comm = Comm(ctx)
    coll = build_sharded(cls, tables, optim, ctx, comm, stats=batch.sparse if ctx.rank == 0 else None, seed=5,
                         **copy.deepcopy(opts))
    step = TrainStep(coll, mode=mode, num_dense=4, seed=5, bottom=(8,), top=(8,), comm=comm, global_batch=B)
    local = rank_slice(batch, ctx.rank, ctx.world_size)
    lo, hi = rank_rows(B, ctx.rank, ctx.world_size)
    with torch.no_grad():
        out = coll(local.sparse)
    if case.get("exact_forward"):
        assert torch.equal(out, ref_out[lo:hi]), f"{impl}: forward not bit-exact"
    close(out, ref_out[lo:hi], f"{impl} forward")
    before = dict(comm.sent)
    loss = torch.tensor([step(local)], dtype=torch.float64)
    step_bytes = {k: v - before.get(k, 0) for k, v in comm.sent.items()}
    dist.all_reduce(loss)
    assert abs(float(loss) - ref_loss) <= 1e-5 * max(1.0, abs(ref_loss)), (float(loss), ref_loss)
    mine = []
    for t in tables:
        try:
            w = coll.materialize(t.name)
        except KeyError:
            continue
        close(w, ref_tables[t.name], f"{impl} table {t.name} after one step")
        mine.append(t.name)
    if step.model is not None:
        mlp = [(n, p) for n, p in step.model.named_parameters() if not n.startswith("embeddings.")]
        ref_mlp = [p for n, p in ref_step.model.named_parameters() if not n.startswith("embeddings.")]
        assert len(mlp) == len(ref_mlp) > 0
        for (n, p), q in zip(mlp, ref_mlp):
            close(p.detach(), q.detach(), f"{impl} MLP {n} after one step")
    for t in tables:  # every table whole on every rank (a collective), wherever it lives
        close(coll.gather_table(t.name), ref_tables[t.name], f"{impl} gathered table {t.name} after one step")
    held = [None] * ctx.world_size
    dist.all_gather_object(held, mine)
    assert sorted(sum(held, [])) == sorted({t.name for t in tables}) or len(set(map(tuple, held))) == 1, held
    return {"loss": float(loss), "bytes": step_bytes, "owned": getattr(coll, "owned", None),
            "groups": getattr(coll, "groups", None), "local_batch": hi - lo, "work": coll.work_report()}



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
    "ecorec-twp-g3": {"impl": "ecorec", "options": {"ranks": 4, "pipeline_groups": 3, "skew": 0.6}},
    "ecorec-bwp": {"impl": "ecorec", "options": {"ranks": 4, "pipeline": "batch", "pipeline_micro_batches": 3}},
    "elrec-tw-greedy": {"impl": "elrec", "mode": "dlrm", "options": {"ranks": 4, **TW, "placement": "greedy"}},
}


def run_cases(ctx, names) -> list[tuple]:
    """Every named case on this rank, in one process group: (name, rank, loss, bytes, owned, local batch)."""
    out = []
    for name in names:
        try:
            facts = check_case(ctx, CASES[name])
        except Exception as exc:
            raise AssertionError(f"case {name}: {exc}") from exc
        out.append((name, ctx.rank, facts["loss"], facts["bytes"], facts["owned"], facts["local_batch"]))
    return out
