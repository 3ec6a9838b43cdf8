"""A TT system says what it compressed: its TT tables with dense bytes over TT bytes, how many stayed plain, a
warning when no table is TT (every table under tt_min_rows: it trains plain tables), when TT tables save little
(under 1.5x) and when a TT table's cores outweigh the dense table; parameter bytes show 3 significant digits. A TT table is never built larger than its
dense table unless asked (tt_oversize=allow): by default its rank is capped to fit, and said."""
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.api import TableSpec
from impls.registry import get_impl

from reproduce.cli import cli
from reproduce.analysis.run_output import _bytes

TINY = ["--data", "uniform", "--num-tables", "2", "--rows", "2000", "--dim", "8", "-b", "64", "--iters", "1",
        "--warmup", "0", "--mode", "embedding-only"]


def test_a_tt_system_says_when_it_compresses_nothing_and_when_its_cores_are_larger(tmp_path):
    plain = CliRunner().invoke(cli, ["run", "--impl", "ecorec", *TINY, "--out", str(tmp_path / "a")],
                               terminal_width=250)
    assert plain.exit_code == 0, plain.output
    said = " ".join(plain.output.split())
    assert "ecorec: no table is TT: all 2 train as plain (dense) tables" in said
    tt = CliRunner().invoke(cli, ["run", "--impl", "ecorec", *TINY, "-o", "tt_min_rows=0", "--out",
                                  str(tmp_path / "b")], terminal_width=250)
    said = " ".join(tt.output.split())
    assert tt.exit_code == 0 and "ecorec: 2 TT table(s), dense bytes / TT bytes: t0 1.06x, t1 1.06x; 0 plain" in said
    assert "rank capped so that the TT cores fit in the dense table's bytes (tt_oversize=shrink; =refuse raises " \
           "instead): t0 32->26, t1 32->26" in said
    assert "ecorec: TT saves little or nothing on t0 1.06x, t1 1.06x (under 1.5x fewer bytes than dense)" in said
    allowed = CliRunner().invoke(cli, ["run", "--impl", "ecorec", *TINY, "-o", "tt_min_rows=0", "-o",
                                       "tt_oversize=allow", "--out", str(tmp_path / "c")], terminal_width=250)
    said = " ".join(allowed.output.split())
    assert allowed.exit_code == 0 and "t0 0.714x, t1 0.714x" in said
    assert "the TT cores of t0, t1 are larger than the dense table" in said
    refused = CliRunner().invoke(cli, ["run", "--impl", "ecorec", *TINY, "-o", "tt_min_rows=0", "-o",
                                       "tt_oversize=refuse", "--out", str(tmp_path / "d")], terminal_width=250)
    assert refused.exit_code != 0
    said = " ".join(refused.output.split())
    assert "table 't0': its TT cores at ranks [32, 32] take 89,600 bytes, more than its dense table's 64,000 " \
           "(2,000 rows x 8)" in said, said


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 50_000), dim=st.sampled_from([4, 8, 16, 32, 64, 128]), rank=st.integers(1, 64),
       impl=st.sampled_from(["ttrec", "elrec", "ecorec"]))
def test_a_tt_table_is_never_larger_than_its_dense_table_by_default(rows, dim, rank, impl):
    cls, table = get_impl(impl), TableSpec("t", rows, dim)
    shapes, refitted = cls.plan_tables([table], ranks=rank, tt_min_rows=0)
    asked = cls.plan_shapes([table], ranks=rank, tt_min_rows=0, tt_oversize="allow")[0]
    if 0 in shapes:
        assert shapes[0].num_params * 4 <= table.dense_bytes
        # the highest rank that fits: one more would not
        assert shapes[0] == asked or asked.with_max_rank(max(shapes[0].ranks) + 1).num_params * 4 > table.dense_bytes
    else:
        assert refitted["t"][1] is None and asked.with_max_rank(1).num_params * 4 > table.dense_bytes
    assert ("t" in refitted) == (asked.num_params * 4 > table.dense_bytes)
    assert cls.table_param_bytes([table], {"ranks": rank, "tt_min_rows": 0}) == [
        shapes[0].num_params * 4 if 0 in shapes else table.dense_bytes]


def test_a_table_that_does_not_fit_even_at_rank_1_stays_plain():
    cls = get_impl("elrec")
    tables = [TableSpec("tiny", 1, 4), TableSpec("big", 20_000, 4)]  # rank 1: 1 + 2 + 2 floats > 4
    shapes, refitted = cls.plan_tables(tables, tt_min_rows=0)
    assert list(shapes) == [1] and refitted["tiny"] == ((32, 32), None)
    with pytest.raises(ValueError, match="tt_oversize must be one of shrink, refuse, allow"):
        cls.plan_tables(tables, tt_oversize="never")


def test_parameter_bytes_have_three_significant_digits():
    assert _bytes(79_232) == "77.4 KiB" and _bytes(6_528) == "6.38 KiB" and _bytes(155_648) == "152 KiB"
    assert _bytes(3 * 2**30) == "3 GiB" and _bytes(None) == "–"
