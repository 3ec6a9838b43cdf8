"""Avazu CSV reading and preparation on small files written in the exact format (header, 24 columns), malformed
lines included; the seeded 8:1:1 split."""
import gzip

import numpy as np
import pytest
from click.testing import CliRunner

from impls.data.avazu import CAT_NAMES, HEADER, parse_lines
from impls.data.layout import load_prepared
from impls.data.prepare import prepare_text, random_split_ids
from impls.data.prepared_source import PreparedSource
from impls.data.textio import MalformedInput, Problems
from reproduce.cli import cli


def avazu_line(rng, i):
    hour = f"141021{int(rng.integers(0, 3)):02d}"
    fields = [str(10**19 + i), str(int(rng.integers(0, 2))), hour, str(int(rng.choice([1005, 1002, 1010])))]
    fields.append(str(int(rng.integers(0, 3))))  # banner_pos
    for _ in range(9):  # site_id .. device_model: 8-hex-digit hashes, a few values each
        fields.append(format(int(rng.integers(0, 5)) * 0x1F3A5B7 + 0x10000000, "08x"))
    fields += [str(int(rng.integers(0, 3))), str(int(rng.integers(0, 2)))]  # device_type, device_conn_type
    fields += [str(int(rng.integers(15000, 15010))), "320", "50"] + [str(int(rng.integers(0, 30))) for _ in range(5)]
    assert len(fields) == 24
    return ",".join(fields)


BAD = [
    (5, "1,0,14102100"),  # too few columns
    (12, "1,2," + ",".join(["1"] * 22)),  # click not 0/1
    (20, "1,0,14102100,1005,0,zzzzzzzz" + ",1" * 18),  # non-hex site_id
    (30, "1,0,14102100,1005,0,," + "1," * 17 + "1"),  # empty field
    (40, "1,0,14102100,1005,0,123456789" + ",1" * 18),  # 9 digits
]


def write_avazu(path, n, seed=0, bad=(), gz=False, header=HEADER.decode()):
    rng = np.random.default_rng(seed)
    lines = [avazu_line(rng, i) for i in range(n)]
    for i, text in bad:
        lines.insert(i, text)
    text = header + "\n" + "\n".join(lines) + "\n"
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return lines


def reference_parse(lines):
    out = []
    for ln in lines:
        f = ln.split(",")
        if len(f) != 24 or f[1] not in ("0", "1") or any(not x or len(x) > 8 for x in f[2:]):
            continue
        try:
            out.append((int(f[1]), [int(x, 16) for x in f[2:]]))
        except ValueError:
            continue
    return out


def test_header_names_the_22_fields():
    assert HEADER.decode().split(",")[:3] == ["id", "click", "hour"] and len(CAT_NAMES) == 22


def test_parse_lines_matches_plain_python_and_counts_bad_lines(tmp_path):
    lines = write_avazu(tmp_path / "a.csv", 60, bad=BAD)
    probs = Problems()
    rows = parse_lines("\n".join(lines).encode(), lambda i: f"train:{i + 2}", probs, strict=False)
    ref = reference_parse(lines)
    assert len(rows) == len(ref) == 60 and probs.count == len(BAD)
    assert rows.labels.tolist() == [r[0] for r in ref] and rows.cats.tolist() == [r[1] for r in ref]
    assert rows.dense.shape == (60, 0)
    assert probs.examples[0] == "train:7: expected 24 comma-separated columns, got 3"
    assert any("click '2' is not 0 or 1" in e for e in probs.examples)
    assert any("site_id 'zzzzzzzz' is not a hex id" in e for e in probs.examples)
    assert any("site_id '' is not a hex id" in e for e in probs.examples)
    assert any("site_id '123456789'" in e for e in probs.examples)
    with pytest.raises(MalformedInput, match="train:7: expected 24"):
        parse_lines("\n".join(lines).encode(), lambda i: f"train:{i + 2}", Problems(), strict=True)


def test_random_split_is_exact_seeded_and_8_1_1():
    ids = random_split_ids(40_428_967, 2018)
    assert np.bincount(ids).tolist() == [32_343_174, 4_042_897, 4_042_896]
    small = random_split_ids(1000, 2018)
    assert np.array_equal(small, random_split_ids(1000, 2018)) and not np.array_equal(small, random_split_ids(1000, 1))


