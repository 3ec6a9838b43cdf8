"""Every folder under tests/ that holds test files is collected by pytest: a folder skipped by a default
(`norecursedirs` once skipped tests/dist) or by a missing package marker fails here, not silently."""
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def _collected_by_a_fresh_pytest() -> set[Path]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return {Path(line.split("::", 1)[0]).parent for line in out.stdout.splitlines() if "::" in line}


def test_every_test_folder_is_collected(request):
    holding = {f.parent.relative_to(ROOT) for f in TESTS.rglob("test_*.py") if "__pycache__" not in f.parts}
    assert holding, "no test files found"
    # a run of the whole suite collected them already (pytest's own collection, with the project's settings); a run
    # of part of it asks a fresh pytest for the whole
    collected = {Path(item.path).parent.relative_to(ROOT) for item in request.session.items}
    if not holding <= collected:
        collected = _collected_by_a_fresh_pytest()
    missing = sorted(str(d) for d in holding - collected)
    assert not missing, f"test folders pytest does not collect: {missing}"
    assert Path("tests/sharding") in collected


def test_no_folder_has_a_name_tools_skip():
    """pytest, ruff and common .gitignore templates skip folders named dist or build."""
    bad = [str(d.relative_to(ROOT)) for top in ("impls", "reproduce", "tests", "benchmarks")
           for d in (ROOT / top).rglob("*") if d.is_dir() and d.name in ("dist", "build")]
    assert not bad, f"folders named dist/build: {bad}"
