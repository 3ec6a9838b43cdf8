"""`dlrmbench report`: results/REPORT.md and results/claims.csv from the records, and README.md's generated blocks.

First the result sets: each one's commit(s) and whether it still describes the code (fresh, or STALE with the files
that changed: analysis/freshness.py). Then for every claim of reproduce/analysis/claims.toml and every machine asked
for: the value aggregated as the paper phrases it, its interval (ratios paired by round: stats.py, named as what they
are), n / min / median / max over groups, and a verdict (reproduced /
exceeds / below; not comparable; not measurable here; STALE: no verdict). Modeled values get their own table with the
model's out-of-sample error, never a claim's row. Then the noise probes of each result set, the measured tables, and
every group's value. The blocks between ``<!-- report:NAME -->`` and ``<!-- /report:NAME -->`` of README.md and the
docs/ pages are rewritten from the reference machine's records only, so they always show the committed reference run.
Every number is computed from records; nothing is typed in. ``--check`` (``check_reference``) fails when a committed
reference set is STALE."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pandas as pd

from reproduce.analysis.figure_links import figure_blocks
from reproduce.analysis.at_scale import at_scale
from reproduce.analysis.claims import BAND, evaluate_claim, repeats_of, spread
from reproduce.analysis.resolving import control
from reproduce.analysis.freshness import RECORD_SETS, REFERENCE_SETS, SetState, set_state
from reproduce.harness import code
from reproduce.harness.machine import machines_of, pick_machine, reference_machine
from reproduce.harness.noise import load_probes, noise_level
from reproduce.analysis.tables import machine_line, measured_tables

BLOCK = re.compile(r"(<!-- report:(?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /report:(?P=name) -->)", re.S)
def _fmt(x: Any) -> str:
    return "–" if x is None or x != x else f"{x:.3g}"


def _value(r: dict) -> str:
    if r.get("shown"):  # an exact value per dataset the claim cites
        return r["shown"]
    if r["value"] is None:
        return "–"
    if r["lo"] is None or r["runs"] is None or r["runs"] < 2:
        return _fmt(r["value"])
    return f"{_fmt(r['value'])} [{_fmt(r['lo'])}, {_fmt(r['hi'])}]"


class States:
    """Result-set freshness, computed once per (set, machine) for one report."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        # the code the records are held to: the tree under root when it has one, else this package's
        self.code_root = self.root if (self.root / "impls").is_dir() else code.ROOT
        self.cache: dict[tuple[str, str], SetState] = {}

    def __call__(self, name: str, machine: str) -> SetState:
        if (name, machine) not in self.cache:
            self.cache[(name, machine)] = set_state(self.root / "results", name, machine, self.code_root)
        return self.cache[(name, machine)]


def claim_rows(doc: dict, root: Path, machines: list[str] | None, states: States | None = None
               ) -> list[dict[str, Any]]:
    """Every claim on every machine asked for (default: per experiment, this machine when it has records, else the
    reference set)."""
    states = states or States(root)
    rows = []
    for c in doc["claim"]:
        exp_dir = root / "results" / c.get("experiment", "sc24")
        for m in machines or [pick_machine(exp_dir, root / "results")]:
            st = states(c["experiment"], m) if c.get("experiment") else None
            rows.append({**evaluate_claim(c, root, m, None if st is None or st.missing else st),
                         "modeled_spec": c.get("modeled", []), "at_scale": at_scale(c, root)})
    return rows


