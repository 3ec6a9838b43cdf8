"""`make figures`: every experiment's figures, the scale model's and the EMBark model's are drawn from the
committed reference set alone (no runs), each as PNG + PDF, each naming its machine, commit and repeats; every
caption says whiskers exactly when the figure draws them (style.save refuses a figure whose caption does not match,
so drawing every figure checks every caption); the paper's value is drawn only for claims called comparable."""
from pathlib import Path

import pandas as pd
import pytest

from reproduce.harness.experiment import parse
from reproduce.harness.resolve import load_experiment
from reproduce.harness.machine import reference_machine
from reproduce.analysis.plots import draw, style

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = sorted((ROOT / "reproduce" / "experiments").glob("*.toml"))
REF = reference_machine(ROOT / "results")


def committed_machine(path: Path) -> str:
    """The machine whose committed set of an experiment the figures draw: the reference machine's, else (a set
    not yet rerun there, marked STALE by the report) the machine that has one."""
    exp = parse(path)
    if (exp.out_dir(ROOT, REF) / "summary.csv").exists():
        return REF
    have = sorted(d.name for d in exp.results_dir(ROOT).glob("*") if (d / "summary.csv").exists())
    assert have, f"{exp.results_dir(ROOT)} holds no committed set: run the experiment"
    return have[0]


PLOTS = [(path, name) for path in EXPERIMENTS for name in parse(path).plots]


@pytest.mark.parametrize("path,name", PLOTS, ids=[f"{p.stem}-{n}" for p, n in PLOTS])
def test_every_plot_of_every_experiment_draws_from_committed_records(path, name, tmp_path):
    summary = parse(path).out_dir(ROOT, committed_machine(path)) / "summary.csv"
    paths = draw([name], summary, tmp_path)
    assert paths, f"{path.stem}: plot {name} drew nothing from {summary}"
    assert {p.suffix for p in paths} == {".png", ".pdf"} and all(p.stat().st_size > 0 for p in paths)


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.stem)
def test_every_experiments_committed_summary_has_its_caption(path):
    machine = committed_machine(path)
    summary = parse(path).out_dir(ROOT, machine) / "summary.csv"
    caption = style.caption(pd.read_csv(summary), whiskers=False)
    assert caption.startswith(f"machine {machine}") and "per point" in caption and "commit" in caption


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.stem)
def test_every_experiment_expands_into_points(path):
    """Every experiment file (its cpu profile) expands into points here; one whose data is its own [synth] dataset
    does so once `dlrmbench sweep` has written it, and until then says so."""
    try:
        exp = load_experiment(path, root=ROOT, machine=REF)
    except ValueError as exc:
        assert "is not written yet" in str(exc) and "\n[synth]\n" in path.read_text(), exc
        return
    assert exp.points and all(p.impl for p in exp.points)


