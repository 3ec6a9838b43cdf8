"""A model you can keep (`train --save`), use (`predict` on new raw rows, `evaluate` on a prepared split) and go on
training (`train --resume`): end to end through the command line on a click log prepared from two raw files, the
second held out (reproduce/harness/kept_model.py, impls/data/raw_rows.py)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from reproduce.cli import cli
from tests.data.clicklog import write_clicklog

pytest.importorskip("pyarrow")
TRAIN = ["-b", "128", "--bottom", "16", "--top", "16", "--threads", "1", "--dim", "8"]


def _invoke(*args):
    res = CliRunner().invoke(cli, [str(a) for a in args])
    return res, " ".join(res.output.split())


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    """A click log in two files (the second held out by --split files:1), prepared."""
    d = tmp_path_factory.mktemp("kept")
    lines = write_clicklog(d / "all.csv", 3_000).read_text().splitlines()
    (d / "raw").mkdir()
    (d / "raw" / "a.csv").write_text("\n".join(lines[:2_401]) + "\n")
    (d / "raw" / "b.csv").write_text("\n".join(lines[:1] + lines[2_401:]) + "\n")
    res, said = _invoke("data", "prepare", "tabular", "--raw", d / "raw", "--label", "rating>=4", "--dense", "hour",
                        "--categorical", "user,item,genre:sep=|", "--split", "files:1", "--out", d / "prepared")
    assert res.exit_code == 0, said
    return d


def _train(log, *extra):
    res, said = _invoke("train", "--impl", "dense-torch", "--data", log / "prepared", *TRAIN, "--out", log / "runs",
                        *extra)
    assert res.exit_code == 0, said
    return said


def _auc(said: str) -> float:
    return float(re.search(r"AUC (\d\.\d+)", said).group(1))


def test_a_kept_model_scores_held_back_raw_rows_as_evaluate_scores_their_split(log):
    said = _train(log, "--epochs", "1", "--save", log / "m")
    assert f"kept the model in {log / 'm'}" in said
    res, evaluated = _invoke("evaluate", "--model", log / "m", "--data", log / "prepared")
    assert res.exit_code == 0, evaluated
    assert "split val" in evaluated and "over 600 rows" in evaluated
    res, predicted = _invoke("predict", "--model", log / "m", "--raw", log / "raw" / "b.csv", "--out", log / "s.csv")
    assert res.exit_code == 0, predicted
    assert "scored 600 rows" in predicted and _auc(predicted) == _auc(evaluated) > 0.6
    rows = (log / "s.csv").read_text().splitlines()
    assert rows[0] == "source,score,label" and len(rows) == 601 and rows[1].startswith("b.csv:2,")
    assert not (log / "s.csv.partial").exists()


def test_new_values_read_the_out_of_vocabulary_row_and_a_changed_schema_is_refused(log):
    _train(log, "--epochs", "1", "--save", log / "m2")
    header, first = (log / "raw" / "b.csv").read_text().splitlines()[:2]
    unseen = first.split(",")
    unseen[1], unseen[2] = "nobody", "nothing"  # a user and an item the training split never held
    (log / "new.csv").write_text(f"{header.replace(',rating', '')}\n{','.join(unseen[:-1])}\n")  # and no label
    res, said = _invoke("predict", "--model", log / "m2", "--raw", log / "new.csv", "--out", log / "new_s.csv")
    assert res.exit_code == 0, said
    assert (log / "new_s.csv").read_text().splitlines()[0] == "source,score" and "AUC" not in said
    (log / "bad.csv").write_text(header.replace("genre", "genres") + "\n" + first + "\n")
    res, said = _invoke("predict", "--model", log / "m2", "--raw", log / "bad.csv", "--out", log / "bad_s.csv")
    assert res.exit_code != 0 and "no column(s) ['genre']" in said and not (log / "bad_s.csv").exists()


def test_a_resumed_run_equals_the_run_that_never_stopped_bit_for_bit(log):
    _train(log, "--epochs", "2", "--save", log / "whole")
    _train(log, "--epochs", "1", "--save", log / "half")
    _train(log, "--epochs", "2", "--resume", log / "half", "--save", log / "resumed")
    whole = torch.load(log / "whole" / "model.pt", weights_only=True)
    resumed = torch.load(log / "resumed" / "model.pt", weights_only=True)
    tensors = [k for k in whole["weights"] if not k.endswith("_extra_state")]
    assert tensors and all(torch.equal(whole["weights"][k], resumed["weights"][k]) for k in tensors)
    assert whole["loop"]["curve"] == resumed["loop"]["curve"] and len(whole["loop"]["curve"]) == 2
    res, said = _invoke("train", "--impl", "dense-torch", "--data", log / "prepared", *TRAIN, "--out", log / "runs",
                        "--epochs", "3", "--lr", "0.01", "--resume", log / "half")
    assert res.exit_code != 0 and "lr: 0.05 saved, 0.01 now" in said


def test_a_changed_kept_model_or_another_dataset_is_refused(log, tmp_path):
    import shutil

    _train(log, "--epochs", "1", "--save", log / "m3")
    shutil.copytree(log / "m3", tmp_path / "m")
    with open(tmp_path / "m" / "model.pt", "ab") as f:
        f.write(b"\0")
    res, said = _invoke("evaluate", "--model", tmp_path / "m", "--data", log / "prepared")
    assert res.exit_code != 0 and "model.pt changed since the model was saved" in said
    res, said = _invoke("data", "prepare", "tabular", "--raw", log / "raw", "--label", "rating>=4", "--categorical",
                        "user,item", "--split", "files:1", "--out", tmp_path / "other")
    assert res.exit_code == 0, said
    res, said = _invoke("evaluate", "--model", log / "m3", "--data", tmp_path / "other")
    assert res.exit_code != 0 and "was not prepared as the data" in said


def test_an_outside_system_is_kept_with_its_source_and_loads_only_from_code_the_user_names(log, tmp_path,
                                                                                          monkeypatch):
    """examples/robe.py (its optimizer state in its state_dict by CompressedCollection's extra state): saved with a
    copy of its source; copied to another path, the folder loads from the code the user names (the kept copy), and
    never by itself; code that differs from the kept copy is refused unless accepted."""
    import shutil

    from reproduce.harness import systems
    from tests.conformance.outside_systems import forget_loaded_since

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    before = set(systems._loaded)
    try:
        res, said = _invoke("train", "--impl", "examples/robe.py:RobeEmbedding", "--data", log / "prepared", *TRAIN,
                            "--out", log / "runs", "--epochs", "1", "--save", log / "robe")
        assert res.exit_code == 0, said
        info = json.loads((log / "robe" / "model.json").read_text())
        assert info["code"]["spec"] == "system/robe.py:RobeEmbedding" and "spec" not in info
        assert (log / "robe" / "system" / "robe.py").read_bytes() == (root / "examples" / "robe.py").read_bytes()
        moved = tmp_path / "elsewhere" / "robe"
        shutil.copytree(log / "robe", moved)
        forget_loaded_since(before)
        monkeypatch.chdir(tmp_path)
        res, refused = _invoke("evaluate", "--model", moved, "--data", log / "prepared")
        assert res.exit_code != 0 and "nothing in a model folder runs by itself" in refused, refused
        assert "robe" not in systems._loaded
        res, evaluated = _invoke("evaluate", "--model", moved, "--data", log / "prepared", "--impl",
                                 f"{moved}/system/robe.py:RobeEmbedding")
        assert res.exit_code == 0 and "robe on" in evaluated, evaluated
        assert f"held-out AUC {_auc(evaluated):.4f}" in said  # what the run scored at its end
        forget_loaded_since(before)
        other = tmp_path / "robe_edited.py"
        other.write_text((root / "examples" / "robe.py").read_text() + "\n# an edit\n")
        res, differs = _invoke("evaluate", "--model", moved, "--data", log / "prepared", "--impl",
                               f"{other}:RobeEmbedding")
        assert res.exit_code != 0 and "differs from the code that trained" in differs, differs
        assert "--accept-other-code" in differs and "robe" not in systems._loaded
        res, accepted = _invoke("evaluate", "--model", moved, "--data", log / "prepared", "--impl",
                                f"{other}:RobeEmbedding", "--accept-other-code")
        assert res.exit_code == 0 and _auc(accepted) == _auc(evaluated), accepted
    finally:
        forget_loaded_since(before)


class _Payload:
    """A pickle that runs code when loaded: it would touch ``marker``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _reseal(folder: Path) -> None:
    """What an attacker does after editing a model folder: every digest recomputed (model.json's and SHA256SUMS)."""
    from reproduce.harness.kept_model import INFO, MODEL, _sha256, _write_sums

    info = json.loads((folder / INFO).read_text())
    info["model_digest"] = _sha256(folder / MODEL)
    (folder / INFO).write_text(json.dumps(info))
    _write_sums(folder)


def test_a_model_folder_made_to_run_code_is_refused_before_any_of_it_runs(log, tmp_path):
    """A model.pt holding a pickle payload, and a model.json pointed at code, both with every digest recomputed:
    refused, and the payload never runs."""
    import shutil

    _train(log, "--epochs", "1", "--save", log / "m4")
    bad = tmp_path / "bad"
    shutil.copytree(log / "m4", bad)
    marker = tmp_path / "payload_ran"
    saved = torch.load(bad / "model.pt", weights_only=True)
    saved["loop"] = _Payload(marker)
    torch.save(saved, bad / "model.pt")
    _reseal(bad)
    res, said = _invoke("evaluate", "--model", bad, "--data", log / "prepared")
    assert res.exit_code != 0 and "refused unloaded" in said and "weights only" in said, said
    assert not marker.exists()
    # model.json pointed at a file of code, the way format 1 named an outside system (an absolute spec)
    evil = tmp_path / "evil.py"
    evil.write_text(f"from pathlib import Path\nPath({str(marker)!r}).touch()\n")
    edited = tmp_path / "edited"
    shutil.copytree(log / "m4", edited)
    info = json.loads((edited / "model.json").read_text())
    (edited / "model.json").write_text(json.dumps({**info, "format": 1, "spec": f"{evil}:Evil"}))
    res, said = _invoke("evaluate", "--model", edited, "--data", log / "prepared")
    assert res.exit_code != 0 and "model.json changed since the model was saved" in said, said
    _reseal(edited)
    (edited / "SHA256SUMS").unlink()  # a format-1 folder has none
    res, said = _invoke("evaluate", "--model", edited, "--data", log / "prepared")
    assert res.exit_code != 0 and "absolute path" in said, said
    # and as an outside system's kept code, every digest recomputed: nothing runs unless the user names it
    (edited / "model.json").write_text(json.dumps({**info, "system": "evil", "code": {
        "spec": f"{evil}:Evil", "files": {"evil.py": "0" * 64}, "digest": "0" * 64}}))
    _reseal(edited)
    res, said = _invoke("evaluate", "--model", edited, "--data", log / "prepared")
    assert res.exit_code != 0 and "nothing in a model folder runs by itself" in said, said
    assert not marker.exists()


def test_a_record_naming_a_commit_that_is_no_commit_id_is_refused_before_git_sees_it(tmp_path):
    from reproduce.harness import code
    from reproduce.harness.record_store import read_record

    assert code.is_commit("982c96d") and code.is_commit("a" * 40) and not code.is_commit("--output=/tmp/x")
    with pytest.raises(ValueError, match="not a commit id"):
        code.committed({"impls/api.py": "x"}, "--output=/tmp/x")
    with pytest.raises(ValueError, match="not a commit id"):
        code.file_hash_at("-p", "impls/api.py")
    good = next((Path(__file__).resolve().parents[2] / "results" / "sc24").rglob("*.json"))
    rec = json.loads(good.read_text())
    rec["env"]["git_sha"] = "--output=/tmp/owned"
    (tmp_path / good.name).write_text(json.dumps(rec))
    with pytest.raises(ValueError, match="git_sha '--output=/tmp/owned' is not a commit id"):
        read_record(tmp_path / good.name)


def test_save_refuses_a_folder_that_holds_anything_but_a_kept_model(log, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("precious")
    res, said = _invoke("train", "--impl", "dense-torch", "--data", log / "prepared", *TRAIN, "--out", log / "runs",
                        "--save", tmp_path / "mine")
    assert res.exit_code != 0 and "holds files and no kept model" in said
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "precious"


def test_a_model_trained_on_reordered_ids_scores_raw_rows_through_the_same_reordering(log):
    """train --reorder R (EL-Rec's index reordering): predict puts the raw rows' ids through R as evaluate's data
    does, so both report one AUC."""
    res, said = _invoke("data", "reorder", log / "prepared", "--out", log / "reordered", "--table", "item",
                        "--batches", "2", "-b", "256")
    assert res.exit_code == 0, said
    _train(log, "--epochs", "1", "--reorder", log / "reordered", "--save", log / "mr")
    res, evaluated = _invoke("evaluate", "--model", log / "mr", "--data", log / "prepared")
    assert res.exit_code == 0, evaluated
    res, predicted = _invoke("predict", "--model", log / "mr", "--raw", log / "raw" / "b.csv", "--out", log / "sr.csv")
    assert res.exit_code == 0, predicted
    assert _auc(predicted) == _auc(evaluated)


def test_load_model_is_a_plain_module_that_scores_a_kjt_as_predict_does(log):
    """dlrmbench.systems.load_model: the kept model as an nn.Module over (dense, KeyedJaggedTensor), scoring as the
    harness's own rebuilt step does."""
    pytest.importorskip("torchrec")
    from dlrmbench.systems import KeptDLRM, load_model
    from impls.data.batch import Batch
    from impls.ebc.kjt import to_kjt
    from reproduce.conformance.cases import random_batch
    from reproduce.harness.kept_model import load

    folder = log / "m_lib"
    _train(log, "--epochs", "1", "--save", folder)
    model = load_model(folder)
    assert isinstance(model, KeptDLRM) and isinstance(model, torch.nn.Module) and not model.training
    sparse = random_batch(model.tables, 9, seed=3)
    dense = torch.randn(9, model.num_dense, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        got = model(dense, to_kjt(sparse, model.tables))
        want = load(folder).build().predict(Batch(dense, sparse, torch.zeros(9)))
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    with pytest.raises(ValueError, match=r"dense must be \[B, "):
        model(dense[:, :0], to_kjt(sparse, model.tables))