@pytest.mark.parametrize("gz", [False, True])
def test_prepare_avazu_end_to_end(tmp_path, gz):
    raw = tmp_path / ("train.gz" if gz else "train")
    lines = write_avazu(raw, 500, seed=2, bad=BAD, gz=gz)
    ref = reference_parse(lines)
    meta = prepare_text("avazu", [raw], tmp_path / "p", "avazu", "random-8-1-1", chunk_bytes=2048, seed=5)
    assert meta.bad_lines == len(BAD) and meta.rows == {"train": 400, "val": 50, "test": 50}
    assert meta.tables == list(CAT_NAMES) and meta.num_dense == 0
    # rows land in their seeded split, in file order
    ids = random_split_ids(500, 5)
    out = tmp_path / "p"
    raw_cats = np.array([r[1] for r in ref])
    labels = np.array([r[0] for r in ref])
    for k, split in enumerate(("train", "val", "test")):
        sparse = np.load(out / split / "sparse.npy")
        assert np.load(out / split / "dense.npy").shape == (meta.rows[split], 0)
        assert np.array_equal(np.load(out / split / "labels.npy"), labels[ids == k])
        for j, name in enumerate(CAT_NAMES):
            vocab = np.load(out / "vocab" / f"{name}.npy")
            assert np.array_equal(vocab[sparse[:, j]], raw_cats[ids == k, j])  # categorify inverts
    assert meta.cardinalities[0] == len(np.unique(raw_cats[:, 0])) == 3  # hour: 3 values here
    src = PreparedSource(out, "val", dim=4)
    b = src.batch(0, 8)
    assert b.dense.shape == (8, 0) and b.sparse.nnz == 22 * 8
    b.sparse.validate(src.tables)


def test_wrong_header_truncated_gzip_and_strict(tmp_path):
    good = tmp_path / "train.gz"
    write_avazu(good, 40, gz=True)
    noheader = tmp_path / "noheader.csv"
    write_avazu(noheader, 10, header="id,click,hour")
    trunc = tmp_path / "trunc.gz"
    trunc.write_bytes(good.read_bytes()[:-30])
    meta = prepare_text("avazu", [noheader, trunc, good], tmp_path / "p", "avazu", "random-8-1-1")
    assert meta.bad_lines == 2 and sum(meta.rows.values()) >= 40
    assert any("noheader.csv:1: expected the header" in e for e in meta.bad_examples)
    assert any("trunc.gz: truncated or corrupt gzip" in e for e in meta.bad_examples)
    with pytest.raises(MalformedInput, match="noheader.csv:1: expected the header"):
        prepare_text("avazu", [noheader], tmp_path / "q", "avazu", "random-8-1-1", strict=True)
    assert load_prepared(tmp_path / "q") is None and not (tmp_path / "q").exists()
    assert not (tmp_path / "q.partial").exists()  # --strict leaves no staging folder behind
    with pytest.raises(ValueError, match="no valid rows"):
        prepare_text("avazu", [noheader], tmp_path / "r", "avazu", "random-8-1-1")
    assert not (tmp_path / "r.partial").exists()


def test_cli_prepare_avazu_then_run_with_eval(tmp_path):
    raw = tmp_path / "train.gz"
    write_avazu(raw, 900, seed=7, gz=True)
    res = CliRunner().invoke(cli, ["data", "prepare", "avazu", "--raw", str(tmp_path), "--out", str(tmp_path / "p")])
    assert res.exit_code == 0, res.output
    assert "22 tables" in res.output
    res = CliRunner().invoke(cli, ["run", "--impl", "dense-torch", "--data", str(tmp_path / "p"), "--dim", "4",
                                   "-b", "32", "--iters", "2", "--warmup", "0", "--eval-batches", "2",
                                   "--out", str(tmp_path / "runs")])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["data", "prepare", "meta-dlrm-2021", "--raw", str(raw)])
    assert res.exit_code != 0 and "traces need no preparation" in res.output
    res = CliRunner().invoke(cli, ["run", "--impl", "dense-torch", "--data", str(tmp_path / "p"), "--alpha", "1.2"])
    assert res.exit_code != 0 and "alpha apply to synthetic presets only" in res.output