def test_every_named_figure_is_a_function_of_its_module_and_a_sweep_without_figures_imports_none(tmp_path):
    import subprocess
    import sys

    from reproduce.analysis.plots import PLOTS, _plot

    assert all(callable(_plot(name)) for name in PLOTS)
    code = ("import sys; from reproduce.analysis.plots import draw; import pandas as pd; "
            f"assert draw([], pd.DataFrame({{'impl': ['x']}}), {str(tmp_path)!r}) == []; "
            "print(sorted(m for m in sys.modules if m.startswith(('seaborn', 'matplotlib', "
            "'reproduce.analysis.plots.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_caption_says_machine_commit_repeats_and_interval():
    df = pd.DataFrame({"machine": ["box", "box"], "repeats": [3, 3], "git_sha": ["abcdef0123", "abcdef0123"]})
    assert style.caption(df, whiskers=True) == ("machine box; commit abcdef0; 3 repeats per point; medians, whiskers: "
                                                "range of 3 rounds (75 % CI of the median)")
    six = df.assign(repeats=6)
    assert style.caption(six, whiskers=True).endswith("whiskers: order-statistic 95 % CI of the median over 6 rounds")
    assert style.caption(six, whiskers=False).endswith("no whiskers drawn")
    assert style.caption(six, whiskers=True, paired=True).endswith(  # a figure of speedups paired by round
        "ratios paired by round, whiskers: Hodges-Lehmann, exact Wilcoxon signed-rank 95 % CI over 6 rounds")
    over = df.assign(oversubscribed=[False, True], world_size=[2, 4])
    assert style.caption(over, whiskers=False).endswith("; oversubscribed at 4 ranks (*: ranks × threads > cores: "
                                                        "contention, never a headline)")
    mixed = df.assign(git_sha=["abcdef0123", "1234567890"])
    assert "commits abcdef0 (1 runs), 1234567 (1 runs)" in style.caption(mixed, whiskers=False)
    assert "no interval" in style.caption(pd.DataFrame({"machine": ["box"], "repeats": [1]}), whiskers=True)


def test_a_caption_that_does_not_match_the_figure_is_refused(tmp_path):
    import matplotlib.pyplot as plt

    df = pd.DataFrame({"machine": ["box"], "repeats": [5]})
    fig, ax = plt.subplots()
    ax.bar([0], [1.0])
    fig.suptitle(style.caption(df, whiskers=True))
    with pytest.raises(ValueError, match="promises whiskers it does not draw"):
        style.save(fig, tmp_path, "bars")
    fig, ax = plt.subplots()
    ax.bar([0], [1.0])
    ax.errorbar([0], [1.0], yerr=[[0.1], [0.2]], fmt="none")
    fig.suptitle(style.caption(df, whiskers=False))
    with pytest.raises(ValueError, match="does not explain whiskers it draws"):
        style.save(fig, tmp_path, "bars")
    fig.suptitle(style.caption(df, whiskers=True))
    assert len(style.save(fig, tmp_path, "bars")) == 2


def test_paper_lines_only_for_comparable_claims():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    assert not style.paper_line(ax, "ecorec-vs-elrec", "3.1x")  # not comparable: no line
    assert not ax.lines
    assert style.paper_line(ax, "ttrec-compression", "117x") and ax.lines
    plt.close(fig)


def test_models_redraw_from_their_committed_csvs(tmp_path):
    import shutil

    from reproduce.analysis.models import MODELS

    for name in ("scale_model", "recsys24_model"):
        shutil.copytree(ROOT / "results" / name, tmp_path / "results" / name)
    MODELS["sc24"].redraw(tmp_path, REF)
    assert {p.name for p in (tmp_path / "figures" / "scale_model" / REF).iterdir()} >= {
        "validation.png", "projection.png", "projection_speedup.png"}
    proj = pd.read_csv(ROOT / "results" / "scale_model" / REF / "projection.csv")
    assert proj["modeled"].all()
    MODELS["recsys24"].redraw(tmp_path, REF)
    assert (tmp_path / "figures" / "recsys24_model" / "modeled_speedup.png").exists()


def test_a_caption_names_every_interval_its_points_have():
    """Points over several round counts: the caption names each count's interval (a 95 % CI or a range with its
    confidence), never only the smallest count's."""
    df = pd.DataFrame({"machine": ["box"] * 3, "repeats": [3, 6, 7], "git_sha": ["abcdef0123"] * 3})
    paired = style.caption(df, whiskers=True, paired=True)
    assert "range of the Walsh averages (75 % CI) (points of 3 rounds)" in paired
    assert "signed-rank 95 % CI (points of 6 or 7 rounds)" in paired
    assert "3-7 repeats per point" in paired


def test_the_world_speedup_caption_names_the_paired_intervals_it_draws(tmp_path, monkeypatch):
    """world_speedup draws speedups paired by round (Hodges-Lehmann intervals over the points' rounds): its caption
    says so, with the round counts of the points it plots; the throughput figure's whiskers are medians'."""
    from reproduce.analysis.plots import world

    rows = []
    for ws, reps in ((1, 3), (2, 7)):
        for impl in ("ttrec", "ecorec"):
            rows.append({"status": "ok", "label": impl, "impl": impl, "data": "d", "world_size": ws, "max_rows": 0,
                         "batch_size": 64, "speedup": 1.5, "speedup_lo": 1.2, "speedup_hi": 1.8, "samples_per_s": 10.0,
                         "samples_per_s_lo": 9.0, "samples_per_s_hi": 11.0, "machine": "box", "repeats": reps,
                         "git_sha": "abcdef0123", "baseline": "ttrec", "total_ms": 1.0})
    captured = {}
    real_save = style.save

    def save(fig, out_dir, stem):
        captured[stem] = style.caption_text(fig)
        return real_save(fig, out_dir, stem)

    monkeypatch.setattr(style, "save", save)
    monkeypatch.setattr(world, "world_step_parts", lambda df, out_dir: [])  # its own columns; not this figure
    world.world_speedup(pd.DataFrame(rows), tmp_path)
    speedup = captured["world_speedup"]
    assert "ratios paired by round" in speedup and "Hodges-Lehmann" in speedup and "7 rounds" in speedup
    assert "3 rounds" in speedup and "medians, whiskers" not in speedup
    assert "medians, whiskers" in captured["world_throughput"]
