"""The measured tables of the report and the README for one machine: each experiment's report blocks
(set_blocks.py, over the ratio-table engine of ratio_tables.py), `dlrmbench bench`'s (bench_tables.py), each model's
(models.py) and the durations (durations.py), each opened by the line naming its set, commit and freshness. Nothing
here is typed in: a table row exists only where its records do."""
from __future__ import annotations

from pathlib import Path

from reproduce.analysis.claims import repeats_of
from reproduce.analysis.freshness import RECORD_SETS
from reproduce.harness.record_store import read_record
from reproduce.analysis.bench_tables import BENCH_BLOCKS, prepare_rates, roofline, step_profile, tt_step
from reproduce.analysis.durations import durations, quickstart, test_time
from reproduce.analysis.set_blocks import SET_BLOCKS


def measured_tables(root: Path, machine: str, states: dict | None = None) -> dict[str, list[str]]:
    """The named tables (markdown lines) that ``machine``'s records support, each opened by the line that names
    its result set, the commit(s) it was measured at and, when the code moved since, STALE (``states``: set name ->
    freshness.SetState): each experiment's ``report`` blocks (SET_BLOCKS), `make bench`'s, each model's and the
    durations."""
    from reproduce.analysis.models import MODELS
    from reproduce.harness.experiment import report_blocks

    out: dict[str, list[str]] = {}
    sets: dict[str, str] = dict(BENCH_BLOCKS)
    for block, set_name in report_blocks():
        reps = repeats_of(root, set_name, machine)
        if reps is not None:
            out[block] = SET_BLOCKS[block](reps, root, set_name, machine)
            sets[block] = set_name
    for name, lines in (("roofline", roofline(root, machine)), ("tt-step", tt_step(root, machine)),
                        ("step-profile", step_profile(root, machine)), ("prepare", prepare_rates(root, machine))):
        out[name] = lines
    for model in MODELS.values():
        out[model.block] = model.table(root, machine)
        sets[model.block] = model.set_name
    out["durations"] = durations(root, machine, states)
    out["quickstart"] = quickstart(root, machine)
    verdict = out.pop("compression-verdict", [])
    out = {k: v for k, v in out.items() if len(v) > 2}  # a table beyond its header
    tested = test_time(root, machine)  # one line, of no set
    if tested:
        out["test-time"] = tested
    if verdict:  # a data set's line and one per budget
        out["compression-verdict"] = verdict
    for name, lines in out.items():
        st = (states or {}).get(sets.get(name, ""))
        if st is not None:
            out[name] = [f"Set `results/{st.name}/{machine}`: {st.line()}.", "", *lines]
    return out


def machine_line(root: Path, machine: str) -> str:
    """The fingerprint of a result set, from one of its records."""
    for exp in RECORD_SETS:
        for f in sorted((Path(root) / "results" / exp / machine).glob("*.json")):
            env = read_record(f).env
            fp = env.get("machine")
            if fp:
                mem = f", {fp['memory_bytes'] / 2**30:.0f} GiB" if fp.get("memory_bytes") else ""
                gpu = f", {fp['gpu_count']}x {fp['gpu']}" if fp.get("gpu_count") else ""
                return (f"{machine}: {fp['cpu']}, {fp['cores']} cores ({fp['isa']}){mem}{gpu}; torch {fp['torch']}"
                        f"{', CUDA ' + fp['cuda'] if fp.get('cuda') else ''}"
                        f"{', fbgemm ' + fp['fbgemm_gpu'] if fp.get('fbgemm_gpu') else ''}")
            if env.get("cpu"):
                return f"{machine}: {env['cpu']}, {env.get('cpu_count')} cores; torch {env.get('torch')}"
    return f"{machine}: no records"
