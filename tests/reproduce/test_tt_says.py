"""A TT system says what it compressed: its TT tables with dense bytes over TT bytes, how many stayed plain, a
warning when no table is TT (every table under tt_min_rows: it trains plain tables) and when a TT table's cores
outweigh the dense table; parameter bytes show 3 significant digits."""
from click.testing import CliRunner

from reproduce.cli import cli
from reproduce.cli.run import _bytes

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
    assert tt.exit_code == 0 and "ecorec: 2 TT table(s), dense bytes / TT bytes: t0 0.714x, t1 0.714x; 0 plain" in said
    assert "the TT cores of t0, t1 are larger than the dense table" in said


def test_parameter_bytes_have_three_significant_digits():
    assert _bytes(79_232) == "77.4 KiB" and _bytes(6_528) == "6.38 KiB" and _bytes(155_648) == "152 KiB"
    assert _bytes(3 * 2**30) == "3 GiB" and _bytes(None) == "–"
