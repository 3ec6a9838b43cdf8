"""A run record's type: ``Record`` (the header every record has and its typed ``Body``), its ``Status``, and the id
of its point. Built by the factories of Record only; stored by record_store.py, its environment captured by
environment.py.

A record keeps the commit it ran at, whether the code (not results or docs) had uncommitted edits, and the
fingerprint of the code its point measures (reproduce/harness/fingerprint.py), so a report can tell when the code it
describes has moved on since."""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

SCHEMA_VERSION = 3  # 2: point_id in every record, code fingerprint, oversubscription; 3: ids hash the whole point


class Status(str, Enum):
    """How a run ended: ok, failed (an error, a crash, a time limit), oom, diverged (a bad loss; what was measured
    before it is kept) or skipped (an implementation that is not registered here)."""

    OK = "ok"
    FAILED = "failed"
    OOM = "oom"
    DIVERGED = "diverged"
    SKIPPED = "skipped"


STATUSES = tuple(s.value for s in Status)
_HEADER = ("schema", "point", "point_id", "repeat", "status", "reason", "log", "wall_s")


def point_id(point: dict[str, Any]) -> str:
    """The one id of a run point (a record's ``point``, its missing fields at their defaults): point.point_id."""
    from reproduce.harness.point import point_id as of

    return of(point)


@dataclass
class Body:
    """What a run measured, field by field as its record's JSON holds them (a run that measured nothing has none).
    timing_ms: per phase (fwd, bwd, comm, update, total, cpu) the median, p25, p75, iqr and min over the timed steps;
    iterations_ms: every timed step's phase times; memory: the peak RSS delta (CUDA peak on a GPU) beside the
    collection's analytic memory_report; work: its work_report (nnz, unique, GEMMs, FLOPs, ...); dist: over ranks,
    the combined per-rank traffic and blocked time, placement and plan; eval / eval_curve: AUC and log loss at the end
    and along the steps; loop: the warm-up and timed-step rule; env: versions, machine, git; code: the fingerprint of
    what ran (fingerprint.py); occupancy: ranks x threads against the cores."""

    timing_ms: dict[str, dict[str, float]] | None = None
    iterations_ms: dict[str, list[float]] | None = None
    samples_per_s: float | None = None
    loss: list[float] | None = None
    memory: dict[str, Any] | None = None
    param_bytes: int | None = None
    work: dict[str, Any] | None = None
    setup_s: dict[str, float] | None = None  # the run's wall time: startup, data, prepare, build, warmup, timed, loop_other, finish
    tables: dict[str, Any] | None = None
    env: dict[str, Any] | None = None
    code: dict[str, Any] | None = None
    occupancy: dict[str, Any] | None = None
    loop: dict[str, Any] | None = None
    syncs: dict[str, Any] | None = None
    train: dict[str, Any] | None = None
    dist: dict[str, Any] | None = None
    eval: dict[str, float] | None = None
    eval_curve: list[dict[str, float]] | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Body":
        """The body of a record's JSON; a field of the wrong type (``timing_ms`` a string, ``samples_per_s`` "fast")
        is refused naming the field (a reader never meets it later as an AttributeError)."""
        from reproduce.harness.point import from_known_fields

        body = from_known_fields(cls, d, "record body fields that are not part of a record")
        hints = _body_types()
        for f in fields(cls):
            value = getattr(body, f.name)
            if value is not None:
                _check_type(value, hints[f.name], f.name)
        return body

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass
class Record:
    """One run of one point: the header every record has, and what the run measured (``body``, a Body). Built by
    its factories only (``measured``, ``failed``, ``skipped``, ``from_dict``); read through its fields and accessors
    (``rec.status``, ``rec.body.memory``, ``rec.total_ms``)."""

    point: dict[str, Any]
    status: Status
    reason: str | None = None
    point_id: str = ""
    repeat: int = 0
    log: str | None = None
    wall_s: float | None = None
    body: Body = field(default_factory=Body)
    schema: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        try:
            self.status = Status(self.status)
        except ValueError:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}") from None
        if isinstance(self.body, dict):
            self.body = Body.from_dict(self.body)
        if not self.point_id:
            self.point_id = point_id(self.point)

    # ---- the factories

    @classmethod
    def measured(cls, point: dict[str, Any], point_id_: str, body: Body, diverged: str | None = None) -> "Record":
        """A run that measured: `ok`, or `diverged` with why (what was measured before the loss went bad kept)."""
        return cls(point, Status.DIVERGED if diverged else Status.OK, diverged or None, point_id=point_id_, body=body)

    @classmethod
    def failed(cls, point: dict[str, Any], reason: str, status: Status | str = Status.FAILED, point_id_: str = "",
               repeat: int = 0) -> "Record":
        """A run that measured nothing: `failed` (an error, a crash, a time limit) or `oom`, with its reason."""
        if Status(status) not in (Status.FAILED, Status.OOM):
            raise ValueError(f"a failed record's status is failed or oom, got {status!r}")
        return cls(point, Status(status), reason, point_id=point_id_, repeat=repeat)

    @classmethod
    def skipped(cls, point: dict[str, Any], reason: str, point_id_: str = "", repeat: int = 0) -> "Record":
        """A run not launched: its implementation is not registered here."""
        return cls(point, Status.SKIPPED, reason, point_id=point_id_, repeat=repeat)

    # ---- the accessors

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def phase_ms(self, phase: str = "total") -> float | None:
        """The median time of a phase over the timed steps (None: no timed step)."""
        timing = self.body.timing_ms or {}
        return timing[phase]["median"] if phase in timing else None

    @property
    def total_ms(self) -> float | None:
        return self.phase_ms("total")

    @property
    def env(self) -> dict[str, Any]:
        return self.body.env or {}

    def to_dict(self) -> dict[str, Any]:
        head = {k: getattr(self, k) for k in _HEADER}
        head["status"] = self.status.value
        return {**self.body.to_dict(), **head}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Record":
        """A record read back: one of this schema (an older one's point id follows other rules: rerun its point)."""
        if "point" not in d or "status" not in d:
            raise ValueError("not a run record (no point or status)")
        schema = d.get("schema")
        if schema != SCHEMA_VERSION:
            raise ValueError(f"a record of schema {schema} (this code reads schema {SCHEMA_VERSION}: ids hash the "
                             f"whole point since schema 3); rerun its point, which replaces it")
        missing = [k for k in ("point_id", "repeat") if d.get(k) is None]
        if missing:
            raise ValueError(f"no {' or '.join(missing)} in the record")
        body = Body.from_dict({k: v for k, v in d.items() if k not in _HEADER})
        return cls(point=d["point"], status=d["status"], reason=d.get("reason"), point_id=d["point_id"],
                   repeat=int(d["repeat"]), log=d.get("log"), wall_s=d.get("wall_s"), body=body, schema=schema)


