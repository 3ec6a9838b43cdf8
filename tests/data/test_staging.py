"""Fault suite, data loss: `data prepare` / `data synth` never delete a folder this tool did not write. A folder of
the user's files named by --out (or a foreign `<out>.partial`) is refused with a message and left intact; a
complete dataset of ours is replaced; a failed write leaves no staging folder."""
import pytest
from click.testing import CliRunner

from impls.data.export import write_synthetic
from impls.data.presets import get_preset
from impls.data.staging import MARKER, STAGING_MARK, staged
from reproduce.cli import cli
from tests.data.test_criteo import write_kaggle

SPEC = dict(num_tables=2, rows=50, dim=4, hotness=2)


def _user_folder(path):
    path.mkdir()
    (path / "thesis.tex").write_text("years of work")
    (path / "sub").mkdir()
    (path / "sub" / "data.csv").write_text("1,2,3")
    return {p.relative_to(path): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def _same(path, files):
    return {p.relative_to(path): p.read_bytes() for p in path.rglob("*") if p.is_file()} == files


def test_synth_refuses_a_folder_of_user_files(tmp_path):
    mine = tmp_path / "mine"
    files = _user_folder(mine)
    res = CliRunner().invoke(cli, ["data", "synth", "uniform", "--out", str(mine), "--samples", "16",
                                   "--num-tables", "2", "--rows", "50", "--dim", "4"])
    assert res.exit_code == 2 and "refusing to overwrite" in res.output and "not a complete dlrmbench dataset" in \
        res.output
    assert _same(mine, files) and not (tmp_path / "mine.partial").exists()
    with pytest.raises(ValueError, match="is a file"):
        write_synthetic("u", get_preset("uniform", **SPEC), mine / "thesis.tex", 8)
    assert _same(mine, files)


def test_prepare_refuses_a_folder_of_user_files(tmp_path):
    raw = tmp_path / "train.txt"
    write_kaggle(raw, 20)
    mine = tmp_path / "prepared"
    files = _user_folder(mine)
    res = CliRunner().invoke(cli, ["data", "prepare", "criteo-kaggle", "--raw", str(raw), "--out", str(mine)])
    assert res.exit_code == 2 and "refusing to overwrite" in res.output
    assert _same(mine, files)


def test_a_foreign_staging_folder_is_refused_and_ours_is_replaced(tmp_path):
    out = tmp_path / "s"
    foreign = tmp_path / "s.partial"
    files = _user_folder(foreign)
    with pytest.raises(ValueError, match="was not made by dlrmbench"):
        write_synthetic("u", get_preset("uniform", **SPEC), out, 8)
    assert _same(foreign, files) and not out.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    first = write_synthetic("u", get_preset("uniform", **SPEC), empty, 8)  # an empty folder may be used
    assert write_synthetic("u", get_preset("uniform", **SPEC), empty, 8) == first  # same key: reused
    before = {p.name: p.read_bytes() for p in empty.rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match=r"made from other inputs \(samples: made from 8, asked 12; spec: "):
        write_synthetic("u", get_preset("uniform", seed=1, **SPEC), empty, 12)  # ours, another key: refused
    assert {p.name: p.read_bytes() for p in empty.rglob("*") if p.is_file()} == before
    assert first.rows["train"] == 8 and (empty / MARKER).exists()
    assert not (tmp_path / "empty.partial").exists() and not (empty / STAGING_MARK).exists()


def test_a_failed_write_leaves_nothing_and_keeps_the_old_dataset(tmp_path):
    out = tmp_path / "d"
    write_synthetic("u", get_preset("uniform", **SPEC), out, 8)
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match="made from other inputs"):
        with staged(out, "synthetic", {"other": 1}):
            pass
    new = tmp_path / "new"
    with pytest.raises(RuntimeError, match="boom"):
        with staged(new, "synthetic", {"k": 1}) as stage:
            (stage.path / "half.npy").write_text("half")
            raise RuntimeError("boom")
    assert not (tmp_path / "new.partial").exists() and not new.exists() and not (tmp_path / "new.lock").exists()
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before