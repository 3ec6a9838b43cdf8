"""One paper claim (reproduce/analysis/claims.toml) against one machine's records: the value aggregated as the paper
phrases the claim, its interval (each group's ratio paired by round; over groups a bootstrap: stats.aggregate_interval,
named in the row), the spread over groups, the modeled values (reported apart, never in the claim's row) and a two-sided verdict.
Only measured, comparable values from a set that still describes the code (not STALE) and analytic parameter counts
get a verdict."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reproduce.analysis.aggregate import without_twins
from reproduce.analysis.resolving import band, within_noise
from reproduce.analysis.stats import aggregate_interval, aggregate_name, by_round, paired_ratio

BAND = (0.8, 1.25)  # reproduced: the interval overlaps [0.8, 1.25] x the paper's value
KINDS = ("ratio", "reduction", "growth", "compression", "none")


PHRASES = {"up to": "max", "maximum": "max", "average": "mean"}


def how(c: dict) -> str:
    """The aggregate over groups the claim's wording asks for: the maximum for "up to" / "maximum", the mean for
    "average", else the median."""
    return PHRASES.get(c.get("phrase", "").strip().lower(), "median")


def repeats_of(root: Path, experiment: str, machine: str) -> pd.DataFrame | None:
    """The runs (one row per repeat) of ``experiment`` on ``machine``, or None when it has none."""
    path = Path(root) / "results" / experiment / machine / "repeats.csv"
    return pd.read_csv(path) if path.exists() else None


def claim_pairs(reps: pd.DataFrame, c: dict) -> list[tuple[tuple, dict, dict, float]]:
    """Per group: (group key, numerator rounds, denominator rounds, power) (round -> value): the group's value is the
    paired ratio (the Hodges-Lehmann estimate over rounds of num / den within the round) ** power. The A/A twin is left out."""
    by = c.get("by", "label")
    ok = without_twins(reps[(reps["status"] == "ok") & reps[c["metric"]].notna()])
    if "oversubscribed" in ok:  # a point that ran more ranks x threads than cores never carries a claim's value
        ok = ok[~ok["oversubscribed"].fillna(False).astype(bool)]
    out = []
    for key, g in ok.groupby(c["group"], sort=True):
        key = key if isinstance(key, tuple) else (key,)
        if c["kind"] == "growth":
            mine = g[g[by] == c["numerator"]]
            sizes = sorted(mine[c["growth"]].unique())
            if len(sizes) < 2:
                continue
            lo, hi = sizes[0], sizes[-1]
            num = by_round(mine[mine[c["growth"]] == hi], c["metric"])
            den = by_round(mine[mine[c["growth"]] == lo], c["metric"])
            out.append((key, num, den, 1 / math.log2(hi / lo)))
            continue
        num = by_round(g[g[by] == c["numerator"]], c["metric"])
        den = by_round(g[g[by] == c["denominator"]], c["metric"])
        if num and den:
            out.append((key, num, den, 1.0))
    return out


def modeled_values(c: dict, root: Path, machine: str) -> list[tuple[str, float]]:
    """(label, value) of each [[claim.modeled]] entry whose CSV exists."""
    out = []
    for m in c.get("modeled", []):
        path = Path(root) / m["csv"].format(machine=machine)
        if not path.exists():
            continue
        df = pd.read_csv(path)
        if m.get("query"):
            df = df.query(m["query"])
        vals = df[m["column"]].dropna() if m["column"] in df else pd.Series(dtype=float)
        if len(vals):
            out.append((m["label"], float(getattr(vals, m["aggregate"])())))
    return out


def band_verdict(lo: float, hi: float, paper: float) -> str:
    if hi < BAND[0] * paper:
        return "below"
    if lo > BAND[1] * paper:
        return "exceeds"
    return "reproduced"


def exact_verdict(ours: float, paper: float) -> str:
    """An exact (analytic) value against the paper's: "reproduced" when they agree to the digits the paper gives
    (its value rounded to the same significant digits), else "differs" with no tolerance band."""
    digits = len(f"{paper:g}".replace(".", "").replace("-", "").lstrip("0")) or 1
    return "reproduced" if float(f"{ours:.{digits}g}") == float(f"{paper:.{digits}g}") else "differs"


def plan_choice(reps: pd.DataFrame, c: dict) -> str:
    """For a claim on the EMBark planner: which plan it ran in each group it is measured in, and when that was a
    simple plan unchanged everywhere, what the claim's ratio then compares."""
    if c.get("denominator") != "embark planner" or "plan_start" not in reps:
        return ""
    ok = reps[(reps["status"] == "ok") & (reps["label"] == "embark planner") & reps["plan_start"].notna()]
    if "oversubscribed" in ok:
        ok = ok[~ok["oversubscribed"].fillna(False).astype(bool)]
    if ok.empty:
        return ""
    moves = ok["plan_moves"].fillna(0) if "plan_moves" in ok else pd.Series(0, index=ok.index)
    starts = sorted(set(ok["plan_start"]))
    if len(starts) == 1 and (moves == 0).all():
        return (f"the planner chose {starts[0]} unchanged in every group: the value is {starts[0]} (as the planner "
                f"ran it) against {c['numerator']}")
    return "the planner's plans: " + ", ".join(starts)


