"""Does a result set still describe the code beside it? Each record keeps the commit it ran at and the fingerprint
of the code its point measures (reproduce/harness/fingerprint.py); a set is STALE when any of its measurements was taken on
code that has changed since (or before fingerprints existed: fingerprint.py says what a run's code is), or when a plan it ran was made on a calibration
profile that has been rewritten since (the record keeps the profile's digest), and a STALE set draws no verdict.
Sets that are not run records carry their own fingerprint (fingerprint.py's, of what their code imports):
`dlrmbench bench`'s benchmarks.json (benchmarks/conftest.py), the scale model's fit.json (its code, and the sc24
records it was fitted on) and EMBark's cost model's model.json."""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reproduce.analysis.model_code import fit_inputs
from reproduce.analysis.models import MODELS
from reproduce.harness import code, fingerprint
from reproduce.harness.experiment import reference_sets
from reproduce.harness.machine import FBGEMM_DISTRIBUTIONS
from reproduce.harness.record_store import records_in
from reproduce.harness.records import Status

# the committed reference sets `dlrmbench report --check` holds to the code (results/<name>/<reference machine>/)
RECORD_SETS = tuple(reference_sets())  # each experiment TOML's ``reference`` profiles (harness/experiment.py)
# the sets that are not run records: the benchmarks' and each model's (analysis/models.py)
OTHER_SETS = ("bench", *(m.set_name for m in MODELS.values() if m.reference_set))
REFERENCE_SETS = RECORD_SETS + OTHER_SETS
MEASURED = (Status.OK, Status.DIVERGED)  # records whose numbers a report shows


@dataclass
class SetState:
    """One result set: the commits its measurements ran at (sha -> how many), how many measured code that differs
    from their commit (uncommitted edits to what they measure), and why it is STALE (empty: it describes today's
    code)."""

    name: str
    machine: str
    commits: Counter = field(default_factory=Counter)
    measured: int = 0
    dirty: int = 0
    stale: list[str] = field(default_factory=list)
    missing: bool = False
    platform: list[str] = field(default_factory=list)  # library versions that differ from those installed here

    @property
    def is_stale(self) -> bool:
        return bool(self.stale)

    def commit_label(self) -> str:
        """``abc1234`` or ``abc1234 (40 runs), def5678 (8 runs)``; ``+ uncommitted code`` when some ran dirty."""
        if not self.commits:
            return "unknown commit"
        if len(self.commits) == 1:
            label = _short(next(iter(self.commits)))
        else:
            label = ", ".join(f"{_short(sha)} ({n} runs)" for sha, n in self.commits.most_common())
        return label + (f" + uncommitted code ({self.dirty} runs)" if self.dirty else "")

    def state(self) -> str:
        """``fresh`` or ``STALE: why``, with a platform change beside it (``; platform: torch 2.12 -> 2.13``)."""
        if self.missing:
            return "no records"
        state = "STALE: " + "; ".join(self.stale) if self.stale else "fresh"
        return state + (f" (platform: {', '.join(self.platform)})" if self.platform else "")

    def line(self) -> str:
        """What a table or caption says of the set: its commit(s), and STALE with why."""
        return f"measured at {self.commit_label()}" + ("" if not self.stale else f"; **{self.state()}**")


def _short(sha: str | None) -> str:
    return (sha or "unknown")[:7]


def _changed(names: set[str], limit: int = 4) -> str:
    shown = sorted(names)[:limit]
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(shown) + more


