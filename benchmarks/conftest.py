"""Prints the derived throughput of every benchmark, one table per section, and stamps the benchmark JSON with the
commit and the fingerprint of the code it measured (so `dlrmbench report` can mark it STALE when that code moves)."""
import time
from collections import defaultdict

RESULTS: dict[str, list[dict]] = defaultdict(list)
NOTES: dict[str, str] = {}


def report(section: str, row: dict, note: str = "") -> None:
    """Add one row (column -> value) to a section's summary table."""
    RESULTS[section].append(row)
    if note:
        NOTES[section] = note


def timed(f, *args) -> float:
    """Seconds one call of ``f(*args)`` takes."""
    t = time.perf_counter()
    f(*args)
    return time.perf_counter() - t


def over_limit(seconds: float, terms: dict[str, float]) -> tuple[float, str]:
    """A time over its memory-aware limit, the largest of ``terms`` (name -> seconds: the FLOPs at the SGEMM rate, the
    bytes at a bandwidth; docs/systems/tt.md), and the name of that term."""
    bound = max(terms, key=terms.get)
    return seconds / terms[bound], bound


def _fmt(v) -> str:
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def pytest_terminal_summary(terminalreporter):
    w = terminalreporter
    for section, rows in RESULTS.items():
        w.section(section)
        if section in NOTES:
            w.line(NOTES[section])
        cols = list(dict.fromkeys(k for r in rows for k in r))
        widths = {c: max(len(c), *(len(_fmt(r.get(c, ""))) for r in rows)) + 2 for c in cols}
        w.line("".join(c.rjust(widths[c]) for c in cols))
        for r in rows:
            w.line("".join(_fmt(r.get(c, "")).rjust(widths[c]) for c in cols))


def pytest_benchmark_update_json(config, benchmarks, output_json):
    from reproduce.analysis.freshness import bench_fingerprint
    from reproduce.harness.environment import code_dirty, git_sha

    output_json["dlrmbench"] = {"git_sha": git_sha(), "git_dirty": code_dirty(), "code": bench_fingerprint()}
