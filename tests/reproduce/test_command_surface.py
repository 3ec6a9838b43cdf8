"""One command surface: the Makefile's steps are `dlrmbench` commands (no `python -m` of an analysis or harness
module, no argparse main beside the CLI); the list of experiments is the experiments folder; each experiment's TOML
names the models that run after its sweep and the report tables drawn from its set, and every name resolves; the
command line's run defaults are the RunPoint's."""
import re
from pathlib import Path

from click.testing import CliRunner

from reproduce.analysis.freshness import RECORD_SETS
from reproduce.analysis.models import MODELS
from reproduce.analysis.set_blocks import SET_BLOCKS
from reproduce.cli import cli
from reproduce.harness.experiment import experiment, experiment_names, report_blocks
from reproduce.harness.point import RunPoint

ROOT = Path(__file__).resolve().parents[2]


def test_the_makefile_runs_dlrmbench_commands_only():
    text = (ROOT / "Makefile").read_text()
    assert not re.findall(r"-m reproduce\.", text), re.findall(r"-m reproduce\.\S+", text)
    mains = [str(p.relative_to(ROOT)) for p in (ROOT / "reproduce").rglob("*.py")
             if "argparse" in p.read_text() and p.name not in ("worker.py", "slurm.py")]
    assert not mains, mains  # the worker and the Slurm step are what the launchers run, not a user's commands
    recipes = re.findall(r"^([\w%-]+):[^\n=]*\n((?:\t[^\n]*\n)+)", text, re.M)
    # every target is its prerequisites and one `dlrmbench` command, but the build's and the CUDA checks'
    build = {"venv", "deps", "ext", "install", "test", "help", "cuda-check", "device-check", "clean"}
    for target, body in recipes:
        if target not in build and not target.startswith(("$(", ".")):
            lines = [ln for ln in body.splitlines() if ln.strip()]
            assert len(lines) == 1 and ("dlrmbench" in lines[0] or "$(REPRODUCE)" in lines[0]), (target, body)
    assert {"reproduce-%", "bench", "redundancy", "figures", "reproduce"} <= {t for t, _ in recipes}
    assert "dlrmbench reproduce" in text.split("\nREPRODUCE =")[1].split("\n")[0]


def test_every_experiment_declares_models_and_report_tables_that_exist():
    names = experiment_names()
    assert {"sc24", "recsys24", "compression"} <= set(names)
    for name in names:
        exp = experiment(name)
        assert set(exp.models) <= set(MODELS), (name, exp.models)
        assert set(exp.report) <= set(SET_BLOCKS), (name, exp.report)
        assert exp.reference, f"{name}: no reference profile"
    assert experiment("sc24").models == ("sc24",) and experiment("recsys24").models == ("recsys24",)
    assert {b for b, _ in report_blocks()} == set(SET_BLOCKS)  # every table is some experiment's
    assert set(RECORD_SETS) >= {"sc24", "accuracy_real", "train_defaults", "compression"}


def test_run_defaults_are_the_points():
    help_text = CliRunner().invoke(cli, ["run", "--help"], terminal_width=200).output
    defaults = RunPoint(impl="x", data="y", batch_size=1)
    for flag, field in (("--iters", "iters"), ("--warmup", "warmup"), ("--num-batches", "num_batches"),
                        ("--lr", "lr"), ("--dist-timeout", "dist_timeout_s")):
        shown = re.search(re.escape(flag) + r"[^\n]*?\[default: ([0-9.]+)", help_text, re.S)
        assert shown and float(shown.group(1)) == float(getattr(defaults, field)), (flag, shown and shown.group(1))


def test_model_redraws_from_what_it_wrote(tmp_path):
    import shutil

    shutil.copytree(ROOT / "results" / "recsys24_model", tmp_path / "results" / "recsys24_model")
    res = CliRunner().invoke(cli, ["model", "recsys24", "--plot-only", "--root", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert any(p.suffix == ".png" for p in (tmp_path / "figures" / "recsys24_model").iterdir())
