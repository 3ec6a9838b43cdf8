"""Prints the derived throughput of every benchmark (lookups/s, GB/s and the convention used)."""
RESULTS: list[dict] = []


def pytest_terminal_summary(terminalreporter):
    if not RESULTS:
        return
    w = terminalreporter
    w.section("embedding throughput (median time)")
    w.line("GB/s convention: fbgemm's old one, rows read only = B*T*L*D*4 bytes; forward+backward counts them x3")
    w.line(f"{'impl':<14}{'L':>4}{'op':>10}{'ms':>10}{'Mlookups/s':>12}{'GB/s':>8}")
    for r in RESULTS:
        w.line(f"{r['impl']:<14}{r['L']:>4}{r['op']:>10}{r['ms']:>10.2f}{r['lookups_per_s'] / 1e6:>12.2f}{r['gb_per_s']:>8.2f}")
