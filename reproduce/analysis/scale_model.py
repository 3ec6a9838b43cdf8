"""The SC24 scale model: per-op costs calibrated on measured records plus a communication model project each
system's step time to world sizes that were not (or cannot be) measured. Everything it writes is labelled modeled.

Per rank, per step (b = local batch, B = N b the global batch, per table t: h_t lookups per sample, n_t rows):
  lookups   L_r = sum over the tables the rank looks up of (samples it serves) * h_t
  distinct  U_r = sum of E[distinct ids] of those lookups: sum_i 1 - (1 - p_i)^L over the table's bounded Zipf
            (the generators' own law, so this is exact in expectation for the synthetic presets)
  compute   C_r = kappa (a_s L_r + u_s U_r + e_s bytes_r)   a_s, u_s, e_s >= 0: system s's cost per lookup, per
                                               distinct row and per byte it packs / unpacks / reduces for the
                                               exchange, fitted (non-negative least squares, relative error) on every rank
                                               of every measured world size: the rank's median step minus its
                                               time blocked in communication
  comm      M_r = kappa beta bytes_r           bytes_r: what the rank sends per step, from the sharding:
              table-wise   pooled rows out (N-1) b D 4 per owned table, their gradients back b D 4 per table owned
                           elsewhere, and ids + lengths (8 bytes each) of the rank's samples for tables elsewhere
              data-parallel  ring all-reduce 2 (N-1)/N of the gradient buffer (the replicated parameters)
            beta: seconds per byte, fitted the same way on the measured ranks' blocked time
  step      max_r C_r + M_r, less the hidden part of a pipelined system: min(M_r, C_r) (g-1)/g for g groups
  kappa     max(1, N threads / cores): the measured ranks share the machine's cores; a projection gives every
            rank its own (kappa = 1)

A data-parallel system runs one local batch on every rank, so its records fix a L + u U at that batch, not a and u
apart: its projection to another workload (other lookups per distinct id) carries that ambiguity.

Sharding and placement are the systems' own (their ``dist_defaults``: table-wise sequential / greedy on U_t, or
data-parallel), computed by the same ``place_tables`` the runs use. A table-wise system cannot use more ranks
than tables: such points are infeasible, with the reason. The validation leaves one world size out at a time: it fits
on the others and predicts that one's points, and that out-of-sample error is the one reported (the in-sample error
of the fit on every record is kept beside it); the projection runs to 128 ranks on the measured workload and on a Meta-like one
with enough tables (same per-op costs: modeled on a workload that was not measured).
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from impls.sharding.plan import place_tables
from impls.data.zipf import expected_unique
from reproduce.harness.record_store import read_record
from reproduce.harness.records import Record

SYSTEMS = ("ttrec", "elrec", "ecorec", "dense-torch", "dense-fbgemm")
PROJECT_WORLDS = (1, 2, 4, 8, 16, 32, 64, 128)


@dataclass(frozen=True)
class Workload:
    """Tables (rows, hotness, dim) and the Zipf exponent of their ids."""
    name: str
    tables: tuple  # TableSpec
    alpha: float

    @staticmethod
    def of(data: str, **options: Any) -> "Workload":
        from impls.data.presets import get_preset

        spec = get_preset(data, **options)
        return Workload(data, tuple(spec.tables), spec.alpha)

    @property
    def dim(self) -> int:
        return self.tables[0].dim

    def lookups(self, t: int, samples: int) -> float:
        return samples * self.tables[t].hotness

    def distinct(self, t: int, samples: int) -> float:
        return expected_unique(self.tables[t].num_embeddings, self.lookups(t, samples), self.alpha)

    def param_bytes(self, impl: str, options: dict[str, Any]) -> float:
        """``impl``'s parameter bytes on these tables (a data-parallel rank's gradient buffer)."""
        from impls.api import get_impl

        return float(sum(get_impl(impl).table_param_bytes(self.tables, options)))


@dataclass(frozen=True)
class Sharding:
    kind: str  # "table-wise" | "data-parallel"
    placement: str = "sequential"
    groups: int = 1  # pipelined groups whose AlltoAll overlaps the next group's compute

    @staticmethod
    def of(impl: str) -> "Sharding":
        from impls.api import get_impl

        d = get_impl(impl).dist_defaults
        groups = int(d.get("pipeline_groups", 1)) if d.get("pipeline") == "table" else 1
        return Sharding(d["sharding"], d.get("placement", "sequential"), groups)


@dataclass
class RankLoad:
    lookups: float
    distinct: float
    bytes: float


def rank_loads(w: Workload, sh: Sharding, world: int, batch: int, grad_bytes: float,
               owned: list[list[int]] | None = None) -> list[RankLoad]:
    """Every rank's lookups, distinct ids and bytes sent per step (``owned``: a placement to use, else the
    system's own)."""
    T = len(w.tables)
    if sh.kind == "data-parallel":
        L = sum(w.lookups(t, batch) for t in range(T))
        U = sum(w.distinct(t, batch) for t in range(T))
        return [RankLoad(L, U, 2 * (world - 1) / world * grad_bytes)] * world
    B = batch * world
    if owned is None:
        if world > T:
            raise ValueError(f"table-wise sharding of {T} tables cannot use {world} ranks")
        costs = [w.distinct(t, B) for t in range(T)]
        owned = place_tables(costs, world, sh.placement)
    loads = []
    for mine in owned:
        others = [t for t in range(T) if t not in set(mine)]
        pooled = 4 * w.dim * ((world - 1) * batch * len(mine) + batch * len(others))
        ids = 8 * sum(batch + w.lookups(t, batch) for t in others) if world > 1 else 0.0
        loads.append(RankLoad(sum(w.lookups(t, B) for t in mine), sum(w.distinct(t, B) for t in mine),
                              pooled + ids if world > 1 else 0.0))
    return loads


