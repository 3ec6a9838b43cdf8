"""`data synth --teacher vector`: the same ids and dense features as the stream, labels drawn from the vector teacher
(d independent numbers per id) - a float64 loop oracle of its logit, labels that follow it, and a folder keyed by
its teacher."""
import math

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.api import SparseFeatures
from impls.data.batch import Batch
from impls.data.export import write_synthetic
from impls.data.hashing import unit_uniform
from impls.data.prepared_source import PreparedSource
from impls.data.presets import get_preset
from impls.data.synthetic import SyntheticSource
from impls.data.teachers import VectorTeacher
from reproduce.cli import cli


def _oracle_logit(teacher, batch, b):
    """Sample b's logit, written as loops over tables, bags, ids and entries."""
    T, B = len(teacher.widths), batch.sparse.batch_size
    off, val = batch.sparse.offsets.tolist(), batch.sparse.values.tolist()
    means = []
    for t in range(T):
        ids = val[off[t * B + b]:off[t * B + b + 1]]
        d = teacher.widths[t]
        m = [0.0] * d
        for x in ids:
            for j in range(d):
                key = (teacher.seed * 1_000_003 + t) * 4099 + j
                m[j] += math.sqrt(3.0) * (2.0 * float(unit_uniform(np.array([x]), key)[0]) - 1.0) / len(ids)
        means.append(m)
    z = teacher.bias + sum((float(batch.dense[b, k]) - 1.0) * teacher.w_dense[k] for k in range(len(teacher.w_dense)))
    for t in range(T):
        z += sum(means[t][i] * teacher.a[t][i] for i in range(teacher.widths[t]))
        nxt = means[(t + 1) % T]
        z += sum(means[t][i] * teacher.W[t][i, j] * nxt[j] for i in range(len(means[t])) for j in range(len(nxt)))
    return z


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 4), st.sampled_from([2, 4, 8]), st.integers(1, 6), st.integers(0, 3))
def test_vector_teacher_logit_against_a_float64_loop(num_tables, dim, batch_size, seed):
    spec = get_preset("uniform", num_tables=num_tables, rows=50, dim=dim, hotness=2, bag_sizes="random", seed=seed)
    batch = SyntheticSource(spec).batch(0, batch_size)  # random bag sizes: empty bags included
    teacher = VectorTeacher(spec.tables, spec.num_dense, seed=seed + 7)
    z = teacher.logits(batch)
    for b in range(batch_size):
        assert z[b] == pytest.approx(_oracle_logit(teacher, batch, b), rel=1e-9, abs=1e-9)


def test_vector_teacher_entries_are_unit_variance_and_independent_per_id():
    spec = get_preset("uniform", num_tables=2, rows=10**6, dim=8)
    teacher = VectorTeacher(spec.tables, spec.num_dense, seed=3)
    u = teacher.vectors(0, np.arange(20_000))
    assert u.shape == (20_000, 8)
    assert np.allclose(u.var(axis=0), 1.0, atol=0.05) and np.abs(u.mean(axis=0)).max() < 0.05
    corr = np.corrcoef(u.T)
    assert np.abs(corr - np.eye(8)).max() < 0.05  # no shared direction: no low-rank structure to find
    assert not np.allclose(teacher.vectors(1, np.arange(100)), teacher.vectors(0, np.arange(100)))


def test_labels_follow_the_teacher_and_the_export_keeps_ids_and_dense(tmp_path):
    from sklearn.metrics import roc_auc_score

    spec = get_preset("criteo-kaggle", max_rows=5000, dim=4)
    meta = write_synthetic("criteo-kaggle", spec, tmp_path / "v", 4000, 0, chunk=1000, teacher="vector")
    assert "teacher=vector" in meta.synthetic
    scalar = write_synthetic("criteo-kaggle", spec, tmp_path / "s", 4000, 0, chunk=1000)
    v, s = PreparedSource(tmp_path / "v").batch(0, 4000), PreparedSource(tmp_path / "s").batch(0, 4000)
    assert torch.equal(v.sparse.values, s.sparse.values) and torch.equal(v.dense, s.dense)
    assert not torch.equal(v.labels, s.labels) and scalar.synthetic == repr(spec)
    teacher = VectorTeacher(spec.tables, spec.num_dense, spec.teacher_seed)
    z = np.concatenate([teacher.logits(Batch(v.dense[i:i + 1000], _rows(v.sparse, i, 1000), v.labels[i:i + 1000]))
                        for i in range(0, 4000, 1000)])
    assert roc_auc_score(v.labels.numpy(), z) > 0.7  # the labels are the teacher's draws
    assert 0.05 < float(v.labels.mean()) < 0.6
    with pytest.raises(ValueError, match="teacher"):  # a folder made with another teacher is refused, not reused
        write_synthetic("criteo-kaggle", spec, tmp_path / "s", 4000, 0, chunk=1000, teacher="vector")
    with pytest.raises(ValueError, match="teacher must be one of"):
        write_synthetic("criteo-kaggle", spec, tmp_path / "x", 10, 0, teacher="linear")


def _rows(sparse, start, n):
    """Samples [start, start + n) of a table-major batch."""
    T = sparse.num_tables
    vals, lens = [], []
    for t in range(T):
        v, o = sparse.table(t)
        lo, hi = int(o[start]), int(o[start + n])
        vals.append(v[lo:hi])
        lens.append(o[start + 1:start + n + 1] - o[start:start + n])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(torch.cat(lens), 0)])
    return SparseFeatures(torch.cat(vals), offsets, n)


def test_data_synth_cli_takes_the_teacher(tmp_path):
    res = CliRunner().invoke(cli, ["data", "synth", "uniform", "--out", str(tmp_path / "u"), "--samples", "64",
                                   "--num-tables", "2", "--rows", "100", "--dim", "4", "--teacher", "vector"])
    assert res.exit_code == 0, res.output
    assert "teacher=vector" in PreparedSource(tmp_path / "u").meta.synthetic
