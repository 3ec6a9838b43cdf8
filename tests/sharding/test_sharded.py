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


def _modeled(name, rank, world, batch, mlp_params=0):
    """What the work layer (impls/work/exchange.py) says rank ``rank`` sends in one step of case ``name``, by phase."""
    from impls.work.exchange import SampledKeys, rank_sizes, system_exchange

    case = sc.CASES[name]
    sizes = rank_sizes(batch.batch_size, world)
    keys = SampledKeys(batch.sparse.split_batch(world))
    ex = system_exchange(case["impl"], sc.TABLES, case.get("options", {}), sizes, keys,
                         costs=unique_counts(batch.sparse), mlp_params=mlp_params, seed=5)
    return ex.by_phase(rank)


def _by_phase(sent):
    out = {}
    for (phase, _), v in sent.items():
        out[phase] = out.get(phase, 0) + v
    return {k: v for k, v in out.items() if v}


BYTE_CASES = ["dense-tw-dlrm", "elrec-dp", "ecorec-twp", "ttrec-tw", "ecorec-bwp", "elrec-tw-greedy"]


def test_bytes_equal_the_work_model(tmp_path):
    """Every rank's bytes per phase, counted by Comm in the run, equal what the work layer counts from the
    system's own placement, groups and the batch (the id exchange, pooled rows and gradients, the all-reduces)."""
    world = 2
    results = spawn(tmp_path, world, BYTE_CASES)
    batch = sc.global_batch(12, 3)
    mlp_params = sum(p.numel() for p in sc.mlp_of(num_dense=4, tables=sc.TABLES).parameters())
    for name, rank, _, sent, owned, _ in results:
        got = _by_phase(sent)
        dlrm = sc.CASES[name].get("mode") == "dlrm"
        assert got == _modeled(name, rank, world, batch, mlp_params if dlrm else 0), (name, rank, got)
        if name == "dense-tw-dlrm":
            assert owned == [[0, 2, 4, 6], [1, 3, 5, 7]]  # sequential: round-robin
        elif name == "ecorec-twp":  # LPT on the sampled batch's unique ids
            assert owned == place_tables(unique_counts(batch.sparse), world, "greedy")
        elif name == "elrec-dp":
            assert set(got) == {"emb.dp"}
