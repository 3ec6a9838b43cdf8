"""`dlrmbench report`: results/REPORT.md and results/claims.csv from the records, and README.md's generated blocks.

For every claim of reproduce/analysis/claims.toml and every machine asked for: the value aggregated as the paper
phrases it, its bootstrap 95 % interval over the repeats, n / min / median / max over groups, the modeled values
(labelled, never a verdict) and a verdict (reproduced / exceeds / below; not comparable; not measurable here). Then
the noise probes of each result set, the measured tables, and every group's value. README.md's blocks between
``<!-- report:NAME -->`` and ``<!-- /report:NAME -->`` are rewritten from the reference machine's records only, so
the README always shows the committed reference run. Every number is computed from records; nothing is typed in."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pandas as pd

from reproduce.analysis.claims import BAND, evaluate_claim, spread
from reproduce.harness.machine import machines_of, pick_machine, reference_machine
from reproduce.harness.noise import load_probes, noise_level
from reproduce.analysis.tables import machine_line, measured_tables

BLOCK = re.compile(r"(<!-- report:(?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /report:(?P=name) -->)", re.S)
EXPERIMENTS = ("sc24", "recsys24", "sc24_table1")


def _fmt(x: Any) -> str:
    return "–" if x is None or x != x else f"{x:.3g}"


def _value(r: dict) -> str:
    if r["value"] is None:
        return "–"
    if r["lo"] is None or r["runs"] is None or r["runs"] < 2:
        return _fmt(r["value"])
    return f"{_fmt(r['value'])} [{_fmt(r['lo'])}, {_fmt(r['hi'])}]"


def claim_rows(doc: dict, root: Path, machines: list[str] | None) -> list[dict[str, Any]]:
    """Every claim on every machine asked for (default: per experiment, this machine when it has records, else the
    reference set)."""
    rows = []
    for c in doc["claim"]:
        exp_dir = root / "results" / c.get("experiment", "sc24")
        for m in machines or [pick_machine(exp_dir, root / "results")]:
            rows.append(evaluate_claim(c, root, m))
    return rows


def verdict_table(rows: list[dict[str, Any]], with_machine: bool = True) -> list[str]:
    head = ["paper", "claim", "paper value", "ours [95 % CI]", "as", "groups: n: min / median / max",
            "runs per point", "modeled (no verdict)"] + (["machine"] if with_machine else []) + ["verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        modeled = "; ".join(f"{v:.3g} ({label})" for label, v in r["modeled"]) or "–"
        verdict = r["verdict"] + (f": {r['why']}" if r["why"] else "") + (f" (noise: {r['noise']})" if r["noise"]
                                                                          else "")
        cells = [r["paper"], r["claim"], f"{r['paper_value']:g}", _value(r), r["aggregate"], spread(r["groups"]),
                 "–" if r["runs"] is None else str(r["runs"]), modeled] + ([r["machine"]] if with_machine else []) + [
                     verdict]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def noise_lines(root: Path, machines: list[str]) -> list[str]:
    lines = ["| experiment | machine | probes | SGEMM GFLOP/s (median) | spread within a probe | drift across the "
             "sweep | load per core | |", "|---|---|---|---|---|---|---|---|"]
    for exp in EXPERIMENTS:
        for m in machines:
            level = noise_level(load_probes(root / "results" / exp / m))
            if not level:
                continue
            load = "–" if level["load_per_core"] is None else f"{level['load_per_core']:.2f}"
            warn = "**too noisy for differences under " + f"{level['noise']:.0%}**" if level["noise"] > 0.1 else ""
            lines.append(f"| {exp} | {m} | {level['probes']} | {level['gflops_median']:.1f} | {level['within']:.0%} | "
                         f"{level['drift']:.0%} | {load} | {warn} |")
    return lines if len(lines) > 2 else ["No noise probes recorded (result sets measured before probes existed)."]


def group_lines(rows: list[dict[str, Any]], doc: dict) -> list[str]:
    groups = {c["id"]: c.get("group", []) for c in doc["claim"]}
    lines = []
    for r in rows:
        if not r["groups"]:
            continue
        lines.append(f"- **{r['id']}** on {r['machine']} ({', '.join(groups[r['id']])}): " + "; ".join(
            f"{'/'.join(str(k) for k in key)} {v:.3g}" for key, v in r["groups"]))
    return lines


def render(root: Path, doc: dict, machines: list[str] | None
           ) -> tuple[str, dict[str, list[str]], list[dict[str, Any]]]:
    """REPORT.md's text, the README blocks (from the reference set) and the claim rows."""
    rows = claim_rows(doc, root, machines)
    used = sorted({r["machine"] for r in rows if r["machine"] != "analytic"})
    ref = reference_machine(root / "results")
    text = ["# Claims vs this repository's records", "",
            "Generated by `dlrmbench report` from the records under results/<experiment>/<machine>/; do not edit. "
            "Values are ratios of medians over repeated runs (each repeat a fresh process, interleaved across "
            "systems), with bootstrap 95 % intervals over the repeats. A claim phrased \"up to\" or \"maximum\" takes "
            "the maximum over groups, \"average\" the mean, any other the median. Verdicts: **reproduced** when the interval overlaps "
            f"[{BAND[0]}, {BAND[1]}] x the paper's value, **exceeds** / **below** outside that band; **not comparable** "
            "when our measurement differs in kind from the claim (the reason is given; our value is still shown). "
            "Modeled values are labelled and never give a verdict, except analytic parameter counts.", "",
            "Machines: " + "; ".join(machine_line(root, m) + (" (reference)" if m == ref else "") for m in used), "",
            "## Verdicts", "", *verdict_table(rows), "", "## Noise probes", "",
            "An SGEMM timed before and after each sweep: the spread within a probe and the drift of its median across "
            "the sweep bound the differences a result set can resolve; the load per core (1-minute average) includes "
            "the sweep's own processes.", "", *noise_lines(root, used), ""]
    blocks: dict[str, list[str]] = {}
    tables = {m: measured_tables(root, m) for m in {*used, *([ref] if ref else [])}}
    for m in used:
        for name, lines in tables[m].items():
            text += [f"## {name} on {m}", "", *lines, ""]
    text += ["## Every group's value", "", *group_lines(rows, doc), ""]
    if ref:
        ref_rows = rows if machines is None and used == [ref] else claim_rows(doc, root, [ref])
        blocks["claims"] = [f"Reference set: {machine_line(root, ref)}.", "", *verdict_table(ref_rows, False)]
        blocks.update(tables[ref])
    return "\n".join(text), blocks, rows


