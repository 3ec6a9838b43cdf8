"""The manual: README stays short (what it is, install, quick start, one comparison, the claims, links); the rest is
in docs/. Every relative link of README.md and the docs pages names a file or folder that exists, and every
generated block a page holds is one the report writes."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_relative_link_resolves():
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+://|#|mailto:", target):
                continue
            path = (page.parent / target.split("#")[0]).resolve()
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_the_readme_is_short_and_points_to_every_docs_page():
    text = (ROOT / "README.md").read_text()
    body = re.sub(r"<!-- report:(\S+) -->.*?<!-- /report:\1 -->", "", text, flags=re.S)  # generated blocks aside
    assert len(body.splitlines()) <= 200, len(body.splitlines())
    for page in PAGES[1:]:
        assert str(page.relative_to(ROOT)) in text, f"README does not link {page.relative_to(ROOT)}"


def test_pages_hold_only_blocks_the_report_writes():
    from reproduce.analysis.report import BLOCK

    from reproduce.analysis.bench_tables import BENCH_BLOCKS
    from reproduce.analysis.models import MODELS
    from reproduce.analysis.set_blocks import SET_BLOCKS

    from reproduce.analysis.figure_links import FIGURE_BLOCKS

    known = {"claims", "sets", "noise", "durations", "quickstart", "test-time", *SET_BLOCKS, *BENCH_BLOCKS, *FIGURE_BLOCKS,
             *(m.block for m in MODELS.values())}
    for page in PAGES:
        names = {m["name"] for m in BLOCK.finditer(page.read_text())}
        assert names <= known, (page.name, names - known)
