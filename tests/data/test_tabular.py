"""`data prepare tabular`: a generic click log (CSV / TSV / .gz / Parquet) into the prepared layout, with the
schema's label rule, dense transforms, vocabulary / hashed / multi-hot categoricals and time / random / file
splits; malformed rows reported by file and line, never silently kept."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from impls.data.prepared_source import PreparedSource
from impls.data.tabular import prepare_tabular, raw_files
from impls.data.tabular_schema import LabelRule, Schema, SplitSpec
from impls.data.textio import MalformedInput
from tests.data.clicklog import write_clicklog

pa = pytest.importorskip("pyarrow")

HEADER = "ts,user,item,genre,hour,age,rating"
ROWS = [  # ts, user, item, genre, hour, age, rating
    (5, "u1", "i1", "a|b", 3, 20.0, 5),
    (1, "u2", "i1", "b", 7, 30.0, 2),
    (3, "u1", "i2", "", 12, "", 4),
    (2, "u3", "i3", "a", 0, 40.0, 1),
    (4, "u2", "i2", "c|a|b", 23, 50.0, 3),
]


def write_csv(path, rows=ROWS, header=HEADER, sep=","):
    text = header.replace(",", sep) + "\n" + "\n".join(sep.join(str(v) for v in r) for r in rows) + "\n"
    if str(path).endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def schema(**kw):
    base = dict(label="rating>=4", dense="hour:log1p,age", categorical="user,item,genre:sep=|", split="time:ts:0.6")
    base.update(kw)
    return Schema.from_flags(base["label"], base["dense"], base["categorical"], base["split"])


def test_time_split_rule_label_multi_hot_and_train_only_standardization(tmp_path):
    meta = prepare_tabular([write_csv(tmp_path / "clicks.csv")], schema(), tmp_path / "out")
    assert meta.rows == {"train": 3, "val": 2} and meta.layout == "multi-hot"
    # fitted on the training rows (u2 u3 u1 / i1 i3 i2 / b, a), id 0 the out-of-vocabulary row of each table
    assert meta.tables == ["user", "item", "genre"] and meta.cardinalities == [4, 4, 3]
    src = PreparedSource(tmp_path / "out", "train")
    # the earliest 60 % by ts (1, 2, 3) train, in file order: rows 2, 3, 4 of the file
    assert src.labels.tolist() == [0, 1, 0]
    b = src.batch(0, 3)
    hour = np.log1p([7, 12, 0])
    np.testing.assert_allclose(b.dense[:, 0].numpy(), hour, rtol=1e-6)
    ages = np.array([30.0, 40.0])  # age is missing on the second training row -> 0 after standardizing
    mean, std = ages.mean(), ages.std()
    np.testing.assert_allclose(b.dense[:, 1].numpy(), [(30 - mean) / std, 0.0, (40 - mean) / std], rtol=1e-6)
    assert json.loads((tmp_path / "out" / "meta.json").read_text())["schema"]["dense_scale"]["mean"][1] == mean
    genre = b.sparse.table(2)
    assert genre[1].tolist() == [0, 1, 1, 2]  # bag sizes: "b", "" (empty bag), "a"
    val = PreparedSource(tmp_path / "out", "val").batch(0, 2)
    assert val.labels.tolist() == [1.0, 0.0]
    assert val.sparse.table(2)[1].tolist() == [0, 2, 5]  # "a|b", "c|a|b"
    a, b_, c, a2, b2 = val.sparse.table(2)[0].tolist()  # "c" only in the held-out split: the OOV row
    assert c == 0 and (a, b_) == (a2, b2) and {a, b_} == {1, 2}
    users = val.sparse.table(0)[0]
    assert users[0] == b.sparse.table(0)[0][1]  # u1 has one id everywhere


def test_one_hot_layout_hashing_min_count_and_random_split(tmp_path):
    f = write_csv(tmp_path / "c.tsv.gz", sep="\t")
    s = Schema.from_flags("rating >= 3", None, "user:min_count=2,item:hash=7", "random:3:0.6")
    meta = prepare_tabular([f], s, tmp_path / "out")
    assert meta.layout == "one-hot" and sum(meta.rows.values()) == 5 and meta.cardinalities[1] == 7
    train_users = [ROWS[r][1] for r in np.load(tmp_path / "out" / "train" / "rows.npy")]
    kept = sorted(u for u in set(train_users) if train_users.count(u) >= 2)  # counted on the training rows only
    assert meta.cardinalities[0] == len(kept) + 1
    assert np.load(tmp_path / "out" / "vocab" / "user.npy").tolist() == kept
    sparse = np.concatenate([np.load(tmp_path / "out" / sp / "sparse.npy") for sp in meta.rows])
    assert sparse[:, 0].max() <= len(kept) and (sparse[:, 1] < 7).all()
    again = prepare_tabular([f], s, tmp_path / "out")  # complete: reused
    assert again.rows == meta.rows


def test_the_vocabulary_is_fitted_on_the_training_split_with_an_out_of_vocabulary_row(tmp_path):
    """A value seen only in the held-out split gets no row of its own (it would never train): it reads the table's
    row 0, as does a value the training split holds fewer than min_count times; the training rows' values keep
    ids 1.. in the order of their keys."""
    rows = [(t, f"u{t % 3}", f"i{t % 4}", "a", 1, 1.0, t % 5) for t in range(12)]
    rows += [(12, "new", "i0", "a", 1, 1.0, 5), (13, "u1", "i9", "a", 1, 1.0, 1)]  # held out (latest by ts)
    meta = prepare_tabular([write_csv(tmp_path / "c.csv", rows)],
                           schema(categorical="user,item:min_count=3", split="time:ts:0.85"), tmp_path / "out")
    assert meta.rows == {"train": 12, "val": 2}
    assert meta.cardinalities == [4, 5] and meta.schema["vocabulary"].startswith("fitted on the training split")
    val = np.asarray(PreparedSource(tmp_path / "out", "val").sparse)
    users = np.load(tmp_path / "out" / "vocab" / "user.npy").tolist()
    assert sorted(users) == ["u0", "u1", "u2"]  # in the order of their keys
    assert val[0, 0] == 0 and users[val[1, 0] - 1] == "u1"  # "new": OOV; u1 its own row
    assert val[1, 1] == 0  # i9: OOV
    train = np.asarray(PreparedSource(tmp_path / "out", "train").sparse)
    assert (train > 0).all()  # every training value of 3+ occurrences has a row


def test_parquet_and_files_split(tmp_path):
    import pyarrow.parquet as pq

    cols = list(zip(*ROWS))
    for k, part in enumerate((slice(0, 3), slice(3, 5))):
        table = pa.table({"user": list(cols[1][part]), "hour": list(cols[4][part]), "click": [1, 0, 1][: len(cols[0][part])]})
        pq.write_table(table, tmp_path / f"part{k}.parquet")
    meta = prepare_tabular(raw_files(tmp_path / "*.parquet"), Schema.from_flags("click", "hour", "user", "files"),
                           tmp_path / "out")
    assert meta.rows == {"train": 3, "val": 2}
    assert PreparedSource(tmp_path / "out", "val").labels.tolist() == [1, 0]
    said = meta.schema["split"]  # which files went where is said (and printed by `data prepare`)
    assert "training on part0.parquet; held out: part1.parquet" in said and "train 3, val 2 rows" in said


def test_bad_rows_are_reported_by_file_and_line_and_dropped(tmp_path):
    # a short line first: the rows after it keep their true line numbers
    rows = ROWS + [(8, "u9"), (6, "u1", "i1", "a", "noon", 20, 5), (7, "u1", "i1", "a", 1, 20, "five")]
    f = write_csv(tmp_path / "bad.csv", rows)
    meta = prepare_tabular([f], schema(split="random:0:0.6"), tmp_path / "out")
    assert sum(meta.rows.values()) == 5 and meta.bad_lines == 3
    text = " ".join(meta.bad_examples)
    assert "bad.csv:7: expected 7 columns, got 2" in text
    assert "bad.csv:8: dense hour 'noon' is not a number" in text
    assert "bad.csv:9: label rating >= 4.0 cannot be read from 'five'" in text
    with pytest.raises(MalformedInput, match="bad.csv:"):
        prepare_tabular([f], schema(split="random:0:0.6"), tmp_path / "strict", strict=True)
    assert not (tmp_path / "strict").exists()


@pytest.mark.parametrize("kw,match", [
    (dict(categorical="user,nope"), r"no column\(s\) \['nope'\]"),
    (dict(label="age", dense="hour"), "no valid rows .*cannot be read"),  # ages are no 0/1 label: no row is good
    (dict(split="time:ts:0.99"), "leaves"),
])
def test_schema_errors_name_what_is_wrong(tmp_path, kw, match):
    with pytest.raises(ValueError, match=match):
        prepare_tabular([write_csv(tmp_path / "c.csv")], schema(**kw), tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text,expect", [
    ("click", LabelRule("click")), ("rating>=4", LabelRule("rating", ">=", 4.0)),
    ("kind == 'buy'", LabelRule("kind", "==", "buy")),
])
def test_label_rules_parse(text, expect):
    assert LabelRule.parse(text) == expect


@pytest.mark.parametrize("text", ["time", "time:ts:1.5", "random:x", "files:0", "hash:3", "time:ts:0.8,0.3"])
def test_bad_split_specs_are_refused(text):
    with pytest.raises(ValueError, match="split"):
        SplitSpec.parse(text)


def test_schema_toml(tmp_path):
    (tmp_path / "s.toml").write_text('label = "rating >= 4"\nsplit = "time:ts:0.8,0.1"\n[dense]\nage = "none"\n'
                                     '[categorical]\nuser = {}\ngenre = { sep = "|" }\n')
    s = Schema.load(tmp_path / "s.toml")
    assert s.split.fractions == (0.8, 0.1) and s.dense == (("age", "none"),) and s.multi_hot
    (tmp_path / "bad.toml").write_text('label = "x"\n[categorical]\nuser = { buckets = 3 }\n')
    with pytest.raises(ValueError, match="min_count, hash, sep"):
        Schema.load(tmp_path / "bad.toml")


def test_end_to_end_cli_prepare_then_train_learns(tmp_path, monkeypatch):
    """The README's sequence from another folder: prepare a CSV with a time column, a rule label and a multi-hot
    field (tests/data/clicklog.py), then train dense-torch and a TT system (the item field, ~8,900 values in the
    training split, is TT from 5,000 rows) for one epoch: both beat AUC 0.5 clearly on the learnable signal."""
    from click.testing import CliRunner

    from reproduce.cli import cli

    raw = tmp_path / "logs" / "clicks.csv"
    raw.parent.mkdir()
    write_clicklog(raw)
    monkeypatch.chdir(raw.parent)
    out = tmp_path / "prepared"
    res = CliRunner().invoke(cli, ["data", "prepare", "tabular", "--raw", "clicks.csv", "--label", "rating>=4",
                                   "--dense", "hour", "--categorical", "user,item,genre:sep=|", "--split",
                                   "time:ts:0.8", "--out", str(out)])
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())  # the hint says where train's records go: the current folder's results/runs
    assert f"records go to {raw.parent / 'results' / 'runs'}" in said, res.output
    res = CliRunner().invoke(cli, ["train", "--impl", "dense-torch", "--impl", "ecorec", "--data", str(out),
                                   "--epochs", "1", "-b", "256", "--bottom", "32", "--top", "32", "--threads", "1",
                                   "--out", str(tmp_path / "runs"), "--eval-every", "20", "-o", "ecorec.tt_min_rows=5000"])
    assert res.exit_code == 0, res.output
    recs = {json.loads(p.read_text())["point"]["impl"]: json.loads(p.read_text())
            for p in (tmp_path / "runs").glob("*.json")}
    for impl, rec in recs.items():
        assert rec["status"] == "ok" and rec["eval"]["auc"] > 0.65, (impl, rec["eval"])
        assert rec["eval"]["samples"] == 2400 and rec["train"]["steps"] == 9600 // 256
        assert [c["step"] for c in rec["eval_curve"]] == [20, 37]
    assert "log loss" in res.output and "AUC" in res.output
    said = " ".join(res.output.split())
    assert "dlrmbench train" in said and "held-out, at the last evaluation" in said
    assert "ecorec: held-out AUC" in said and "base-rate log loss" in said and "ecorec: 1 TT table(s)" in said
    for impl in ("dense-torch", "ecorec"):  # a bar per epoch, the held-out evaluation beside it
        assert f"{impl} epoch 1/1" in said and "37/37" in said and "(base rate 0." in said, said
    from impls.api import get_impl

    tables = PreparedSource(out).tables
    assert [tables[i].name for i in get_impl("ecorec").plan_shapes(tables, tt_min_rows=5000)] == ["item"]


def test_the_format_is_told_by_content_when_the_name_does_not_say(tmp_path):
    """A Parquet file named ``x.parquet.brotli`` (Brotli-compressed) is read as Parquet, also when a delimiter is given
    (a Parquet file has none); a gzipped CSV without .gz, or a CSV without .csv, is read by its header; a file that is
    neither is refused naming both; a quick refusal prints no progress bar."""
    import gzip
    import shutil

    import pyarrow.parquet as pq
    from click.testing import CliRunner

    from reproduce.cli import cli

    cols = list(zip(*ROWS))
    table = pa.table({"user": list(cols[1]), "hour": list(cols[4]), "click": [1, 0, 1, 1, 0]})
    brotli = tmp_path / "x.parquet.brotli"
    pq.write_table(table, brotli, compression="brotli")
    s = Schema.from_flags("click", "hour", "user", "random:0:0.6")
    assert sum(prepare_tabular([brotli], s, tmp_path / "a").rows.values()) == 5
    with_delimiter = Schema.from_flags("click", "hour", "user", "random:0:0.6", ",")
    assert sum(prepare_tabular([brotli], with_delimiter, tmp_path / "b").rows.values()) == 5
    plain = write_csv(tmp_path / "log.csv", ROWS)
    zipped = tmp_path / "log.data"
    with open(plain, "rb") as src, gzip.open(zipped, "wb") as dst:
        shutil.copyfileobj(src, dst)
    assert prepare_tabular([zipped], schema(split="random:0:0.6"), tmp_path / "c").rows == \
        prepare_tabular([plain], schema(split="random:0:0.6"), tmp_path / "d").rows
    noise = tmp_path / "noise.bin"
    noise.write_bytes(bytes(range(200, 256)) * 4)
    with pytest.raises(ValueError, match="from its name .* or its content"):
        prepare_tabular([noise], s, tmp_path / "e")
    res = CliRunner().invoke(cli, ["data", "prepare", "tabular", "--raw", str(noise), "--label", "click",
                                   "--categorical", "user", "--out", str(tmp_path / "f")])
    assert res.exit_code == 2 and "or its content" in res.output and "0.00B" not in res.output


def test_every_split_keeps_its_source_row_numbers(tmp_path):
    """rows.npy: each split's samples' row numbers in the source (good rows from 0, in file order); the splits
    partition the rows, a time split puts the earliest in train with a tie at the cut going by file order, and the
    row numbers pick the split's labels out of the raw file."""
    rows = [(5, "u1", "i1", "a", 3, 20, 5), (2, "u2", "i2", "b", 1, 21, 4), (1, "u1", "i2", "a", 2, 22, 3),
            (2, "u3", "i1", "b", 2, 23, 2), (9, "u2", "i1", "a", 2, 24, 1)]
    f = write_csv(tmp_path / "t.csv", rows)
    meta = prepare_tabular([f], schema(split="time:ts:0.4"), tmp_path / "out")
    seen = {s: np.load(tmp_path / "out" / s / "rows.npy").tolist() for s in meta.rows}
    assert sorted(sum(seen.values(), [])) == list(range(5))
    assert seen["train"] == [1, 2]  # ts 1 (row 2) and the first ts 2 by file order (row 1); row 3 (ts 2) is past the cut
    assert seen["val"] == [0, 3, 4]
    for split, numbers in seen.items():
        labels = PreparedSource(tmp_path / "out", split).labels.tolist()
        assert labels == [int(rows[r][6] >= 4) for r in numbers], split