def update_readme(readme: Path, blocks: dict[str, list[str]]) -> bool:
    """Rewrite README's generated blocks; a block the report has no table for says so. True when it changed."""
    text = readme.read_text()

    def fill(m: re.Match) -> str:
        body = blocks.get(m["name"], [f"(no records for `{m['name']}` in the reference set)"])
        return m.group(1) + "\n".join(body) + "\n" + m.group(4)

    new = BLOCK.sub(fill, text)
    if new != text:
        readme.write_text(new)
    return new != text


def build_report(root: str | Path = ".", claims: str | Path = "reproduce/analysis/claims.toml",
                 machines: list[str] | None = None, readme: bool = True,
                 out: str | Path | None = None) -> list[Path]:
    """Write REPORT.md (``out``, default results/REPORT.md), claims.csv beside it and (``readme``) README.md's
    blocks; return the paths written."""
    root = Path(root)
    doc = tomllib.loads((root / claims).read_text())
    for m in machines or []:
        if not any(m in machines_of(d) for d in (root / "results").iterdir() if d.is_dir()):
            raise ValueError(f"no records of machine {m!r} under {root / 'results'}")
    text, blocks, rows = render(root, doc, machines)
    out = Path(out) if out else root / "results" / "REPORT.md"
    out.write_text(text)
    csv = out.with_name("claims.csv")
    pd.DataFrame([{k: v for k, v in r.items() if k not in ("groups", "modeled")} |
                  {"modeled": "; ".join(f"{v:.6g} ({label})" for label, v in r["modeled"])} for r in rows]
                 ).to_csv(csv, index=False)
    paths = [out, csv]
    if readme and (root / "README.md").exists() and update_readme(root / "README.md", blocks):
        paths.append(root / "README.md")
    return paths
