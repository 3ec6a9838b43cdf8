"""How long the sets took on a machine: per experiment its runs (every status), the wall time of their processes
summed, its sweeps from the first to the closing noise probe; per `dlrmbench reproduce` command (the README's Quick
start); and `make test` from a clean clone."""
from __future__ import annotations

import json
from pathlib import Path

from reproduce.analysis.claims import repeats_of
from reproduce.analysis.freshness import RECORD_SETS


def durations(root: Path, machine: str, states: dict | None = None) -> list[str]:
    """Wall time of each experiment's runs on the machine (the sum of its runs' processes), its sweep from the first
    noise probe to the last (runs, probes and the sweep's own work), the commit(s) they ran at, and what `make
    reproduce` took end to end (calibration, the sc24 and recsys24 sweeps)."""
    lines = ["| experiment | runs (every status) | rounds per point | wall time of the runs (their processes, summed) | "
             "sweep, first to closing probe | measured at |", "|---|---|---|---|---|---|"]
    sweeps: dict[str, float] = {}
    for exp in RECORD_SETS:
        reps = repeats_of(root, exp, machine)
        if reps is None or "wall_s" not in reps or reps["wall_s"].isna().all():
            continue
        per = reps.groupby("point_id")["repeat"].nunique()
        n = f"{per.min()}" if per.min() == per.max() else f"{per.min()}-{per.max()}"
        st = (states or {}).get(exp)
        at = "–" if st is None else st.commit_label() + (" (STALE)" if st.is_stale else "")
        span = sweep_span_s(Path(root) / "results" / exp / machine)
        if span is not None:
            sweeps[exp] = span
        lines.append(f"| {exp} | {len(reps)} | {n} | {_minutes(reps['wall_s'].sum())} | "
                     f"{'– (a sweep without its closing probe)' if span is None else _minutes(span)} | {at} |")
    cal = calibration_s(root, machine)
    if cal is not None and {"sc24", "recsys24"} <= set(sweeps):
        total = cal + sweeps["sc24"] + sweeps["recsys24"]
        lines += ["", f"`make reproduce` on this machine: calibration {_minutes(cal)} + sc24 {_minutes(sweeps['sc24'])} "
                      f"+ recsys24 {_minutes(sweeps['recsys24'])} = **{_minutes(total)}** (plus the install and the "
                      f"native build on a fresh clone)."]
    return lines


def quickstart(root: Path, machine: str) -> list[str]:
    """How long each `make reproduce*` command took on the machine: its sweep from the first noise probe to the last
    (recsys24: after the calibration it needs), and `make reproduce` as the sum of its parts."""
    from reproduce.harness.experiment import experiment, experiment_names

    lines = ["| command | what | took on the reference machine |", "|---|---|---|"]
    spans = {}
    for name in experiment_names():
        span = sweep_span_s(experiment(name).out_dir(root, machine))
        if span is None:
            continue
        extra = calibration_s(root, machine) if name == "recsys24" else None
        spans[name] = span + (extra or 0.0)
        what = experiment(name).description + (" (after this machine's calibration)" if extra else "")
        lines.append(f"| `dlrmbench reproduce {name}` | {what} | {_minutes(spans[name])} |")
    if {"sc24", "recsys24"} <= set(spans):
        lines.insert(2, f"| `make reproduce` | sc24 and recsys24: their sweeps and the calibration (not the models and "
                        f"figures drawn after them) | "
                        f"**{_minutes(spans['sc24'] + spans['recsys24'])}** |")
    return lines if len(lines) > 2 else []


def _minutes(s: float) -> str:
    s = int(round(s))
    return f"{s // 60} min {s % 60:02d} s"


def sweep_span_s(out_dir: Path) -> float | None:
    """Seconds a set's sweeps ran: each sweep from its first noise probe ("before") to its closing one ("after"); a
    set measured over several sweeps (resumed) sums them, the time between them not counted. None when that cannot be
    known: under two probes, or a sweep that ended without its closing probe (killed, or run with --no-probe)."""
    from datetime import datetime

    from reproduce.harness.noise import load_probes

    probes = sorted((datetime.fromisoformat(p["when"]), p.get("stage")) for p in load_probes(out_dir) if p.get("when"))
    if len(probes) < 2:
        return None
    sweeps: list[list] = []
    for when, stage in probes:
        if stage == "before" or not sweeps:  # a new sweep
            sweeps.append([])
        sweeps[-1].append((when, stage))
    if any(len(s) < 2 or s[-1][1] != "after" for s in sweeps):
        return None
    return sum((s[-1][0] - s[0][0]).total_seconds() for s in sweeps)


def calibration_s(root: Path, machine: str) -> float | None:
    """How long the machine's calibration took (None: a profile from before it said)."""
    path = Path(root) / "results" / "calibration" / machine / "gloo.json"
    return json.loads(path.read_text()).get("wall_s") if path.exists() else None


def test_time(root: Path, machine: str) -> list[str]:
    """How long `make test` took from a clean clone (scripts/time_make_test.sh's records, results/test_time/), the
    build and pytest apart, and what it ran: ``machine``'s first, then any other machine's."""
    found = sorted((Path(root) / "results" / "test_time").glob("*.json"), key=lambda p: (p.stem != machine, p.stem))
    lines = []
    for path in found:
        t = json.loads(path.read_text())
        counts = ", ".join(f"{n} {k}" for k, n in t.get("counts", {}).items())
        lines.append(f"`make test` from a clean clone on {t['machine']} ({t['cores']} cores, at "
                     f"{str(t['git_sha'])[:7]}): **{_minutes(t['total_s'])}** (build {_minutes(t['build_s'])}, pytest "
                     f"{_minutes(t['pytest_s'])}; {counts}){'' if t.get('exit_status') == 0 else ' - not a pass'}.")
    return lines + (["", "`scripts/time_make_test.sh` measures it again on a quiet machine."] if lines else [])


SPLIT_PARTS = ("startup", "data", "prepare", "build", "warmup", "timed", "loop_other", "finish")


def run_split(out_dir: Path) -> str | None:
    """Where a run's wall time went in a result set (medians over its runs that say: worker.py's setup_s), in
    words; None when none does (runs recorded before the split)."""
    import pandas as pd

    path = Path(out_dir) / "repeats.csv"
    if not path.exists():
        return None
    reps = pd.read_csv(path)
    parts = [p for p in SPLIT_PARTS if f"{p}_s" in reps and reps[f"{p}_s"].notna().any()]
    if not parts or "wall_s" not in reps:
        return None
    med = {p: float(reps[f"{p}_s"].median()) for p in parts}
    rest = float(reps["wall_s"].median()) - sum(med.values())
    said = ", ".join(f"{p.replace('_', ' ')} {v:.1f} s" for p, v in med.items())
    return f"{said}, launch and exit {max(rest, 0.0):.1f} s (medians)"
