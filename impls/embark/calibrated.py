"""EMBark's planner on a calibrated cost model: a plan's step time predicted from what ``dlrmbench calibrate`` measured
on the machine and backend that run it (a profile: reproduce/harness/calibration_run.py measures it), term by term:

  lookup    each owner's fused RB lookup, forward and backward (with its fused update), per storage:
            fixed + per bag + per key + per distinct row + per byte of the rows read + per byte of distinct rows +
            per byte of the pooled output (written forward, read backward; dearer past a fitted cache knee), scaled
            to how lookups run inside the engine's steps; UB lookups on the unique keys; DP tables' local lookups
            (dense-torch, as DataParallelCollection runs them)
  dedup     UB's two unique passes (the source's keys per owner, the owner's keys across sources), per key
  pool      the source adding what comes back (partial sums, UB rows) into its output, and the gradient taken back
            out of it, per byte; DP replicas' gradients made dense and applied, per byte
  comm      the four all_to_alls of a model-parallel step (keys header, keys, forward rows, backward rows) and the
            DP tables' one all_reduce: each latency + bytes / bandwidth at its world size, the bytes of the busiest
            rank (the larger of what it sends to and what it receives from the others)
  engine    the engine's own work around these (routing every key to its owners, packing payloads, assembling the
            output and its gradient, UB's occurrence maps, DP's sparse gradients, per-shard and per-step
            bookkeeping): fixed + per routed key + per output byte + per byte an owner returns + per shard + per UB
            key and occurrence byte + per DP table and byte, fitted at each world size (with the lookups' scale) to
            the difference between measured steps of the candidate plans on calibration workloads and the terms above

The compute of the busiest rank counts (every all_to_all waits for it), scaled by the oversubscription of the
machine (``world * threads / cores`` when over 1: ranks sharing cores take turns); the collectives were measured at
their world size, so they carry it already. Hierarchical plans (partial sums reduced inside a node first) need an
inter-node calibration this profile does not have: asking for one is an error."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from impls.api import TableSpec
from impls.data.zipf import expected_unique
from impls.embark.profile_digest import digest as profile_digest
from impls.embark.shards import Cluster, Plan, TablePlacement

PROFILE_VERSION = 3
COLLECTIVES = ("all_to_all", "all_reduce", "all_gather")
DIRECTIONS = ("fwd", "bwd")
KEY_BYTES = 8  # keys travel as int64 local rows
A2A_PER_STEP = 4  # keys header, keys, forward rows, backward rows


def oversubscription(ranks: int, threads: int, cores: int) -> float:
    """How many turns ranks of ``threads`` threads each take on ``cores`` cores (1 when they fit): the factor their
    compute slows by."""
    return max(1.0, ranks * threads / max(cores, 1))


@dataclass(frozen=True)
class Line:
    """Seconds = fixed + per_unit * x (x: bytes, keys)."""

    fixed_s: float
    per_unit_s: float

    def at(self, x: float) -> float:
        return self.fixed_s + self.per_unit_s * x


@dataclass(frozen=True)
class Lookup:
    """Seconds of one fused lookup call (forward, or backward with its update): fixed + per bag + per key + per
    distinct row + per byte of rows read (keys x width x 4) + per byte of distinct rows (what the caches miss: a
    skewed id stream reads the same hot rows again) + per byte of the pooled output (bags x width x 4: written
    forward, its gradient read backward), the output's bytes dearer past ``cache_bytes`` (many short bags of wide
    tables are bound by their output, not by their keys)."""

    fixed_s: float
    per_bag_s: float
    per_key_s: float
    per_unique_s: float
    per_byte_s: float
    per_unique_byte_s: float
    per_out_byte_s: float
    per_out_byte_past_cache_s: float
    cache_bytes: float

    def at(self, bags: float, keys: float, unique: float, row_bytes: float, unique_bytes: float,
           out_bytes: float) -> float:
        if bags <= 0:
            return 0.0
        x = self.features(bags, keys, unique, row_bytes, unique_bytes, out_bytes, self.cache_bytes)
        return sum(c * v for c, v in zip(self.coef(), x))

    def coef(self) -> tuple[float, ...]:
        return (self.fixed_s, self.per_bag_s, self.per_key_s, self.per_unique_s, self.per_byte_s,
                self.per_unique_byte_s, self.per_out_byte_s, self.per_out_byte_past_cache_s)

    @staticmethod
    def features(bags: float, keys: float, unique: float, row_bytes: float, unique_bytes: float, out_bytes: float,
                 cache_bytes: float) -> tuple[float, ...]:
        """What each coefficient multiplies (the fit's columns)."""
        return (1.0, bags, keys, unique, row_bytes, unique_bytes, out_bytes, max(0.0, out_bytes - cache_bytes))


@dataclass(frozen=True)
class Engine:
    """Seconds of the engine's own work in one step at one world size (what the primitive terms leave out): fixed +
    per key a source routes + per byte of a source's model-parallel output + per byte the busiest owner returns (RB
    partial sums, UB vectors) + per model-parallel shard + per UB key a source deduplicates and per byte of the
    vectors its occurrences take (forward and back) + per DP table + per byte of DP replicas; and the scale of the
    lookup term inside the engine's steps (lookups calibrated alone run hotter or colder than between collectives,
    on the step's own id streams)."""

    fixed_s: float
    per_key_s: float
    per_byte_s: float
    per_owner_byte_s: float
    per_shard_s: float
    per_ub_key_s: float
    per_ub_byte_s: float
    per_dp_table_s: float
    per_dp_byte_s: float
    lookup_scale: float = 1.0  # the lookups as they run inside the engine's steps / as calibrated alone

    def at(self, *features: float) -> float:
        """``features``: Tally.engine_features()."""
        coef = (self.per_key_s, self.per_byte_s, self.per_owner_byte_s, self.per_shard_s, self.per_ub_key_s,
                self.per_ub_byte_s, self.per_dp_table_s, self.per_dp_byte_s)
        if len(features) != len(coef):
            raise ValueError(f"the engine term takes {len(coef)} features, got {len(features)}")
        return self.fixed_s + sum(c * x for c, x in zip(coef, features))


@dataclass(frozen=True)
class Profile:
    """One machine's calibration (its file: results/calibration/<machine>/<backend>.json)."""

    machine: str
    backend: str
    cores: int  # the cores the ranks share
    threads: int  # intra-op threads per rank the compute terms were measured with
    collectives: Mapping[str, Mapping[int, Line]]  # collective -> world size -> seconds vs bytes per rank
    lookup: Mapping[str, Mapping[str, Lookup]]  # storage -> "fwd" / "bwd"
    dedup: Line  # seconds vs keys (torch.unique, sorted, with the inverse)
    pool: Line  # seconds vs bytes added into an output (index_add_ of rows)
    # world size -> the engine's own work; None only while `dlrmbench calibrate` fits it (primitive terms alone)
    engine: Mapping[int, Engine] | None = None
    path: str = ""
    digest: str = ""  # sha256 of the file, first 12 hex digits: records name the profile they were planned with
    measured: Mapping[str, Any] = field(default_factory=dict)  # the raw medians the lines were fitted to

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: str = "", digest: str = "") -> "Profile":
        where = path or "calibration profile"
        if d.get("version") != PROFILE_VERSION:
            raise ValueError(f"{where}: profile version {d.get('version')!r}, this code reads {PROFILE_VERSION}: "
                             "run `dlrmbench calibrate` again")
        try:
            return cls(
                machine=str(d["machine"]), backend=str(d["backend"]), cores=int(d["cores"]), threads=int(d["threads"]),
                collectives={c: {int(w): Line(**v) for w, v in per.items()} for c, per in d["collectives"].items()},
                lookup={s: {k: Lookup(**v) for k, v in per.items()} for s, per in d["lookup"].items()},
                dedup=Line(**d["dedup"]), pool=Line(**d["pool"]),
                engine=None if d["engine"] is None else {int(w): Engine(**v) for w, v in d["engine"].items()},
                path=path, digest=digest,
                measured=d.get("measured", {}))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{where}: not a calibration profile ({type(exc).__name__}: {exc})") from None

    @classmethod
    def load(cls, path: str | Path) -> "Profile":
        p = Path(path)
        if not p.is_file():
            raise ValueError(f"no calibration profile at {p}: run `dlrmbench calibrate` on this machine (or choose "
                             "the published cost function: -o embark.cost=hugectr)")
        raw = p.read_bytes()
        try:
            d = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{p}: not JSON ({exc})") from None
        if not isinstance(d, dict):
            raise ValueError(f"{p}: not a calibration profile (a JSON {type(d).__name__})")
        out = cls.from_dict(d, str(p), profile_digest(raw))
        if out.engine is None:
            raise ValueError(f"{p}: no engine term (the primitive terms alone leave out the engine's own work): run "
                             "`dlrmbench calibrate` again")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"version": PROFILE_VERSION, "machine": self.machine, "backend": self.backend, "cores": self.cores,
                "threads": self.threads,
                "collectives": {c: {str(w): asdict(v) for w, v in sorted(per.items())}
                                for c, per in self.collectives.items()},
                "lookup": {s: {k: asdict(v) for k, v in per.items()} for s, per in self.lookup.items()},
                "dedup": asdict(self.dedup), "pool": asdict(self.pool),
                "engine": None if self.engine is None else {str(w): asdict(v) for w, v in sorted(self.engine.items())},
                "measured": dict(self.measured)}

    def collective_s(self, name: str, world: int, nbytes: float) -> float:
        lines = self.collectives.get(name, {})
        if world not in lines:
            raise ValueError(f"{self.path or 'the calibration profile'} measured {name} at world sizes "
                             f"{sorted(lines)}, not {world}: run `dlrmbench calibrate --world {world}`")
        return lines[world].at(nbytes)

    def engine_s(self, world: int, features: Sequence[float]) -> float:
        engine = self._engine(world)
        return 0.0 if engine is None else engine.at(*features)

    def lookup_scale(self, world: int) -> float:
        engine = self._engine(world)
        return 1.0 if engine is None else engine.lookup_scale

    def _engine(self, world: int) -> Engine | None:
        if self.engine is None:
            return None  # the primitive terms alone: what `dlrmbench calibrate` fits the engine term against
        if world not in self.engine:
            raise ValueError(f"{self.path or 'the calibration profile'} measured the engine at world sizes "
                             f"{sorted(self.engine)}, not {world}: run `dlrmbench calibrate --world {world}`")
        return self.engine[world]

    def model_error(self, world: int) -> float:
        """The worst relative error of the whole model over the calibration's measured steps at ``world`` (the
        profile's ``engine_fit``; 0 for a profile that carries none, e.g. one written by hand): the largest miss the
        model has shown on this machine, so a predicted gain below it is one the model cannot vouch for."""
        fit = (self.measured.get("engine_fit") or {}).get(str(world)) or {}
        return float(fit.get("max_rel_err", 0.0))

    def lookup_s(self, storage: str, direction: str, bags: float, keys: float, unique: float, row_bytes: float,
                 unique_bytes: float, out_bytes: float) -> float:
        if storage not in self.lookup:
            raise ValueError(f"{self.path or 'the calibration profile'} has lookups of {sorted(self.lookup)}, not "
                             f"{storage!r}: run `dlrmbench calibrate` where {storage} is installed")
        return self.lookup[storage][direction].at(bags, keys, unique, row_bytes, unique_bytes, out_bytes)

    def oversubscription(self, world: int) -> float:
        return oversubscription(world, self.threads, self.cores)


