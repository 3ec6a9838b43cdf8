"""Meta dlrm_datasets traces: a small file in the exact format, table selection, batch slicing, bad files."""
import gzip

import pytest
import torch

from impls.data.meta_traces import MetaTraceSource, load_trace


def write_trace(path, T=3, B=8, seed=0, two_d=False):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 5, (T, B), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.reshape(-1).cumsum(0)])
    indices = torch.randint(0, 100, (int(offsets[-1]),), generator=g)
    with gzip.open(path, "wb") as f:
        torch.save((indices, offsets, lengths if two_d else lengths.reshape(-1)), f)
    return indices, offsets, lengths


def test_load_and_slice(tmp_path):
    p = tmp_path / "fbgemm_t3_bs8_0.pt.gz"
    indices, offsets, lengths = write_trace(p)
    idx, off, T, B = load_trace(p)
    assert (T, B) == (3, 8) and torch.equal(idx, indices)
    src = MetaTraceSource(p, tables=[2, 0], dim=8)
    assert [t.name for t in src.tables] == ["t2", "t0"]
    b = src.batch(1, 4)  # samples 4..7
    b.sparse.validate(src.tables)
    for k, t in enumerate([2, 0]):
        v, o = b.sparse.table(k)
        want = [indices[int(offsets[t * 8 + s]) : int(offsets[t * 8 + s + 1])].tolist() for s in range(4, 8)]
        got = [v[int(o[i]) : int(o[i + 1])].tolist() for i in range(4)]
        assert got == want
    wrap = src.batch(1, 5)  # samples 5, 6, 7, 0, 1
    assert wrap.sparse.table(1)[1].diff().tolist() == [int(lengths[0, s]) for s in (5, 6, 7, 0, 1)]


def test_two_d_lengths_and_bad_files(tmp_path):
    p = tmp_path / "trace.pt.gz"
    write_trace(p, T=2, B=5, two_d=True)
    assert load_trace(p)[2:] == (2, 5)
    q = tmp_path / "noname.pt.gz"
    write_trace(q, T=2, B=5)
    with pytest.raises(ValueError, match="no table count"):
        load_trace(q)
    assert load_trace(q, num_tables=2)[2:] == (2, 5)
    trunc = tmp_path / "fbgemm_t2_bs5.pt.gz"
    trunc.write_bytes(p.read_bytes()[:-30])
    with pytest.raises(ValueError, match="cannot read the trace"):
        load_trace(trunc)
    bad = tmp_path / "fbgemm_t2_bs5_bad.pt.gz"
    idx, off, lens = write_trace(bad, T=2, B=5)
    with gzip.open(bad, "wb") as f:
        torch.save((idx, off, lens.reshape(-1) + 1), f)
    with pytest.raises(ValueError, match="lengths disagree with offsets at table 0, bag 0"):
        load_trace(bad)
    with pytest.raises(ValueError, match=r"table\(s\) \[7\] not in"):
        MetaTraceSource(p, tables=[7])
    with pytest.raises(ValueError, match="batch size must be in 1..5"):
        MetaTraceSource(p).batch(0, 6)
