"""Fault suite, values (`data prepare tabular`): never propagated silently. inf in a dense column makes its row
malformed (reported by file and line; NaN and empty are missing), as does a value too large for float32, a label
rule giving one class is refused (a split with one class is warned about in the output and meta.json), a header naming
a column the schema reads twice is refused, numbers and ISO dates mix per value in a time column, bytes that are not
UTF-8 are a malformed line named, schema values of the wrong type are named, and a path holding ``[`` is a path."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

from impls.data.prepared_source import PreparedSource
from impls.data.tabular import prepare_tabular, raw_files
from impls.data.tabular_schema import Schema
from impls.data.textio import MalformedInput
from reproduce.cli import cli
from tests.data.test_tabular import HEADER, ROWS, schema, write_csv

pytest.importorskip("pyarrow")


def test_inf_in_a_dense_column_is_a_malformed_row_and_nan_is_missing(tmp_path):
    """Case 5."""
    rows = [*ROWS, (6, "u1", "i3", "a", "inf", 20.0, 5), (7, "u2", "i1", "b", 3, "-inf", 1),
            (8, "u3", "i2", "c", "nan", 25.0, 4), (9, "u3", "i1", "a", 1, 1e400, 2)]
    raw = write_csv(tmp_path / "c.csv", rows)
    meta = prepare_tabular([raw], schema(), tmp_path / "out")
    text = " ".join(meta.bad_examples)
    assert meta.bad_lines == 3 and sum(meta.rows.values()) == 6, meta.bad_examples
    assert "c.csv:7: dense hour 'inf' is not a number that is finite" in text
    assert "c.csv:8: dense age '-inf'" in text and "c.csv:10: dense age" in text
    scale = json.loads((tmp_path / "out" / "meta.json").read_text(), parse_constant=pytest.fail)["schema"]
    assert all(np.isfinite(scale["dense_scale"]["mean"] + scale["dense_scale"]["std"]))
    for split in meta.rows:
        assert np.isfinite(PreparedSource(tmp_path / "out", split).dense).all()
    with pytest.raises(MalformedInput, match="c.csv:7: dense hour 'inf'"):
        prepare_tabular([raw], schema(), tmp_path / "strict", strict=True)


def test_values_too_large_for_a_float32_feature_are_malformed_rows(tmp_path):
    rows = [(i, f"u{i % 3}", "i1", "a", 1e300 if i == 2 else 1, 1e200 if i == 5 else i, 5 if i % 2 else 1)
            for i in range(8)]
    meta = prepare_tabular([write_csv(tmp_path / "c.csv", rows)], schema(), tmp_path / "out")
    assert meta.bad_lines == 1 and sum(meta.rows.values()) == 7, meta.bad_examples  # hour is log1p: 1e300 fits
    assert "c.csv:7: dense age 1e+200 is too large for a float32 feature" in meta.bad_examples[0].replace("'", "")
    for split in meta.rows:
        assert np.isfinite(PreparedSource(tmp_path / "out", split).dense).all()


def test_a_label_rule_with_one_class_is_refused_and_a_one_class_split_warned(tmp_path):
    """Case 11."""
    raw = write_csv(tmp_path / "c.csv")
    res = CliRunner().invoke(cli, ["data", "prepare", "tabular", "--raw", str(raw), "--out", str(tmp_path / "o"),
                                   "--label", "age>=100", "--dense", "hour", "--categorical", "user,item",
                                   "--split", "time:ts:0.6"])
    assert res.exit_code == 2 and "label age >= 100.0 gives one class: 0 of 4 rows are 1" in res.output, res.output
    assert not (tmp_path / "o").exists()
    # by time the two latest rows (ts 4, 5: ratings 3, 5) are held out; rating>=5 gives val one positive and
    # train none
    res = CliRunner().invoke(cli, ["data", "prepare", "tabular", "--raw", str(raw), "--out", str(tmp_path / "w"),
                                   "--label", "rating>=5", "--dense", "hour", "--categorical", "user,item",
                                   "--split", "time:ts:0.6"])
    assert res.exit_code == 0 and "warning: split train: label rating >= 5.0 gives one class (0 of 3" in \
        " ".join(res.output.split()), res.output
    assert "split train" in json.loads((tmp_path / "w" / "meta.json").read_text())["warnings"][0]


def test_a_header_naming_a_read_column_twice_is_refused(tmp_path):
    """Case 8."""
    raw = write_csv(tmp_path / "c.csv", [(*r, 9) for r in ROWS], header=HEADER + ",hour")
    with pytest.raises(ValueError, match=r"c.csv:1: the header names a column the schema reads more than once "
                                         r"\('hour' is columns 5, 8\)"):
        prepare_tabular([raw], schema(), tmp_path / "out")
    unused = write_csv(tmp_path / "u.csv", [(*r, 9) for r in ROWS], header=HEADER + ",age2")
    assert sum(prepare_tabular([unused], schema(), tmp_path / "ok").rows.values()) == 5


def test_a_time_column_mixing_numbers_and_iso_dates_keeps_every_row(tmp_path):
    """Case 7: each value read as what it is (ISO dates as UTC seconds), in one file as in two."""
    rows = [(1_600_000_000 + 10 * i if i % 2 else f"2020-09-13T12:{i:02d}:00", f"u{i % 3}", "i1", "a", i, 1.0,
             5 if i % 3 else 1) for i in range(10)]
    meta = prepare_tabular([write_csv(tmp_path / "c.csv", rows)], schema(), tmp_path / "out")
    assert meta.bad_lines == 0 and sum(meta.rows.values()) == 10, meta.bad_examples
    one = [r for r in rows if isinstance(r[0], int)]
    two = [r for r in rows if isinstance(r[0], str)]
    split = prepare_tabular([write_csv(tmp_path / "a.csv", one), write_csv(tmp_path / "b.csv", two)], schema(),
                            tmp_path / "two")
    assert split.rows == meta.rows


def test_bytes_that_are_not_utf8_are_a_malformed_line_named(tmp_path):
    raw = write_csv(tmp_path / "c.csv")
    lines = raw.read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b"u1", b"u\xff1")
    raw.write_bytes(b"\n".join(lines))
    meta = prepare_tabular([raw], schema(), tmp_path / "out")
    assert meta.bad_lines == 1 and sum(meta.rows.values()) == 4
    assert "c.csv:4: user: not UTF-8 text (byte 0xff" in meta.bad_examples[0]
    bad_header = tmp_path / "h.csv"
    bad_header.write_bytes(b"ts,us\xe9r\n1,u\n")
    with pytest.raises(ValueError, match=r"h.csv:1: the header line is not UTF-8 text \(byte 0xe9"):
        prepare_tabular([bad_header], schema(), tmp_path / "h")


@pytest.mark.parametrize("doc,match", [
    ({"label": "y", "categorical": {"u": {"hash": "x"}}}, r"schema.toml: categorical 'u': hash must be a whole number"),
    ({"label": "y", "categorical": {"u": {"min_count": 1.5}}}, "min_count must be a whole number, got 1.5"),
    ({"label": "y", "categorical": {"u": {"sep": 3}}}, "sep must be text, got 3"),
    ({"label": "y", "categorical": {"u": {}}, "split": 5}, "split must be text, got 5"),
    ({"label": "y", "categorical": {"u": {}}, "dense": {"a": 1}}, r"dense 'a' transform must be text"),
    ({"label": "y", "categorical": ["u"]}, "dense and categorical are tables"),
])
def test_schema_values_of_the_wrong_type_are_named(tmp_path, doc, match):
    with pytest.raises(ValueError, match=match):
        Schema.from_dict(doc, "schema.toml")


def test_flags_with_a_bad_number_are_named():
    with pytest.raises(ValueError, match=r"categorical 'user:hash=x': hash must be a whole number, got 'x'"):
        Schema.from_flags("y", None, "user:hash=x", None)


def test_a_path_holding_a_bracket_is_read_as_written(tmp_path):
    folder = tmp_path / "logs[2024]"
    folder.mkdir()
    raw = write_csv(folder / "c[1].csv")
    assert raw_files(str(raw)) == [raw] and raw_files(str(folder)) == [raw]
    assert raw_files(str(tmp_path / "logs[[]2024]" / "*.csv")) == [raw]  # a glob when nothing has that name


def test_hashed_fields_keep_no_vocabulary(tmp_path, monkeypatch):
    """`hash=N` bounds the memory of preparing: no vocabulary is kept for a hashed field (one per distinct value
    would be)."""
    from impls.data import vocabulary as voc

    counted = []
    real = voc.TrainVocabulary.ids
    monkeypatch.setattr(voc.TrainVocabulary, "ids",
                        lambda self, keys, named: (counted.append(len(keys)), real(self, keys, named))[1])
    meta = prepare_tabular([write_csv(tmp_path / "c.csv")], schema(categorical="user:hash=7,item"), tmp_path / "o")
    assert meta.cardinalities[0] == 7 and counted == [5]  # item's vocabulary only
