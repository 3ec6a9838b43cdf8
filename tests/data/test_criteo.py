"""Criteo TSV reading and preparation on small files written in the exact format, malformed lines included."""
import gzip
import math

import numpy as np
import pytest

from impls.data.criteo import dense_transform, parse_lines
from impls.data.textio import MalformedInput, Problems
from impls.data.layout import load_prepared
from impls.data.prepare import kaggle_splits, prepare_criteo, terabyte_splits
from impls.data.staging import STAGING_MARK


def criteo_line(rng, label=None):
    dense = [str(int(x)) if x >= -3 else "" for x in rng.integers(-5, 50, 13)]
    cats = [format(int(v), "08x") if v >= 0 else "" for v in rng.integers(-2, 40, 26)]
    return "\t".join([str(label if label is not None else int(rng.integers(0, 2)))] + dense + cats)


def write_kaggle(path, n, seed=0, bad=()):
    rng = np.random.default_rng(seed)
    lines = [criteo_line(rng) for _ in range(n)]
    for i, text in bad:
        lines.insert(i, text)
    path.write_text("\n".join(lines) + "\n")
    return lines


BAD = [
    (3, "1\t2\t3"),  # too few columns
    (10, "\t".join(["1"] + ["0"] * 13 + ["0000abcd"] * 26 + ["extra"])),  # too many
    (20, "\t".join(["2"] + ["0"] * 13 + ["0000abcd"] * 26)),  # label not 0/1
    (30, "\t".join(["0", "x1"] + ["0"] * 12 + ["0000abcd"] * 26)),  # non-integer dense
    (40, "\t".join(["0"] + ["0"] * 13 + ["zzzz"] + ["0000abcd"] * 25)),  # non-hex categorical
    (50, "\t".join(["0"] + ["0"] * 13 + ["123456789"] + ["0000abcd"] * 25)),  # 9 hex digits
]


def reference_parse(lines):
    """Plain-Python parse of the good lines (the oracle)."""
    out = []
    for ln in lines:
        f = ln.split("\t")
        if len(f) != 40 or f[0] not in ("0", "1"):
            continue
        try:
            dense = [int(x) if x else 0 for x in f[1:14]]
            if any(len(x) > 8 for x in f[14:]):
                continue
            cats = [int(x, 16) if x else 0 for x in f[14:]]
        except ValueError:
            continue
        out.append((int(f[0]), dense, cats))
    return out


def test_parse_lines_matches_plain_python_and_counts_bad_lines(tmp_path):
    lines = write_kaggle(tmp_path / "t.txt", 80, bad=BAD)
    probs = Problems()
    rows = parse_lines((tmp_path / "t.txt").read_bytes(), lambda i: f"t.txt:{i + 1}", probs, strict=False)
    ref = reference_parse(lines)
    assert len(rows) == len(ref) == 80 and probs.count == len(BAD)
    assert rows.labels.tolist() == [r[0] for r in ref]
    assert rows.dense.tolist() == [r[1] for r in ref]
    assert rows.cats.tolist() == [r[2] for r in ref]
    assert probs.examples[0] == "t.txt:4: expected 40 tab-separated columns, got 3"
    assert any("t.txt:21: label '2'" in e for e in probs.examples)
    assert any("dense I1 'x1' is not an integer" in e for e in probs.examples)
    assert any("categorical C1 'zzzz' is not hex" in e for e in probs.examples)
    assert any("categorical C1 '123456789' is not hex" in e for e in probs.examples)
    with pytest.raises(MalformedInput, match="t.txt:4: expected 40"):
        parse_lines((tmp_path / "t.txt").read_bytes(), lambda i: f"t.txt:{i + 1}", Problems(), strict=True)


def test_dense_transform_and_hashing():
    np.testing.assert_allclose(dense_transform(np.array([[-3, 0, 1, 9]])), [[0, 0, math.log(2), math.log(10)]],
                               rtol=1e-6)
    line = "\t".join(["1"] + ["1"] * 13 + ["0000ffff"] * 26).encode()
    rows = parse_lines(line, str, Problems(), False, max_ind_range=1000)
    assert rows.cats[0, 0] == 0xFFFF % 1000