def verdict_table(rows: list[dict[str, Any]], with_machine: bool = True) -> list[str]:
    head = ["paper", "claim", "paper value", "ours [interval]", "interval", "as", "groups: n: min / median / max",
            "rounds per point"] + (["machine"] if with_machine else []) + ["measured at", "verdict",
                                                                           "modelled at the paper's scale"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        verdict = r["verdict"] + (f": {r['why']}" if r["why"] else "") + (f" (noise: {r['noise']})" if r["noise"]
                                                                          else "")
        cells = [r["paper"], r["claim"], f"{r['paper_value']:g}", _value(r), r["interval"] or "–", r["aggregate"],
                 spread(r["groups"]), "–" if r["runs"] is None else str(r["runs"])] + (
                     [r["machine"]] if with_machine else []) + [r["set"] or "–", verdict, r.get("at_scale", "–")]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


MIN_WORLD_SIZES = 3  # a world-size extrapolation is quoted only from at least this many measured world sizes


def model_error(kind: str | None, root: Path, machine: str, world_size: int | None = None) -> tuple[bool, str]:
    """How well a model predicts what was measured, out of sample (the scale model's mean absolute error when each
    measured world size is predicted by a fit on the others), and whether a value at ``world_size`` may be quoted:
    only inside the measured world sizes, or beyond them from at least MIN_WORLD_SIZES of them."""
    if kind == "scale_model":
        path = root / "results" / "scale_model" / machine / "validation.csv"
        if not path.exists():
            return False, "not validated (no validation.csv)"
        v = pd.read_csv(path)
        worlds = sorted(int(w) for w in v["world_size"].unique())
        err = f"{v['error'].abs().mean():.0%} mean abs. error, out of sample over {len(v)} measured points"
        if world_size is not None and world_size > max(worlds) and len(worlds) < MIN_WORLD_SIZES:
            return False, (f"not validated at {world_size} ranks: fitted on world sizes "
                           f"{', '.join(map(str, worlds))} of CPU processes ({err}); a world-size extrapolation is "
                           f"quoted only from at least {MIN_WORLD_SIZES} measured world sizes, and never across a "
                           f"device class")
        return True, err
    return True, "not validated against measurements"


def modeled_table(rows: list[dict[str, Any]], root: Path) -> list[str]:
    """Modeled values, apart from the claims' rows: claim, model, value, its out-of-sample error. Never a verdict;
    a value outside the model's validated range is not quoted (model_error says why)."""
    lines = ["| claim | paper value | model | modeled value | out-of-sample error |", "|---|---|---|---|---|"]
    for r in rows:
        specs = {m["label"]: m for m in r.get("modeled_spec", [])}
        for label, v in r["modeled"]:
            spec = specs.get(label, {})
            ok, err = model_error(spec.get("error"), root, r["machine"], spec.get("world_size"))
            lines.append(f"| {r['paper']}: {r['claim']} | {r['paper_value']:g} | {label} | "
                         f"{f'{v:.3g}' if ok else 'not quoted'} | {err} |")
    return lines if len(lines) > 2 else ["No modeled values."]


def sets_table(states: list[SetState], root: Path | None = None) -> list[str]:
    """Each set's commits, runs and freshness, and (``root``: where its records are) its A/A control: one point
    against itself paired by round, what the set can resolve (a ratio whose interval overlaps it gets no verdict)."""
    lines = ["| set | machine | measured at | measurements (runs ok or diverged; bench: benchmarks; scale model: runs "
             "fitted; EMBark's model: rows modeled) | A/A control (resolving power) | state |", "|---|---|---|---|---|---|"]
    for st in states:
        if st.missing:
            continue
        c = None if root is None else aa_control(root, st.name, st.machine)
        aa = "–" if c is None else f"{c.value:.3f} [{c.lo:.3f}, {c.hi:.3f}], {c.rounds} rounds"
        lines.append(f"| {st.name} | {st.machine} | {st.commit_label()} | {st.measured} | {aa} | {st.state()} |")
    return lines


def aa_control(root: Path, name: str, machine: str):
    """The A/A control of a result set (resolving.control), or None."""
    reps = repeats_of(root, name, machine)
    return None if reps is None else control(reps)


def noise_lines(root: Path, machines: list[str]) -> list[str]:
    lines = ["| experiment | machine | probes | threads | SGEMM GFLOP/s (median) | spread within a probe | drift "
             "across the sweep | fixed work between 0.25-s windows on one core: in cache / from memory | load per core "
             "| |", "|---|---|---|---|---|---|---|---|---|---|"]
    for exp in RECORD_SETS:
        for m in machines:
            probes = load_probes(root / "results" / exp / m)
            level = noise_level(probes)
            if not level:
                continue
            threads = sorted({p.get("threads") for p in probes if p.get("threads")})
            load = "–" if level["load_per_core"] is None else f"{level['load_per_core']:.2f}"
            warn = "**too noisy for differences under " + f"{level['noise']:.0%}**" if level["noise"] > 0.1 else ""
            window = level["window"]
            windows = "–" if window is None else f"{window['compute']:.0%} / {window['memory']:.0%}"
            lines.append(f"| {exp} | {m} | {level['probes']} | {'/'.join(map(str, threads)) or '–'} | "
                         f"{level['gflops_median']:.1f} | {level['within']:.0%} | {level['drift']:.0%} | {windows} | "
                         f"{load} | {warn} |")
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
    states = States(root)
    rows = claim_rows(doc, root, machines, states)
    used = sorted({r["machine"] for r in rows if r["machine"] != "analytic"})
    ref = reference_machine(root / "results")
    measured_on = {*used, *([ref] if ref else [])}
    shown = measured_on | {m for name in REFERENCE_SETS for m in machines_of(root / "results" / name)}
    set_states = {m: [states(name, m) for name in REFERENCE_SETS] for m in shown}
    text = ["# Claims vs this repository's records", "",
            "Generated by `dlrmbench report` from the records under results/<experiment>/<machine>/; do not edit. "
            "Each point runs once per round, in a fresh process, the rounds interleaved across systems; a ratio is "
            "taken within each round (paired) and summarized by the Hodges-Lehmann estimate of the log ratio over "
            "rounds. Intervals: a group's is the exact Wilcoxon signed-rank interval of that estimate (a 95 % CI "
            "from 6 rounds; with fewer the range of the Walsh averages, and its confidence is stated); over groups a bootstrap over rounds (a maximum) or over groups and rounds "
            "(a median or mean: it spans the groups), named in the `interval` column. Each timed set runs an A/A "
            "control (one point twice per round): a ratio whose interval holds 1 or overlaps it is within noise. "
            "A claim phrased \"up "
            "to\" or \"maximum\" takes the maximum over groups, \"average\" the mean, any other the median. "
            f"Verdicts: **reproduced** when the interval overlaps [{BAND[0]}, {BAND[1]}] x the paper's value, "
            "**exceeds** / **below** outside that band; **not comparable** when our measurement differs in kind from "
            "the claim (the reason is given; our value is still shown); **STALE** when the code the set measured has "
            "changed since (no verdict until it is rerun). Modeled values are in their own table with the model's "
            "out-of-sample error and never give a verdict; analytic parameter counts do.", "",
            "Machines: " + "; ".join(machine_line(root, m) + (" (reference)" if m == ref else "") for m in used), "",
            "## Result sets", "",
            "Each set's commit(s), and whether the code it measured (its systems' packages, the op core and its "
            "kernels, the data layer, the harness loop; docstrings and comments excluded) is still the code here.", "",
            *sets_table([st for m in sorted(set_states) for st in set_states[m]], root), "",
            "## Verdicts", "", *verdict_table(rows), "",
            "## Modeled values (no verdict)", "", *modeled_table(rows, root), "",
            "## Noise probes", "",
            "An SGEMM timed at the runs' thread count before the first run, between rounds of repeats and after the "
            "last: the spread within a probe and the drift of its median across the sweep bound the differences a "
            "result set can resolve; the load per core (1-minute average) includes the sweep's own processes.", "",
            *noise_lines(root, used), ""]
    blocks: dict[str, list[str]] = {}
    tables = {m: measured_tables(root, m, {st.name: st for st in set_states[m]}) for m in measured_on}
    for m in used:
        for name, lines in tables[m].items():
            text += [f"## {name} on {m}", "", *lines, ""]
    text += ["## Every group's value", "", *group_lines(rows, doc), ""]
    if ref:
        ref_rows = rows if machines is None and used == [ref] else claim_rows(doc, root, [ref], states)
        blocks["claims"] = [f"Reference set: {machine_line(root, ref)}.", "", *verdict_table(ref_rows, False), "",
                            "Modeled values (never a verdict), with each model's out-of-sample error:", "",
                            *modeled_table(ref_rows, root)]
        blocks["sets"] = sets_table([st for m in sorted(set_states) for st in set_states[m]], root)
        blocks["noise"] = noise_lines(root, [ref])
        blocks.update(tables[ref])
        blocks.update(figure_blocks(ref))
    return "\n".join(text), blocks, rows


def check_reference(root: str | Path = ".") -> list[SetState]:
    """The committed reference sets that no longer describe the code (STALE) or are missing: empty when all hold."""
    root = Path(root)
    ref = reference_machine(results_of(root))
    if ref is None:
        raise ValueError(f"{root / 'results'} names no reference machine (results/REFERENCE_MACHINE)")
    states = States(root)
    return [st for st in (states(name, ref) for name in REFERENCE_SETS) if st.is_stale or st.missing]


def pages(root: Path) -> list[Path]:
    """The pages whose ``report:`` blocks the report rewrites: README.md and every page of docs/."""
    return [p for p in (Path(root) / "README.md", *sorted((Path(root) / "docs").rglob("*.md"))) if p.is_file()]


def update_readme(readme: Path, blocks: dict[str, list[str]]) -> bool:
    """Rewrite a page's generated blocks; a block the report has no table for says so. True when it changed."""
    text = readme.read_text()

    def fill(m: re.Match) -> str:
        body = blocks.get(m["name"], [f"(no records for `{m['name']}` in the reference set)"])
        return m.group(1) + "\n".join(body) + "\n" + m.group(4)

    new = BLOCK.sub(fill, text)
    if new != text:
        readme.write_text(new)
    return new != text


CLAIMS = Path(__file__).with_name("claims.toml")


def results_of(root: Path) -> Path:
    """``root``/results, or a ValueError saying where the command looked (run it where results/ is)."""
    results = root / "results"
    if not results.is_dir():
        raise ValueError(f"no results/ folder under {root.resolve()}: run this in the dlrmbench checkout (or the "
                         f"folder holding the records' results/)")
    return results


def build_report(root: str | Path = ".", claims: str | Path = CLAIMS,
                 machines: list[str] | None = None, readme: bool = True,
                 out: str | Path | None = None, pages_root: str | Path | None = None) -> list[Path]:
    """Write REPORT.md (``out``, default results/REPORT.md), claims.csv beside it and (``readme``) the generated
    blocks of README.md and docs/ under ``pages_root`` (default ``root``); return the paths written. ``claims``: a
    path, relative to ``root`` when not absolute (default: the package's claims.toml)."""
    root = Path(root)
    results_of(root)
    claims_path = root / claims
    try:
        doc = tomllib.loads(claims_path.read_text())
    except OSError as exc:
        raise ValueError(f"cannot read the claims file {claims_path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{claims_path} is not valid TOML: {exc}") from None
    for m in machines or []:
        if not any(m in machines_of(d) for d in (root / "results").iterdir() if d.is_dir()):
            raise ValueError(f"no records of machine {m!r} under {root / 'results'}")
    text, blocks, rows = render(root, doc, machines)
    out = Path(out) if out else root / "results" / "REPORT.md"
    out.write_text(text)
    csv = out.with_name("claims.csv")
    pd.DataFrame([{k: v for k, v in r.items() if k not in ("groups", "modeled", "modeled_spec")} |
                  {"modeled": "; ".join(f"{v:.6g} ({label})" for label, v in r["modeled"])} for r in rows]
                 ).to_csv(csv, index=False)
    paths = [out, csv]
    if readme:
        paths += [page for page in pages(Path(pages_root) if pages_root else root) if update_readme(page, blocks)]
    return paths