def platform_now() -> dict[str, str | None]:
    """The versions of the libraries a measurement depends on, installed here (read without importing them)."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for key, dists in PLATFORM.items():
        out[key] = None
        for dist in dists:
            try:
                out[key] = version(dist)
                break
            except PackageNotFoundError:
                continue
    return out


# a record's env key -> the distributions that provide it (the first installed one counts)
PLATFORM = {"torch": ("torch",), "fbgemm_gpu": FBGEMM_DISTRIBUTIONS, "torchrec": ("torchrec",)}


def _version(v: str | None) -> str | None:
    return None if v in (None, "unknown") else str(v).split("+")[0]


def record_set_state(out_dir: Path, name: str, machine: str, root: Path = code.ROOT,
                     only: set[str] | None = None) -> SetState:
    """The state of a folder of run records (only the file names in ``only``, when given): STALE when a file a
    record ran (or an input it read) differs today (fingerprint.changes); library versions that differ from those
    installed here are a platform change, said beside it."""
    st = SetState(name, machine)
    if not Path(out_dir).is_dir() or not any(Path(out_dir).glob("*.json")):
        st.missing = True
        return st
    unfingerprinted, changed, profiles = 0, set(), set()
    seen: dict[str, list[str]] = {}
    now, platform = platform_now(), set()
    for rec in records_in(out_dir, only):
        if rec.status not in MEASURED:
            continue
        st.measured += 1
        env = rec.env
        st.commits[env.get("git_sha")] += 1
        then = rec.body.code
        # dirty: the code this run measured differs from its commit (uncommitted edits elsewhere do not count)
        st.dirty += bool(env.get("git_dirty")) and bool(then) and code.committed(then["files"], env.get("git_sha"),
                                                                                  root) is False
        if not then:
            unfingerprinted += 1
        else:
            key = then["digest"] + json.dumps(fingerprint.input_paths(rec.point), default=str)
            if key not in seen:
                seen[key] = fingerprint.changes(then, rec.point, root)
            changed |= set(seen[key])
        for lib, installed in now.items():
            ran = _version(env.get(lib))
            if ran and installed and ran != _version(installed):
                platform.add(f"{lib} {ran} -> {_version(installed)}")
        plan = (rec.body.dist or {}).get("plan") or {}
        made_on = plan.get("profile")
        if made_on and plan.get("profile_sha") and profile_sha(root, made_on) != plan["profile_sha"]:
            profiles.add(str(made_on))
    if unfingerprinted:
        st.stale.append(f"{unfingerprinted} of {st.measured} runs measured before code fingerprints")
    if changed:
        st.stale.append(f"code changed since: {_changed(changed)}")
    if profiles:  # the plans were made on a calibration that has been rewritten (or removed) since
        st.stale.append(f"calibration profile changed since: {_changed(profiles)}")
    st.platform = sorted(platform)
    return st


def profile_sha(root: Path, path: str) -> str | None:
    """The digest a plan records of its calibration profile (Profile.load's), of the file as it is now (a relative
    path under ``root``, where runs read it); None when it is gone."""
    from impls.embark.profile_digest import file_digest

    return file_digest(Path(path) if Path(path).is_absolute() else Path(root) / path)


def bench_fingerprint(root: Path = code.ROOT) -> dict[str, Any]:
    """The code `dlrmbench bench` measures: every benchmark module and what it imports. A bench set, like the scale
    model's fit and a run record, is STALE when a file of its recorded fingerprint changed (an import it gained is an
    edit of a file it had)."""
    bench = tuple(m for m in code.modules(root) if m.startswith("benchmarks"))
    return fingerprint.of_imports(bench, follow=bench, root=root)


def bench_state(path: Path, machine: str, root: Path = code.ROOT) -> SetState:
    st = SetState("bench", machine)
    if not path.exists():
        st.missing = True
        return st
    doc = json.loads(path.read_text())
    info = doc.get("dlrmbench") or {}
    st.measured = len(doc.get("benchmarks", []))
    st.commits[info.get("git_sha") or (doc.get("commit_info") or {}).get("id")] = st.measured
    st.dirty = st.measured if info.get("git_dirty") else 0
    then = info.get("code")
    if not then:
        st.stale.append("measured before code fingerprints")
    else:
        changed = fingerprint.changed_files(then["files"], root)
        if changed:
            st.stale.append(f"code changed since: {_changed(changed)}")
    profiles = {str(x["profile"]) for x in (b.get("extra_info") or {} for b in doc.get("benchmarks", []))
                if x.get("profile") and x.get("profile_sha") and profile_sha(root, x["profile"]) != x["profile_sha"]}
    if profiles:  # the planner's plan was made on a calibration that has been rewritten (or removed) since
        st.stale.append(f"calibration profile changed since: {_changed(profiles)}")
    return st


def modeled_state(out: Path, name: str, machine: str, root: Path = code.ROOT) -> SetState:
    """A model's outputs that read no records (EMBark's cost model at 8-128 GPUs): STALE when its code changed since
    model.json recorded it."""
    st = SetState(name, machine)
    meta = Path(out) / "model.json"
    if not Path(out).is_dir():
        st.missing = True
        return st
    modeled = Path(out) / "modeled.csv"
    st.measured = max(0, len(modeled.read_text().splitlines()) - 1) if modeled.exists() else 0
    if not meta.exists():
        st.stale.append("written before model.json recorded its code: rerun `dlrmbench model recsys24`")
        return st
    doc = json.loads(meta.read_text())
    st.commits[doc.get("git_sha")] = 1
    changed = fingerprint.changed_files(doc["code"]["files"], root)
    if changed:
        st.stale.append(f"model code changed since: {_changed(set(changed))}")
    return st


def scale_model_state(out: Path, sc24: Path, machine: str, root: Path = code.ROOT) -> SetState:
    """The scale model's outputs in ``out``: STALE when its code changed, when the sc24 records it was fitted on
    changed (refit), or when those records are STALE themselves."""
    st = SetState("scale_model", machine)
    meta = Path(out) / "fit.json"
    if not Path(out).is_dir():
        st.missing = True
        return st
    if not meta.exists():
        st.stale.append("fitted before fit.json recorded its code and inputs")
        return st
    fit = json.loads(meta.read_text())
    st.commits[fit.get("git_sha")] = 1
    st.measured = len(fit.get("inputs", {}))
    changed = fingerprint.changed_files(fit["code"]["files"], root)
    if changed:
        st.stale.append(f"model code changed since: {_changed(changed)}")
    if fit.get("inputs") != fit_inputs(sc24):
        st.stale.append("the sc24 records changed since the fit: refit (`python -m reproduce.analysis.scale_model`)")
    inputs = record_set_state(sc24, "sc24", machine, root)
    if inputs.is_stale:
        st.stale.append("fitted on a STALE sc24 set")
    return st


def set_state(results: Path, name: str, machine: str, root: Path = code.ROOT) -> SetState:
    """The state of results/<name>/<machine> (any record set, bench, or the scale model)."""
    if name == "bench":
        return bench_state(Path(results) / "bench" / machine / "benchmarks.json", machine, root)
    if name == "recsys24_model":  # one set for every machine: it models a DGX-H100
        return modeled_state(Path(results) / "recsys24_model", name, machine, root)
    if name == "scale_model":
        return scale_model_state(Path(results) / "scale_model" / machine, Path(results) / "sc24" / machine,
                                 machine, root)
    return record_set_state(Path(results) / name / machine, name, machine, root)


def reference_states(results: Path, machine: str, root: Path = code.ROOT) -> list[SetState]:
    """Every committed reference set of ``machine``."""
    return [set_state(results, name, machine, root) for name in REFERENCE_SETS]