@dataclass
class Coefficients:
    a_ms_per_lookup: float
    u_ms_per_distinct: float
    e_ms_per_byte: float  # packing, unpacking and reducing what the rank exchanges (CPU work on every backend)
    fit_points: int


@dataclass
class Fit:
    """Per-op costs of each system on one machine, and its seconds per byte sent."""
    machine: str
    cores: int
    threads: int
    beta_ms_per_byte: float
    systems: dict[str, Coefficients]
    source: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @staticmethod
    def from_json(text: str) -> "Fit":
        d = json.loads(text)
        d["systems"] = {k: Coefficients(**v) for k, v in d["systems"].items()}
        return Fit(**d)


def kappa(world: int, threads: int, cores: int | None) -> float:
    """How much slower a rank computes when the ranks share ``cores`` (None: each on its own cores)."""
    from impls.embark.calibrated import oversubscription

    return 1.0 if cores is None else oversubscription(world, threads, cores)


def step_ms(cal: Fit, impl: str, w: Workload, world: int, batch: int, grad_bytes: float,
            cores: int | None) -> dict[str, float]:
    """Modeled step of ``impl`` at ``world`` ranks (cores None: every rank on its own cores)."""
    c, sh = cal.systems[impl], Sharding.of(impl)
    k = kappa(world, cal.threads, cores)
    best = {"step_ms": -1.0}
    for load in rank_loads(w, sh, world, batch, grad_bytes):
        comp = k * (c.a_ms_per_lookup * load.lookups + c.u_ms_per_distinct * load.distinct
                    + c.e_ms_per_byte * load.bytes)
        comm = k * cal.beta_ms_per_byte * load.bytes
        t = comp + comm - min(comm, comp) * (sh.groups - 1) / sh.groups
        if t > best["step_ms"]:
            best = {"step_ms": t, "compute_ms": comp, "comm_ms": comm, "bytes": load.bytes}
    return best


# ---- the fit on records ------------------------------------------------------------------------------------