def test_text_and_synthetic_datasets_keep_row_numbers_too(tmp_path):
    from impls.data.export import write_synthetic
    from impls.data.presets import get_preset
    from impls.data.prepare import prepare_criteo

    write_synthetic("u", get_preset("uniform", num_tables=2, rows=50, dim=4), tmp_path / "syn", 40, 8)
    assert np.load(tmp_path / "syn" / "train" / "rows.npy").tolist() == list(range(40))
    lines = ["\t".join([str(i % 2), *["1"] * 13, *["a1b2c3d4"] * 26]) for i in range(70)]
    (tmp_path / "train.txt").write_text("\n".join(lines) + "\n")
    meta = prepare_criteo("k", [tmp_path / "train.txt"], tmp_path / "crit", "kaggle")
    got = sorted(sum((np.load(tmp_path / "crit" / s / "rows.npy").tolist() for s in meta.rows), []))
    assert got == list(range(70))


def test_a_click_logs_vocabulary_keeps_its_raw_values_and_their_hashes(tmp_path):
    """vocab/<field>.npy holds the raw values in id order (the hashes beside them in <field>.keys.npy): the ids of
    every split map back to the values of its source rows (rows.npy)."""
    meta = prepare_tabular([write_csv(tmp_path / "clicks.csv")], schema(dense="hour", categorical="user,item"),
                           tmp_path / "out")
    users = np.load(tmp_path / "out" / "vocab" / "user.npy")
    keys = np.load(tmp_path / "out" / "vocab" / "user.keys.npy")
    assert sorted(users.tolist()) == ["u1", "u2", "u3"] and np.all(np.diff(keys) > 0) and len(keys) == 3
    for split in meta.rows:
        src = PreparedSource(tmp_path / "out", split)
        ids = np.asarray(src.sparse)[:, 0]  # id k >= 1 is the value at k - 1 (id 0: out of the vocabulary)
        rows = np.load(tmp_path / "out" / split / "rows.npy")
        assert users[ids - 1].tolist() == [ROWS[r][1] for r in rows], split


