"""EL-Rec's global index reordering: a bijection per table, hot rows first, co-accessed rows adjacent, the model
invariant under it, and fewer TT prefix groups (E1) on held-out batches."""
import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, get_impl
from impls.core.tt import suggest_tt_shapes
from impls.core.tt_batch import redundancy
from impls.data.batch import Batch
from impls.data.presets import get_preset
from impls.data.reorder import Reordering, ReorderedSource, build_reordering
from impls.data.sources import HELD_OUT_START, held_out, open_source
from impls.data.synthetic import SyntheticSource
from reproduce.cli import cli


def skewed():
    return SyntheticSource(get_preset("uniform", num_tables=2, rows=200_000, dim=8, alpha=1.05, hotness=4))


def mean_e1_per_nnz(source, table, B=2048, batches=4):
    radix = suggest_tt_shapes(source.tables[table].num_embeddings, 3)[-1]
    nnz = e1 = 0
    for k in range(batches):
        v, o = source.batch(HELD_OUT_START + k, B).sparse.table(table)
        n, _, e = redundancy(v, o, B, radix)
        nnz, e1 = nnz + n, e1 + e
    return e1 / nnz


def test_bijection_hot_rows_first_and_e1_drops_on_held_out_batches():
    src = skewed()
    r = build_reordering(src, ["t0"], batches=8, batch_size=2048)
    p = np.asarray(r.perms["t0"])
    assert np.array_equal(np.sort(p), np.arange(200_000))  # a permutation
    ids = np.concatenate([src.batch(k, 2048).sparse.table(0)[0].numpy() for k in range(8)])
    u, c = np.unique(ids, return_counts=True)
    hottest = u[np.lexsort([u, -c])][:100]
    assert p[hottest].tolist() == list(range(100))  # frequency order at the front
    before, after = mean_e1_per_nnz(src, 0), mean_e1_per_nnz(ReorderedSource(src, r), 0)
    assert after < 0.85 * before  # measured 0.225 -> 0.166
    assert mean_e1_per_nnz(ReorderedSource(src, r), 1) == mean_e1_per_nnz(src, 1)  # t1 untouched


class Clustered:
    """Ids in 16 clusters of 64 rows scattered over 4096; each 64-sample mini-batch draws from one cluster."""

    tables = (TableSpec("c", 4096, 4),)
    num_dense = 1

    def __init__(self):
        self.clusters = np.random.default_rng(0).permutation(4096)[:1024].reshape(16, 64)

    def batch(self, index, B):
        rng = np.random.default_rng(index)
        ids = np.concatenate([rng.choice(self.clusters[rng.integers(16)], 64) for _ in range(B // 64)])
        sf = SparseFeatures(torch.from_numpy(ids), torch.arange(B + 1), B)
        return Batch(torch.zeros(B, 1), sf, torch.zeros(B))


def groups_per_minibatch(source, radix=16):
    out = []
    for k in range(20):
        v = source.batch(1000 + k, 64).sparse.values.numpy()
        out.append(len(np.unique(v // radix)))
    return float(np.mean(out))


def test_community_order_makes_co_accessed_rows_adjacent():
    src = Clustered()
    r = build_reordering(src, ["c"], batches=40, batch_size=512, hot_fraction=0.0, graph_batch=64)
    before, after = groups_per_minibatch(src), groups_per_minibatch(ReorderedSource(src, r))
    assert before > 25 and after <= 6  # a cluster's 64 rows now fill ~4 prefix groups of 16


def test_model_is_invariant_under_the_bijection():
    src = skewed()
    r = build_reordering(src, ["t0", "t1"], batches=2, batch_size=512)
    tables = src.tables
    a = get_impl("dense-torch")(tables, EmbeddingOptim("adagrad", lr=0.1), seed=0)
    b = get_impl("dense-torch")(tables, EmbeddingOptim("adagrad", lr=0.1), seed=0)
    with torch.no_grad():
        for i, t in enumerate(tables):
            p = torch.from_numpy(np.asarray(r.perms[t.name]))
            b.weights[i][p] = a.weights[i].clone()
    sf, sr = src.batch(3, 256).sparse, ReorderedSource(src, r).batch(3, 256).sparse
    up = torch.randn(256, 16)
    oa, ob = a(sf), b(sr)
    torch.testing.assert_close(oa, ob)
    (oa * up).sum().backward()
    (ob * up).sum().backward()
    a.optimizer_step()
    b.optimizer_step()
    for t in tables:
        p = torch.from_numpy(np.asarray(r.perms[t.name]))
        torch.testing.assert_close(b.materialize(t.name)[p], a.materialize(t.name))


def test_save_load_and_bad_input(tmp_path):
    src = skewed()
    r = build_reordering(src, ["t1"], batches=1, batch_size=256)
    r.save(tmp_path / "r", {"test": 1})
    back = Reordering.load(tmp_path / "r")
    assert np.array_equal(back.perms["t1"], r.perms["t1"]) and back.info["batch_size"] == 256
    with pytest.raises(ValueError, match="no reorder.json"):
        Reordering.load(tmp_path)
    with pytest.raises(ValueError, match="unknown table"):
        build_reordering(src, ["zz"], 1, 8)
    small = SyntheticSource(get_preset("uniform", num_tables=2, rows=10, dim=8))
    with pytest.raises(ValueError, match="has 200000 rows, the table 10"):
        ReorderedSource(small, r)


def test_cli_reorder_then_run_shows_e1_falling(tmp_path):
    common = ["--data", "uniform", "--num-tables", "1", "--rows", "100000", "--dim", "8", "--alpha", "1.05",
              "--hotness", "4"]
    res = CliRunner().invoke(cli, ["data", "reorder", "uniform", *common[2:], "--out", str(tmp_path / "r"),
                                   "-b", "1024", "--batches", "4", "--min-rows", "1000"])
    assert res.exit_code == 0, res.output
    e1 = {}
    for tag, extra in (("plain", []), ("reordered", ["--reorder", str(tmp_path / "r")])):
        out = tmp_path / tag
        res = CliRunner().invoke(cli, ["run", "--impl", "elrec", *common, "-b", "1024", "--iters", "1", "--warmup",
                                       "0", "--mode", "embedding-only", "--out", str(out), *extra])
        assert res.exit_code == 0, res.output
        (rec,) = [json.loads(p.read_text()) for p in out.glob("*.json")]
        e1[tag] = rec["work"]["e1"]
    assert e1["reordered"] < 0.5 * e1["plain"]
    src = open_source("uniform", reorder=str(tmp_path / "r"), num_tables=1, rows=100000)
    ev, start = held_out("uniform", src)
    assert isinstance(ev, ReorderedSource) and start == HELD_OUT_START
    res = CliRunner().invoke(cli, ["run", "--impl", "elrec", *common, "--reorder", str(tmp_path)])
    assert res.exit_code != 0 and "no reorder.json" in res.output


def test_a_loaded_reordering_relabels_without_writing_to_its_read_only_arrays(tmp_path):
    """The saved permutations are memory-mapped read-only: relabelling indexes them in numpy (no tensor over a
    read-only array, which torch warns is undefined behaviour to write to), and equals the in-memory reordering."""
    import warnings

    src = skewed()
    r = build_reordering(src, ["t1"], batches=1, batch_size=256)
    r.save(tmp_path / "r", {"test": 1})
    back = Reordering.load(tmp_path / "r")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        on_disk = ReorderedSource(src, back).batch(3, 64).sparse.values
    assert torch.equal(on_disk, ReorderedSource(src, r).batch(3, 64).sparse.values)