def _nnls(A: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative least squares on relative errors (as EMBark's calibration fits its terms: harness/calibration_run.fit_nonneg)."""
    from reproduce.harness.calibration_run import fit_nonneg

    return np.asarray(fit_nonneg(A, y))


def _observations(records: list[Record]) -> tuple[dict[str, list], list]:
    """Per system, per measured rank: (lookups, distinct, bytes, kappa, compute ms); and (kappa, bytes, blocked
    ms)."""
    comp: dict[str, list] = {}
    comm: list = []
    for r in records:
        p = r.point
        w = Workload.of(p["data"], **p["data_options"])
        N, b, threads = p["world_size"], p["batch_size"], p["threads"] or 1
        k = kappa(N, threads, r.env["cpu_count"])
        sh = Sharding.of(p["impl"])
        if N == 1:
            load = rank_loads(w, sh, 1, b, 0.0)[0]
            comp.setdefault(p["impl"], []).append((load.lookups, load.distinct, 0.0, k, r.total_ms))
            continue
        owned = None
        if sh.kind == "table-wise":
            index = {t.name: i for i, t in enumerate(w.tables)}
            owned = [[index[n] for n in mine] for mine in r.body.dist["placement"]["owned"]]
        loads = rank_loads(w, sh, N, b, r.body.param_bytes, owned)
        for pr in r.body.dist["per_rank"]:
            blocked = sum(pr["comm_blocked_ms"].values())
            sent = sum(pr["comm_bytes_per_step"].values())
            load = loads[pr["rank"]]
            comp.setdefault(p["impl"], []).append((load.lookups, load.distinct, load.bytes, k,
                                                   pr["total_ms_median"] - blocked))
            comm.append((k, sent, blocked))
    return comp, comm


def fit(records: list[Record], source: str) -> Fit:
    comp, comm = _observations(records)
    systems = {}
    for impl, obs in comp.items():
        o = np.array(obs, dtype=float)
        a, u, e = _nnls(o[:, :3] * o[:, 3:4], o[:, 4])
        systems[impl] = Coefficients(float(a), float(u), float(e), len(o))
    c = np.array(comm, dtype=float)
    beta = float(_nnls((c[:, 0] * c[:, 1])[:, None], c[:, 2])[0]) if len(c) else 0.0
    env = records[0].env
    return Fit(env["cpu"], int(env["cpu_count"]), int(records[0].point["threads"] or 1), beta, systems,
                       source)


def measured_records(results: Path, max_rows: int | None = None) -> list[Record]:
    """The sc24 sweep's main points (ablation variants and the A/A twin left out) of the systems this model covers."""
    out = []
    for f in sorted(results.glob("*.json")):
        r = read_record(f)
        p = r.point
        if not r.ok or p["impl"] not in SYSTEMS or str(p.get("label", "")).startswith("ablation") or p.get("twin"):
            continue
        if p["data_options"].get("max_rows") != max_rows:
            continue
        out.append(r)
    return out


# ---- validation and projection -----------------------------------------------------------------------------


def validate(cal: Fit, records: list[Record]) -> pd.DataFrame:
    """The model's step for every measured point (median over its repeats) beside the measured median."""
    rows = []
    for r in records:
        p = r.point
        w = Workload.of(p["data"], **p["data_options"])
        m = step_ms(cal, p["impl"], w, p["world_size"], p["batch_size"], r.body.param_bytes, cal.cores)
        rows.append({"impl": p["impl"], "data": p["data"], "world_size": p["world_size"],
                     "measured_ms": r.total_ms, "modeled_ms": m["step_ms"]})
    df = pd.DataFrame(rows).groupby(["impl", "data", "world_size"], as_index=False).median()
    df["error"] = df["modeled_ms"] / df["measured_ms"] - 1
    return df.sort_values(["impl", "world_size"]).reset_index(drop=True)


def validate_out_of_sample(records: list[dict], source: str) -> pd.DataFrame:
    """Leave one world size out: for each measured world size, fit on the records of the other world sizes and
    predict this one's points (``modeled_ms`` / ``error``: out of sample, the error the report quotes); beside them
    the fit on every record (``in_sample_ms`` / ``in_sample_error``). A system with no record left to fit on is
    not predicted (``modeled_ms`` NaN)."""
    full = validate(fit(records, source), records)
    parts = []
    for world in sorted({r.point["world_size"] for r in records}):
        train = [r for r in records if r.point["world_size"] != world]
        test = [r for r in records if r.point["world_size"] == world]
        fitted = {r.point["impl"] for r in train}
        test = [r for r in test if r.point["impl"] in fitted]
        if train and test:
            parts.append(validate(fit(train, source), test).assign(held_out=world))
    out = pd.concat(parts) if parts else full.iloc[:0].assign(held_out=pd.Series(dtype=int))
    out = full.drop(columns=["modeled_ms", "error"]).merge(out[["impl", "data", "world_size", "modeled_ms", "error",
                                                                 "held_out"]], on=["impl", "data", "world_size"],
                                                            how="left")
    out["in_sample_ms"] = full["modeled_ms"].to_numpy()
    out["in_sample_error"] = full["error"].to_numpy()
    return out


def project(cal: Fit, workloads: list[tuple[str, Workload]], batch: int, options: dict[str, dict],
            worlds=PROJECT_WORLDS) -> pd.DataFrame:
    """Every system at every world size on each workload, each rank on its own cores (``options``: each system's
    impl options, for its parameter bytes)."""
    rows = []
    for label, w in workloads:
        for impl in cal.systems:
            grad = w.param_bytes(impl, options[impl])
            for N in worlds:
                row = {"workload": label, "impl": impl, "world_size": N, "modeled": True}
                try:
                    row.update(step_ms(cal, impl, w, N, batch, grad, cores=None), feasible=True, reason="")
                except ValueError as exc:
                    row.update(step_ms=math.nan, feasible=False, reason=str(exc))
                rows.append(row)
    df = pd.DataFrame(rows)
    for base in ("elrec", "ttrec"):  # EcoRec's modeled speedup over each baseline
        b = df[df["impl"] == base].set_index(["workload", "world_size"])["step_ms"]
        key = pd.MultiIndex.from_frame(df[["workload", "world_size"]])
        df[f"ecorec_speedup_over_{base}"] = np.where(df["impl"] == "ecorec", b.reindex(key).to_numpy() / df["step_ms"],
                                                     np.nan)
    return df


FITTED = "fitted.json"  # the fitted constants (fit.json beside it: the code and records the fit read)


def run(results: Path, out: Path, figures: Path) -> dict[str, Path]:
    records = measured_records(results)
    if not records:
        raise ValueError(f"no sc24 records in {results}: run `make reproduce-sc24` first")
    fitted = fit(records, str(results))
    out.mkdir(parents=True, exist_ok=True)
    (out / FITTED).write_text(fitted.to_json() + "\n")
    val = validate_out_of_sample(records, str(results))
    val.to_csv(out / "validation.csv", index=False)
    options = {r.point["impl"]: r.point["impl_options"] for r in records}
    from collections import Counter

    data = Counter(r.point["data"] for r in records).most_common(1)[0][0]  # the workload measured at most sizes
    p = next(r.point for r in records if r.point["data"] == data)
    measured = Workload.of(p["data"], **p["data_options"])
    meta = Workload.of("meta-2022", dim=measured.dim)
    proj = project(fitted, [(f"{measured.name} (measured workload)", measured),
                         (f"meta-2022, {len(meta.tables)} tables (not measured)", meta)], p["batch_size"], options)
    proj.to_csv(out / "projection.csv", index=False)
    write_fit_meta(out, results)
    from reproduce.analysis.plots.scale import draw_scale

    paths = draw_scale(val, proj, fitted, figures)
    return {"fitted": out / FITTED, "validation": out / "validation.csv",
            "projection": out / "projection.csv", **{p.stem + p.suffix: p for p in paths}}


def write_fit_meta(out: Path, results: Path) -> Path:
    """fit.json: the commit, the model's code fingerprint and the sc24 records (with their code digests) the fit
    read, so a report can tell when the fit no longer describes the code or the records (analysis/freshness.py)."""
    from reproduce.analysis.model_code import fit_inputs, scale_model_fingerprint
    from reproduce.harness.environment import code_dirty, git_sha
    from reproduce.harness.record_store import write_json

    return write_json(out / "fit.json", {"git_sha": git_sha(), "git_dirty": code_dirty(),
                                         "code": scale_model_fingerprint(), "inputs": fit_inputs(results)})


def redraw(out: Path, figures: Path) -> list[Path]:
    """The scale model's figures again, from the CSVs and the fitted constants it wrote in ``out``."""
    from reproduce.analysis.plots.scale import draw_scale

    cal = Fit.from_json((out / FITTED).read_text())
    return draw_scale(pd.read_csv(out / "validation.csv"), pd.read_csv(out / "projection.csv"), cal, figures)