@dataclass(frozen=True)
class TableLoad:
    """What one table asks of a step: keys per sample, and the distinct share of its keys in one rank's local batch
    and in the global batch."""

    keys_per_sample: float
    unique_local: float
    unique_global: float


def table_loads(tables: Sequence[TableSpec], batch_size: int, world: int, stats: Any = None,
                alpha: float = 1.1) -> list[TableLoad]:
    """Per table, from a sampled global batch (``stats``: SparseFeatures; rank 0's first local batch for the local
    share) or, without one, from the table's hotness and the Zipf(alpha) expectation."""
    import torch

    b = max(1, batch_size // max(world, 1))
    out = []
    for t, spec in enumerate(tables):
        if stats is not None and getattr(stats, "values", None) is not None:
            values, offsets = stats.table(t)
            n = values.numel()
            h = n / max(stats.batch_size, 1)
            local = values[: int(offsets[min(b, stats.batch_size)])]
            ul = torch.unique(local).numel() / local.numel() if local.numel() else 1.0
            ug = torch.unique(values).numel() / n if n else 1.0
        else:
            h = spec.hotness
            nl, ng = b * h, batch_size * h
            ul = expected_unique(spec.num_embeddings, nl, alpha) / nl if nl > 0 else 1.0
            ug = expected_unique(spec.num_embeddings, ng, alpha) / ng if ng > 0 else 1.0
        out.append(TableLoad(h, min(1.0, ul), min(1.0, ug)))
    return out


@dataclass
class Breakdown:
    """A plan's predicted step, seconds per term (see the module docstring) and the compute of every rank."""

    lookup_s: float = 0.0
    dedup_s: float = 0.0
    pool_s: float = 0.0
    comm_latency_s: float = 0.0
    comm_bytes_s: float = 0.0
    dp_allreduce_s: float = 0.0
    engine_s: float = 0.0
    rank_compute_s: list[float] = field(default_factory=list)

    @property
    def total_s(self) -> float:
        return (self.lookup_s + self.dedup_s + self.pool_s + self.comm_latency_s + self.comm_bytes_s
                + self.dp_allreduce_s + self.engine_s)

    def to_dict(self) -> dict[str, float]:
        d = {k: v * 1e3 for k, v in asdict(self).items() if k != "rank_compute_s"}
        return {**{k.replace("_s", "_ms"): v for k, v in d.items()}, "total_ms": self.total_s * 1e3}


class Tally:
    """A plan's load on every rank, kept table by table: ``place`` / ``replicate`` add (sign +1) or take back (-1) one
    table's placement in the time of its shards, so a search can try a move without re-scoring the whole plan.
    ``shard_bytes(table, r, c)``: a shard's memory (parameters and optimizer state), for ``mem``."""

    def __init__(self, world: int, tables: Sequence[TableSpec], loads: Sequence[TableLoad], profile: Profile,
                 batch_size: int, storage: str, elem_bytes: int = 4,
                 shard_bytes: Callable[[TableSpec, int, int], float] | None = None) -> None:
        self.G, self.tables, self.loads, self.profile = world, tables, loads, profile
        self.B, self.storage, self.elem_bytes = batch_size, storage, elem_bytes
        self.shard_bytes = shard_bytes or (lambda t, r, c: t.num_embeddings / r * t.dim / c * 4)
        G = world
        # per owner g: RB bags / keys / distinct rows / row bytes / distinct row bytes / pooled output bytes; UB keys
        # in, unique keys looked up, their row bytes (one bag each: the output is the rows); memory
        self.rb_bags, self.rb_keys, self.rb_uniq, self.rb_bytes = [0.0] * G, [0.0] * G, [0.0] * G, [0.0] * G
        self.rb_uniq_bytes, self.rb_out = [0.0] * G, [0.0] * G
        self.ub_in, self.ub_uniq, self.ub_rows, self.mem = [0.0] * G, [0.0] * G, [0.0] * G, [0.0] * G
        self.key_payload = [0.0] * G  # bytes one source sends owner g in the keys all_to_all
        self.row_payload = [0.0] * G  # bytes owner g returns one source in the forward all_to_all (the same back)
        self.ub_src_keys = 0.0  # keys one source deduplicates per step (its UB keys)
        self.ub_src_bytes = 0.0  # bytes of the vectors those keys' occurrences take
        self.pool_bytes = 0.0  # bytes one source adds into its output (and takes back out in backward)
        self.src_keys = 0.0  # keys one source routes to owners per step (a column-split table's key once per group)
        self.src_out = 0.0  # bytes of one source's model-parallel output
        self.n_shards = 0  # model-parallel shards, over every rank
        self.dp_bytes = self.dp_keys = self.dp_uniq = self.dp_read = self.dp_uniq_read = self.dp_out = 0.0
        self.n_dp = self.n_mp = 0

    @classmethod
    def of(cls, plan: Plan, *args: Any, **kw: Any) -> "Tally":
        if plan.hierarchical:
            raise ValueError("the calibrated cost model has no inter-node terms for hierarchical plans: use "
                             "cost=hugectr for multi-node plans")
        tally = cls(plan.world_size, *args, **kw)
        for p in plan.mp:
            tally.place(p)
        for t in plan.dp:
            tally.replicate(t)
        return tally

    def place(self, p: TablePlacement, sign: int = 1) -> None:
        spec, ld, B = self.tables[p.table], self.loads[p.table], self.B
        b = B / self.G
        d = spec.dim / p.c
        h = ld.keys_per_sample
        r = p.r
        size = sign * self.shard_bytes(spec, r, p.c)
        self.n_mp += sign
        self.n_shards += sign * len(p.gpus)
        self.src_keys += sign * b * h * p.c
        self.src_out += sign * b * spec.dim * 4
        for g in p.gpus:
            self.mem[g] += size
            if p.cluster is Cluster.RB:
                keys = B * h / r
                self.rb_bags[g] += sign * B
                self.rb_keys[g] += sign * keys
                self.rb_uniq[g] += sign * keys * ld.unique_global
                self.rb_bytes[g] += sign * keys * d * 4
                self.rb_uniq_bytes[g] += sign * keys * ld.unique_global * d * 4
                self.rb_out[g] += sign * B * d * 4
                self.key_payload[g] += sign * KEY_BYTES * (b + b * h / r)  # counts, then keys
                self.row_payload[g] += sign * b * d * self.elem_bytes
                self.pool_bytes += sign * b * d * 4  # each row shard's partial sum, added at the source
            else:  # UB: each source's unique keys of this shard, a vector back for each
                sent = b * h * ld.unique_local / r
                uniq = B * h * ld.unique_global / r
                self.ub_in[g] += sign * self.G * sent
                self.ub_uniq[g] += sign * uniq
                self.ub_rows[g] += sign * uniq * d * 4
                self.key_payload[g] += sign * KEY_BYTES * (1 + sent)
                self.row_payload[g] += sign * sent * d * self.elem_bytes
                self.ub_src_keys += sign * b * h / r
                self.ub_src_bytes += sign * b * h * d * 4 / r
                self.pool_bytes += sign * b * h * d * 4 / r

    def replicate(self, t: int, sign: int = 1) -> None:
        spec, ld = self.tables[t], self.loads[t]
        b = self.B / self.G
        self.n_dp += sign
        self.dp_bytes += sign * spec.num_embeddings * spec.dim * 4
        self.dp_keys += sign * b * ld.keys_per_sample
        self.dp_uniq += sign * b * ld.keys_per_sample * ld.unique_local
        self.dp_read += sign * b * ld.keys_per_sample * spec.dim * 4
        self.dp_uniq_read += sign * b * ld.keys_per_sample * ld.unique_local * spec.dim * 4
        self.dp_out += sign * b * spec.dim * 4
        size = sign * self.shard_bytes(spec, 1, 1)
        for g in range(self.G):
            self.mem[g] += size

    def engine_features(self) -> tuple[float, ...]:
        """What the engine term scales with (Engine.at's arguments): keys a source routes, bytes of its model-parallel
        output, bytes the busiest owner returns to all sources, shards, UB keys a source deduplicates and the bytes
        of their occurrences' vectors, DP tables, DP replica bytes."""
        return (self.src_keys, self.src_out, self.G * max(self.row_payload), float(self.n_shards), self.ub_src_keys,
                self.ub_src_bytes, float(self.n_dp), self.dp_bytes)

    def breakdown(self) -> Breakdown:
        """The predicted step of what the tally holds (see the module docstring)."""
        G, pr, b = self.G, self.profile, self.B / self.G
        over, scale = pr.oversubscription(G), pr.lookup_scale(G)
        out = Breakdown()
        compute = []
        for g in range(G):
            c = sum(pr.lookup_s(self.storage, k, self.rb_bags[g], self.rb_keys[g], self.rb_uniq[g], self.rb_bytes[g],
                                self.rb_uniq_bytes[g], self.rb_out[g]) for k in DIRECTIONS)
            u, ur = self.ub_uniq[g], self.ub_rows[g]
            c += sum(pr.lookup_s(self.storage, k, u, u, u, ur, ur, ur) for k in DIRECTIONS)
            compute.append((scale * c, pr.dedup.at(self.ub_in[g]) if self.ub_in[g] > 1e-9 else 0.0))
        busiest = max(range(G), key=lambda g: sum(compute[g]))
        out.rank_compute_s = [over * sum(c) for c in compute]
        out.lookup_s = over * compute[busiest][0]
        src = pr.dedup.at(self.ub_src_keys) if self.ub_src_keys > 1e-9 else 0.0
        out.dedup_s = over * (compute[busiest][1] + src)
        out.pool_s = over * 2 * pr.pool.at(self.pool_bytes) if self.pool_bytes > 1e-9 else 0.0
        if self.n_mp:
            def busiest_bytes(payload):  # per rank: max(sent to others, received from others); sources alike
                total = sum(payload)
                return max(max(total - payload[g], (G - 1) * payload[g]) for g in range(G))

            sizes = (16.0 * (G - 1), busiest_bytes(self.key_payload), *[busiest_bytes(self.row_payload)] * 2)
            lat = pr.collective_s("all_to_all", G, 0.0)
            out.comm_latency_s = A2A_PER_STEP * lat
            out.comm_bytes_s = sum(pr.collective_s("all_to_all", G, x) - lat for x in sizes)
        if self.n_dp:
            out.dp_allreduce_s = pr.collective_s("all_reduce", G, self.dp_bytes)
            out.lookup_s += over * scale * sum(pr.lookup_s("dense", k, b * self.n_dp, self.dp_keys, self.dp_uniq,
                                                           self.dp_read, self.dp_uniq_read, self.dp_out)
                                               for k in DIRECTIONS)
            out.pool_s += over * 2 * pr.pool.at(self.dp_bytes)  # the replicas' gradient made dense, then applied
        out.engine_s = pr.engine_s(G, self.engine_features())
        if not math.isfinite(out.total_s):
            raise ValueError("the calibrated prediction is not finite: check the profile's numbers")
        return out


def predict(plan: Plan, tables: Sequence[TableSpec], loads: Sequence[TableLoad], profile: Profile, batch_size: int,
            storage: str, elem_bytes: int = 4) -> Breakdown:
    """The calibrated step time of ``plan`` (global batch ``batch_size``, RB / UB shards in ``storage``)."""
    return Tally.of(plan, tables, loads, profile, batch_size, storage, elem_bytes).breakdown()
