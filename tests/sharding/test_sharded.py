"""Every sharded path equals the single-process step (forward, loss, tables and MLPs after one step) on gloo
with 2 and 4 processes; bytes equal the closed-form volumes; overlap changes no number."""
import pytest

from impls.sharding.build import unique_counts
from impls.sharding.plan import place_tables
from tests.sharding import sharded_cases as sc
from tests.sharding.ranks import run_ranks

CASES = sc.CASES


def spawn(tmp_path, world, names):
    """(case, rank, loss, bytes, owned, local batch) of every case on every rank."""
    per_rank = run_ranks(tmp_path, world, sc.run_cases, names)
    return [row for rows in per_rank for row in rows]


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