def test_dense_star_takes_every_numeric_column_not_named_otherwise_and_a_glob_its_matches(tmp_path):
    """--dense "*": the numeric columns that are not the label, a categorical or the time column (read from the first
    file's header and first rows), in header order; a glob takes what it matches and refuses a column that holds
    no numbers; a pattern that matches nothing is refused naming the header."""
    header = "ts,user,f_a,note,f_b,rating,g_c"
    rows = [(t, f"u{t % 3}", t * 0.5, f"text {t}", "" if t == 2 else t, t % 5, -t) for t in range(10)]
    f = write_csv(tmp_path / "c.csv", rows, header)
    s = Schema.from_flags("rating>=3", "*", "user", "time:ts:0.8")
    meta = prepare_tabular([f], s, tmp_path / "out")
    assert meta.schema["dense_names"] == ["f_a", "f_b", "g_c"] and meta.num_dense == 3
    assert meta.schema["dense_resolved"].startswith("dense '*' (standardize): 3 column(s): f_a, f_b, g_c")
    s = Schema.from_flags("rating>=3", "g_c:none,f_*:log1p", "user", "time:ts:0.8")
    meta = prepare_tabular([f], s, tmp_path / "out2")
    assert meta.schema["dense_names"] == ["g_c", "f_a", "f_b"]
    assert meta.schema["columns"]["dense"] == {"g_c": "none", "f_a": "log1p", "f_b": "log1p"}
    with pytest.raises(ValueError, match=r"--dense 'n\*' matches column 'note', which does not hold numbers"):
        prepare_tabular([f], Schema.from_flags("rating>=3", "n*", "user", "time:ts:0.8"), tmp_path / "out3")
    with pytest.raises(ValueError, match=r"--dense 'x\*' matches no column not named otherwise; c.csv has"):
        prepare_tabular([f], Schema.from_flags("rating>=3", "x*", "user", "time:ts:0.8"), tmp_path / "out4")