@functools.lru_cache(maxsize=1)
def _body_types() -> dict[str, Any]:
    import typing

    return typing.get_type_hints(Body)


def _check_type(value: Any, hint: Any, where: str) -> None:
    """ValueError naming ``where`` when ``value`` is not of the JSON shape ``hint`` (a Body annotation: dict[str, X],
    list[X], float, int, X | None, Any) says."""
    import types
    import typing

    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return
        hint = next(a for a in args if a is not type(None))
        origin, args = typing.get_origin(hint), typing.get_args(hint)
    want = {dict: "an object", list: "a list"}.get(origin, getattr(hint, "__name__", str(hint)))
    if hint is float or hint is int:  # a number (JSON does not tell 4096 from 4096.0); null: a NaN written strict
        ok, want = value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)), "a number"
    elif origin is dict:
        ok = isinstance(value, dict)
        if ok and args:
            for k, v in value.items():
                _check_type(v, args[1], f"{where}.{k}")
    elif origin is list:
        ok = isinstance(value, list)
        if ok and args:
            for i, v in enumerate(value):
                _check_type(v, args[0], f"{where}[{i}]")
    else:
        ok = isinstance(value, hint)
    if not ok:
        raise ValueError(f"field {where} is {json.dumps(value, default=str)[:60]}, not {want}")