def test_kaggle_split_convention():
    sp = kaggle_splits(45_840_617)
    assert sp[0].stop == 39_291_958  # dlrm: the first 6 of 7 pseudo-days train
    assert (sp[1].stop - sp[1].start, sp[2].stop - sp[2].start) == (3_274_330, 3_274_329)
    assert [s.name for s in terabyte_splits([5, 5, 7])] == ["train", "test", "val"]
    assert [(s.start, s.stop) for s in terabyte_splits([5, 5, 7])] == [(0, 10), (10, 14), (14, 17)]


@pytest.mark.parametrize("threshold", [0, 3])
def test_prepare_kaggle_end_to_end(tmp_path, threshold):
    raw = tmp_path / "train.txt"
    lines = write_kaggle(raw, 700, seed=1, bad=BAD)
    ref = reference_parse(lines)
    done_bytes = []
    meta = prepare_criteo("criteo-kaggle", [raw], tmp_path / "prep", "kaggle", freq_threshold=threshold,
                          progress=done_bytes.append, chunk_bytes=4096)
    assert meta.bad_lines == len(BAD) and len(meta.bad_examples) == len(BAD)
    assert sum(meta.rows.values()) == 700 and meta.rows["train"] == kaggle_splits(700)[0].stop
    assert sum(done_bytes) == 2 * raw.stat().st_size  # two passes, progress in bytes
    out = tmp_path / "prep"
    assert (out / "COMPLETE").exists() and not (tmp_path / "prep.partial").exists()
    sparse = np.concatenate([np.load(out / s / "sparse.npy") for s in ("train", "test", "val")])
    dense = np.concatenate([np.load(out / s / "dense.npy") for s in ("train", "test", "val")])
    labels = np.concatenate([np.load(out / s / "labels.npy") for s in ("train", "test", "val")])
    assert labels.tolist() == [r[0] for r in ref]
    np.testing.assert_allclose(dense, dense_transform(np.array([r[1] for r in ref])), rtol=1e-6)
    raw_cats = np.array([r[2] for r in ref])
    for j in range(26):
        vals, counts = np.unique(raw_cats[:, j], return_counts=True)
        vocab = np.load(out / "vocab" / f"C{j + 1}.npy")
        if threshold <= 1:
            assert meta.cardinalities[j] == len(vals)
            assert np.array_equal(vocab[sparse[:, j]], raw_cats[:, j])  # categorify is invertible
        else:
            kept = vals[counts >= threshold]
            assert np.array_equal(vocab, kept) and meta.cardinalities[j] == len(kept) + 1
            rare = ~np.isin(raw_cats[:, j], kept)
            assert np.all(sparse[rare, j] == 0) and np.array_equal(vocab[sparse[~rare, j] - 1], raw_cats[~rare, j])
        assert sparse[:, j].max() < meta.cardinalities[j]


def test_prepare_is_atomic_resumable_and_strict(tmp_path):
    raw = tmp_path / "train.txt"
    write_kaggle(raw, 50, bad=BAD[:1])
    out = tmp_path / "prep"
    (tmp_path / "prep.partial").mkdir()  # left by a killed run of ours (it carries the staging mark)
    (tmp_path / "prep.partial" / STAGING_MARK).write_text("")
    (tmp_path / "prep.partial" / "junk").write_text("left by a killed run")
    with pytest.raises(MalformedInput, match="train.txt:4: expected 40"):
        prepare_criteo("k", [raw], out, "kaggle", strict=True)
    assert load_prepared(out) is None and not out.exists()  # nothing that looks complete
    assert not (tmp_path / "prep.partial").exists()  # a failed run leaves no staging folder
    meta = prepare_criteo("k", [raw], out, "kaggle")
    assert not (tmp_path / "prep.partial").exists() and meta.bad_lines == 1
    stamp = (out / "meta.json").stat().st_mtime_ns
    again = prepare_criteo("k", [raw], out, "kaggle")  # complete: reused, not rewritten
    assert again == meta and (out / "meta.json").stat().st_mtime_ns == stamp
    with pytest.raises(FileNotFoundError, match="not found"):
        prepare_criteo("k", [tmp_path / "nope.txt"], tmp_path / "x", "kaggle")


