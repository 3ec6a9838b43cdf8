"""Fault suite, raw files: a truncated .gz keeps every whole line before the cut and names the byte offset; a UTF-8
byte-order mark and Windows line ends are not data (no row lost, no file rejected)."""
import gzip
import zlib

import numpy as np

from impls.data.prepare import prepare_criteo, prepare_text
from tests.data.test_avazu import write_avazu
from tests.data.test_criteo import criteo_line


def test_a_truncated_gzip_keeps_the_rows_before_the_cut(tmp_path):
    rng = np.random.default_rng(0)
    full = tmp_path / "day_0.gz"
    n = 3000
    with gzip.open(full, "wt") as f:
        f.write("\n".join(criteo_line(rng) for _ in range(n)) + "\n")
    cut = tmp_path / "day_1.gz"
    data = full.read_bytes()
    cut.write_bytes(data[: int(len(data) * 0.6)])
    readable = zlib.decompressobj(31).decompress(cut.read_bytes())
    whole = readable.count(b"\n")  # lines before the cut that are complete
    assert 0 < whole < n
    meta = prepare_criteo("t", [cut], tmp_path / "p", "terabyte", chunk_bytes=4096)
    assert sum(meta.rows.values()) == whole  # nothing good lost
    assert meta.bad_lines == 1 and "compressed byte" in meta.bad_examples[0] and f"line {whole + 1}" in \
        meta.bad_examples[0]


def test_byte_order_marks_and_crlf_are_not_data(tmp_path):
    rng = np.random.default_rng(1)
    lines = [criteo_line(rng) for _ in range(40)]
    kaggle = tmp_path / "train.txt"
    kaggle.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode() + b"\r\n")
    meta = prepare_criteo("k", [kaggle], tmp_path / "k", "kaggle")
    assert sum(meta.rows.values()) == 40 and meta.bad_lines == 0  # the first row is kept
    avazu = tmp_path / "train.csv"
    write_avazu(avazu, 30)
    avazu.write_bytes(b"\xef\xbb\xbf" + avazu.read_bytes().replace(b"\n", b"\r\n"))
    meta = prepare_text("avazu", [avazu], tmp_path / "a", "avazu", "random-8-1-1")
    assert sum(meta.rows.values()) == 30 and meta.bad_lines == 0  # the header is recognised


def test_a_complete_dataset_is_reused_only_for_the_same_inputs(tmp_path):
    import pytest

    from tests.data.test_criteo import write_kaggle

    raw = tmp_path / "train.txt"
    write_kaggle(raw, 30)
    out = tmp_path / "p"
    first = prepare_criteo("k", [raw], out, "kaggle")
    assert prepare_criteo("k", [raw], out, "kaggle") == first  # same inputs: reused
    with pytest.raises(ValueError, match="freq_threshold: made from 0, asked 3"):
        prepare_criteo("k", [raw], out, "kaggle", freq_threshold=3)
    write_kaggle(raw, 40)
    with pytest.raises(ValueError, match="raw file train.txt: made from [0-9,]+ bytes"):
        prepare_criteo("k", [raw], out, "kaggle")
    assert (out / "meta.json").exists()  # refused, never rebuilt over


def test_data_prepare_works_from_any_folder(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from reproduce.cli import cli
    from tests.data.test_criteo import write_kaggle

    raw = tmp_path / "train.txt"
    write_kaggle(raw, 20)
    monkeypatch.chdir(tmp_path)  # not the repository root
    res = CliRunner().invoke(cli, ["data", "prepare", "criteo-kaggle", "--raw", str(raw), "--out",
                                   str(tmp_path / "prep")])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["data", "prepare", "nope", "--raw", str(raw)])
    assert res.exit_code == 2 and "criteo-kaggle" in res.output  # the known manifests are listed


def test_hostile_trace_files_are_named_errors(tmp_path):
    import pickle

    import pytest
    import torch

    from impls.data.meta_traces import load_trace

    def save(name, obj):
        p = tmp_path / name
        with gzip.open(p, "wb") as f:
            torch.save(obj, f)
        return p

    lengths = torch.tensor([2, 1, 0, 3])
    offsets = torch.tensor([0, 2, 3, 3, 6])
    idx = torch.arange(6)
    assert load_trace(save("ok_t2_bs2.pt.gz", (idx, offsets, lengths)))[2:] == (2, 2)
    with pytest.raises(ValueError, match="indices are torch.float32; a trace holds integer ids"):
        load_trace(save("f_t2_bs2.pt.gz", (idx.float() + 0.5, offsets, lengths)))
    down = torch.tensor([0, 4, 2, 3, 6])  # a decreasing step, lengths agreeing with it
    with pytest.raises(ValueError, match="offsets decrease at table 0, bag 1 \\(4 -> 2\\)"):
        load_trace(save("d_t2_bs2.pt.gz", (idx, down, down.diff())))
    garbage = tmp_path / "g_t2_bs2.pt"
    garbage.write_bytes(pickle.dumps({"not": "a trace"}))
    with pytest.raises(ValueError, match="cannot read the trace|not a trace file") as err:
        load_trace(garbage)
    assert "weights_only" not in str(err.value)
