"""Every sharded path equals the single-process step (forward, loss, tables and MLPs after one step) on gloo
with 2 and 4 processes; bytes equal the closed-form volumes; overlap changes no number."""
import traceback

import pytest
import torch
import torch.multiprocessing as mp

from impls.dist.build import unique_counts
from impls.dist.context import DistContext
from impls.dist.plan import place_tables
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
            except Exception:
                errors.put(f"{name} rank {rank}: {traceback.format_exc()}")
                raise
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


def _expected_table_wise(world, rank, owned, batch, with_mlp_params=0):
    """Bytes rank ``rank`` sends in one table-wise step without pipeline, by phase (closed form)."""
    dims = [t.dim for t in sc.TABLES]
    sizes = [hi - lo for lo, hi in (sc.rank_rows(batch.batch_size, r, world) for r in range(world))]
    local = batch.sparse.split_batch(world)[rank]
    nnz = [local.table(t)[0].numel() for t in range(len(sc.TABLES))]
    peers = [r for r in range(world) if r != rank]
    D = [sum(dims[t] for t in owned[r]) for r in range(world)]
    out = {
        "emb.ids.header": 16 * len(peers),
        "emb.ids.lengths": sum(8 * len(owned[r]) * sizes[rank] for r in peers),
        "emb.ids.values": sum(8 * sum(nnz[t] for t in owned[r]) for r in peers),
        "emb.fwd": sum(4 * sizes[s] * D[rank] for s in peers),
        "emb.bwd": sum(4 * sizes[rank] * D[r] for r in peers),
    }
    if with_mlp_params:
        out["mlp.dp"] = 2 * (world - 1) * 4 * with_mlp_params // world
    return {k: v for k, v in out.items() if v}


def _by_phase(sent):
    out = {}
    for (phase, _), v in sent.items():
        out[phase] = out.get(phase, 0) + v
    return {k: v for k, v in out.items() if v}


def test_bytes_equal_closed_form(tmp_path):
    world = 2
    results = spawn(tmp_path, world, ["dense-tw-dlrm", "elrec-dp", "ecorec-twp"])
    batch = sc.global_batch(12, 3)
    mlp_params = sum(p.numel() for p in sc.mlp_of(num_dense=4, tables=sc.TABLES).parameters())
    for name, rank, _, sent, owned, _ in results:
        got = _by_phase(sent)
        if name == "dense-tw-dlrm":
            assert owned == [[0, 2, 4, 6], [1, 3, 5, 7]]  # sequential: round-robin
            assert got == _expected_table_wise(world, rank, owned, batch, mlp_params), (rank, got)
        elif name == "ecorec-twp":  # LPT on the sampled batch's unique ids; groups cut the same volume
            assert owned == place_tables(unique_counts(batch.sparse), world, "greedy")
            assert got == _expected_table_wise(world, rank, owned, batch), (rank, got)
        else:  # one coalesced all-reduce of every TT core and every small table: 2(G-1)/G of it
            from impls.elrec.collection import ELRec

            shapes = ELRec.plan_shapes(sc.TABLES, ranks=4, tt_min_rows=100)
            elems = sum(s.num_params for s in shapes.values())
            elems += sum(t.num_embeddings * t.dim for i, t in enumerate(sc.TABLES) if i not in shapes)
            assert got == {"emb.dp": 2 * (world - 1) * 4 * elems // world}, got