def evaluate_claim(c: dict, root: Path, machine: str, state=None) -> dict[str, Any]:
    """The claim's row of the report for one machine's result set (``state``: the set's freshness, a
    freshness.SetState; a STALE set gives no verdict)."""
    if c["kind"] not in KINDS:
        raise ValueError(f"claim {c['id']}: kind must be one of {KINDS}, got {c['kind']!r}")
    row: dict[str, Any] = {"id": c["id"], "paper": c["paper"], "claim": c["text"], "paper_value": c["paper_value"],
                           "machine": machine, "aggregate": how(c), "value": None, "lo": None, "hi": None,
                           "groups": [], "runs": None, "modeled": modeled_values(c, root, machine), "verdict": "",
                           "why": "", "noise": "", "interval": "", "set": ""}
    if c["kind"] == "none":
        return {**row, "verdict": "not measurable here", "why": c["reason"]}
    if c["kind"] == "compression":  # parameter arithmetic on the real cardinalities: exact, not a timing
        from reproduce.analysis.compression import compression_table

        t = compression_table(ks=(7,), ranks=(32,))
        values = {d: float(t[t["dataset"] == d]["ratio"].iloc[0]) for d in c["datasets"]}
        verdicts = {d: exact_verdict(v, c["paper_values"][d]) for d, v in values.items()}
        first = values[c["datasets"][0]]
        agreed = set(verdicts.values())
        verdict = agreed.pop() if len(agreed) == 1 else "mixed"
        return {**row, "machine": "analytic", "value": first, "lo": first, "hi": first,
                "aggregate": "parameter counts", "groups": [((d,), v) for d, v in values.items()],
                "interval": "exact", "verdict": f"{verdict} (analytic, exact)",
                "shown": ", ".join(f"{v:.3g} ({d})" for d, v in values.items()),
                "why": "; ".join(f"{d}: {v:.3g} vs {c['paper_values'][d]:g} ({verdicts[d]})"
                                 for d, v in values.items())}
    reps = repeats_of(root, c["experiment"], machine)
    if reps is None:
        return {**row, "verdict": "not measured yet",
                "why": f"results/{c['experiment']}/{machine}/ has no records: run the experiment"}
    pairs = claim_pairs(reps, c)
    listed = per_group_paper(c, pairs)
    if c.get("at"):  # the claim's value is the one group the paper's value is for; the rest are listed
        pairs = [pair for pair in pairs if _matches(c, pair[0])]
        if not pairs:
            at = ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in c["at"].items())
            return {**row, "verdict": "not measured yet",
                    "why": "; ".join(x for x in (f"no run at {at} (the paper's value is for it)", listed) if x)}
    if not pairs:
        return {**row, "verdict": "not measured yet", "why": "no group measured both sides"}
    transform = (lambda r: 1 - r) if c["kind"] == "reduction" else (lambda r: r)
    value, lo, hi, per = aggregate_interval([(n, d, p) for _, n, d, p in pairs], row["aggregate"], transform)
    row.update(value=value, lo=lo, hi=hi, groups=[(k, v) for (k, *_), v in zip(pairs, per)],
               runs=min(paired_ratio(n, d)[3] for _, n, d, _ in pairs))
    row["interval"] = aggregate_name(row["aggregate"], len(pairs), row["runs"])
    if state is not None:
        row["set"] = state.commit_label()
    aa = band(reps)
    if c["metric"].endswith("_ms") and c["kind"] == "ratio" and within_noise(lo, hi, aa):
        row["noise"] = ("its interval holds 1" + (f" or overlaps the set's A/A control [{aa[0]:.3f}, {aa[1]:.3f}]"
                                                   if aa else "") + ": the set cannot tell the two apart")
    listed = "; ".join(x for x in (listed, plan_choice(reps, c)) if x)
    if listed:
        row["why"] = listed
    comparable = c.get("comparable", False)
    if comparable == "gpu":  # comparable when every run of the set ran on a GPU
        kinds = set(reps["device_kind"].dropna()) if "device_kind" in reps else {"cpu"}
        comparable = kinds == {"cuda"}
    if not comparable:
        return {**row, "verdict": "not comparable",
                "why": "; ".join(x for x in (c["not_comparable"], listed) if x)}
    if state is not None and state.is_stale:
        return {**row, "verdict": "STALE: no verdict", "why": "; ".join(state.stale) + ": rerun the experiment"}
    verdict = band_verdict(lo, hi, c["paper_value"])
    why = "" if verdict == "reproduced" else (
        f"interval [{lo:.3g}, {hi:.3g}] {'under' if verdict == 'below' else 'above'} "
        f"[{BAND[0] * c['paper_value']:.3g}, {BAND[1] * c['paper_value']:.3g}]")
    if row["runs"] < 2:
        why = (why + "; " if why else "") + "one run per point: no interval from repeats"
    return {**row, "verdict": verdict, "why": "; ".join(x for x in (why, listed) if x)}


def _matches(c: dict, key: tuple) -> bool:
    """Whether a group's key is the claim's ``at`` setting (``at = { column = value }``, columns of ``group``)."""
    return all(key[c["group"].index(col)] == value for col, value in c["at"].items())


def per_group_paper(c: dict, pairs) -> str:
    """``paper_by_group = "fig11"``: each measured group's value beside the paper artifact's own value for it."""
    if c.get("paper_by_group") != "fig11":
        return ""
    from reproduce.analysis import fig11_artifact

    parts = []
    for key, num, den, power in pairs:
        batch = int(key[c["group"].index("batch_size")])
        if batch in fig11_artifact.TOTAL_MS:
            ours = paired_ratio(num, den)[0] ** power
            parts.append(f"{batch}: {ours:.3g} vs {fig11_artifact.ratio(c['numerator'], batch):.3g}")
    return ("per batch, ours vs the artifact's: " + ", ".join(parts)) if parts else ""


def spread(groups: list[tuple[tuple, float]]) -> str:
    """``n, min / median / max`` over the groups' values."""
    if not groups:
        return "–"
    v = np.array([x for _, x in groups])
    return f"{len(v)}: {v.min():.3g} / {np.median(v):.3g} / {v.max():.3g}"