def test_prepare_terabyte_days_gzip_truncated_and_empty(tmp_path):
    rng = np.random.default_rng(3)
    days = []
    for d, n in enumerate([30, 20, 11]):
        p = tmp_path / f"day_{d}.gz"
        with gzip.open(p, "wt") as f:
            f.write("\n".join(criteo_line(rng) for _ in range(n)) + "\n")
        days.append(p)
    meta = prepare_criteo("criteo-terabyte", days, tmp_path / "tb", "terabyte", max_ind_range=17)
    assert meta.rows == {"train": 50, "test": 6, "val": 5} and meta.bad_lines == 0
    assert all(c <= 17 for c in meta.cardinalities)
    truncated = tmp_path / "day_9.gz"
    truncated.write_bytes(days[0].read_bytes()[:-20])
    empty = tmp_path / "day_10"
    empty.write_text("")
    meta = prepare_criteo("t", [truncated, empty, days[2]], tmp_path / "tb2", "terabyte")
    assert meta.bad_lines == 2
    assert any("day_9.gz: truncated or corrupt gzip" in e for e in meta.bad_examples)
    assert any("day_10: no valid rows" in e for e in meta.bad_examples)
    with pytest.raises(MalformedInput, match="day_9.gz: truncated"):
        prepare_criteo("t", [truncated], tmp_path / "tb3", "terabyte", strict=True)


def test_cli_data_prepare(tmp_path):
    from click.testing import CliRunner

    from reproduce.cli import cli

    raw = tmp_path / "train.txt"
    write_kaggle(raw, 120, bad=BAD[:2])
    res = CliRunner().invoke(cli, ["data", "prepare", "criteo-kaggle", "--raw", str(raw), "--out", str(tmp_path / "p")])
    assert res.exit_code == 0, res.output
    assert "2 malformed line(s) skipped" in res.output and "train.txt:4" in res.output and "MiB/s" in res.output
    res = CliRunner().invoke(cli, ["data", "prepare", "criteo-kaggle", "--raw", str(raw), "--out", str(tmp_path / "p")])
    assert res.exit_code == 0 and "already complete" in res.output
    res = CliRunner().invoke(cli, ["data", "prepare", "criteo-kaggle", "--raw", str(raw), "--strict",
                                   "--out", str(tmp_path / "q")])
    assert res.exit_code != 0 and "train.txt:4: expected 40" in res.output
    res = CliRunner().invoke(cli, ["data", "prepare", "imagenet", "--raw", str(raw)])
    assert res.exit_code != 0 and "no dataset manifest" in res.output


def test_prepared_source_batches(tmp_path):
    from impls.data.prepared_source import PreparedSource

    raw = tmp_path / "train.txt"
    lines = write_kaggle(raw, 90, seed=4)
    ref = reference_parse(lines)
    prepare_criteo("k", [raw], tmp_path / "p", "kaggle")
    src = PreparedSource(tmp_path / "p", "train", dim=8)
    n = src.num_rows
    assert n == kaggle_splits(90)[0].stop and len(src.tables) == 26
    b = src.batch(0, 16)
    b.sparse.validate(src.tables)
    assert b.dense.shape == (16, 13) and b.labels.tolist() == [float(r[0]) for r in ref[:16]]
    sparse = np.load(tmp_path / "p" / "train" / "sparse.npy")
    assert b.sparse.table(2)[0].tolist() == sparse[:16, 2].tolist()  # table-major, one id per bag
    last = src.batch(n // 16, 16)  # wraps around the end of the split
    assert last.labels.tolist() == [float(ref[i % n][0]) for i in range((n // 16) * 16, (n // 16) * 16 + 16)]
    with pytest.raises(ValueError, match="no split 'dev'"):
        PreparedSource(tmp_path / "p", "dev")
    with pytest.raises(ValueError, match="not a complete prepared dataset"):
        PreparedSource(tmp_path / "nothing")


def test_cli_data_stats_on_preset_and_prepared(tmp_path):
    from click.testing import CliRunner

    from reproduce.cli import cli

    res = CliRunner().invoke(cli, ["data", "stats", "criteo-kaggle", "--batch-size", "256", "--batches", "1"])
    assert res.exit_code == 0, res.output
    assert "top-1% share" in res.output and "10,131,227" in res.output
    raw = tmp_path / "train.txt"
    write_kaggle(raw, 300, seed=2)
    prepare_criteo("k", [raw], tmp_path / "p", "kaggle")
    res = CliRunner().invoke(cli, ["data", "stats", str(tmp_path / "p"), "-b", "64", "--batches", "1"])
    assert res.exit_code == 0, res.output
    assert "C26" in res.output and "1.00" in res.output  # one id per table per sample
    res = CliRunner().invoke(cli, ["data", "stats", "nope", "-b", "64"])
    assert res.exit_code != 0 and "unknown data preset" in res.output
