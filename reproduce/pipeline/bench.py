"""`dlrmbench bench`'s last step: the benchmarks (pytest-benchmark over benchmarks/: the dense baselines, the TT
kernels against their roofline, EMBark's planner beside TorchRec's) into this machine's result set,
results/bench/<machine>/benchmarks.json, stamped with the code they measured (benchmarks/conftest.py)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from reproduce.harness.code import ROOT


def benchmarks_json(machine: str, root: Path = ROOT) -> Path:
    """Where a machine's benchmark record lies: results/bench/<machine>/benchmarks.json."""
    return Path(root) / "results" / "bench" / machine / "benchmarks.json"


def run_benchmarks(out: Path) -> int:
    """Run every benchmark of the project (a pytest process in the project's folder, its output on this terminal)
    into ``out``; its exit status."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "benchmarks",
                            "--benchmark-only", "--benchmark-columns=median,iqr,rounds",
                            f"--benchmark-json={out.resolve()}"], cwd=ROOT)
