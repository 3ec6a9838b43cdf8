"""`data synth` exports and the one source name: an export reads back as the same batches as the stream it
was written from; `data stats` and `run` take presets, prepared folders and trace files alike."""
import pytest
import torch
from click.testing import CliRunner

from impls.data.export import write_synthetic
from impls.data.presets import get_preset
from impls.data.prepared_source import PreparedSource
from impls.data.sources import HELD_OUT_START, check_source, held_out, open_source
from impls.data.synthetic import SyntheticSource
from reproduce.cli import cli
from tests.data.test_meta_traces import write_trace


def same(a, b):
    return (torch.equal(a.sparse.values, b.sparse.values) and torch.equal(a.sparse.offsets, b.sparse.offsets)
            and torch.equal(a.labels, b.labels) and torch.equal(a.dense, b.dense))


@pytest.mark.parametrize("preset,opts", [("uniform", dict(num_tables=3, rows=300, dim=4, hotness=3, bag_sizes="random")),
                                         ("embark-t510", dict(max_rows=2000, dim=4))])
def test_export_reads_back_as_the_stream(tmp_path, preset, opts):
    spec = get_preset(preset, **opts)
    meta = write_synthetic(preset, spec, tmp_path / "s", 100, 20, chunk=25)
    assert meta.rows == {"train": 100, "val": 20} and meta.layout == "multi-hot"
    src, exported = SyntheticSource(spec), PreparedSource(tmp_path / "s")
    assert [t.num_embeddings for t in exported.tables] == [t.num_embeddings for t in spec.tables]
    assert [t.dim for t in exported.tables] == [t.dim for t in spec.tables]
    for i in range(4):
        assert same(src.batch(i, 25), exported.batch(i, 25))
    assert same(src.batch(HELD_OUT_START, 20), PreparedSource(tmp_path / "s", "val").batch(0, 20))
    wrapped = exported.batch(3, 30)  # samples 90..99 then 0..19
    parts = [exported.batch(9, 10), exported.batch(0, 20)]
    for t in range(len(spec.tables)):
        v, o = wrapped.sparse.table(t)
        want = torch.cat([p.sparse.table(t)[0] for p in parts])
        assert torch.equal(v, want)
    assert not (tmp_path / "s.partial").exists()


def test_source_names_and_held_out(tmp_path):
    spec = get_preset("uniform", num_tables=2, rows=50, dim=4)
    write_synthetic("u", spec, tmp_path / "s", 40, 8)
    write_trace(tmp_path / "fbgemm_t3_bs8.pt.gz")
    src = open_source(str(tmp_path / "s"), dim=8)
    assert {t.dim for t in src.tables} == {8}
    ev, start = held_out(str(tmp_path / "s"), src)
    assert ev.split == "val" and start == 0
    syn = open_source("uniform", num_tables=2, rows=50)
    assert held_out("uniform", syn) == (syn, HELD_OUT_START)
    trace = str(tmp_path / "fbgemm_t3_bs8.pt.gz")
    check_source(trace, dim=4)
    with pytest.raises(ValueError, match="carries no labels"):
        held_out(trace, open_source(trace))
    with pytest.raises(ValueError, match="hotness apply to synthetic presets only"):
        check_source(str(tmp_path / "s"), hotness=2.0)
    with pytest.raises(ValueError, match="not a complete prepared dataset"):
        check_source(str(tmp_path))
    with pytest.raises(ValueError, match="trace file .* not found"):
        check_source(str(tmp_path / "x.pt"))


def test_cli_synth_and_stats(tmp_path):
    r = CliRunner()
    res = r.invoke(cli, ["data", "synth", "meta-2022", "--out", str(tmp_path / "m"), "--samples", "300",
                         "--num-tables", "8", "--max-rows", "5000", "--dim", "8"])
    assert res.exit_code == 0, res.output
    assert "wrote" in res.output and "'train': 300" in res.output
    res = r.invoke(cli, ["data", "stats", str(tmp_path / "m"), "-b", "100", "--batches", "1"])
    assert res.exit_code == 0, res.output
    assert "unique fraction" in res.output and "reuse octave" in res.output and "t7" in res.output
    write_trace(tmp_path / "fbgemm_t3_bs8.pt.gz")
    res = r.invoke(cli, ["data", "stats", str(tmp_path / "fbgemm_t3_bs8.pt.gz"), "-b", "8", "--cores", "2"])
    assert res.exit_code == 0 and "E1 for 2 TT cores" in res.output
    res = r.invoke(cli, ["data", "synth", "nope", "--out", str(tmp_path / "n"), "--samples", "3"])
    assert res.exit_code != 0 and "unknown data preset 'nope'" in res.output
    res = r.invoke(cli, ["data", "stats", "criteo-kaggle", "-b", "4096", "--batches", "1"])
    assert res.exit_code == 0 and "C26" in res.output and "top-1% share" in res.output
