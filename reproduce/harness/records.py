"""The record store: the one module that owns run records - their type (``Record``, a ``Status``), paths
(``<point id>.r<repeat>.json`` and its log), atomic writes, reading, the per-run lock, and adopting records written
under an older point id. Every writer (the worker, the launcher, sweeps, the Slurm steps) goes through it.

A record keeps the commit it ran at, whether the code (not results or docs) had uncommitted edits, and the
fingerprint of the code its point measures (reproduce/harness/code.py), so a report can tell when the code it
describes has moved on since."""
from __future__ import annotations

import functools
import json
import math
import os
import platform
import subprocess
import tempfile
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any, Iterator

from impls.data.lockfile import Locked, acquire, release
# the store's errors, defined where impls/ raises them too (a lock, a staging folder)
from impls.data.safe_write import DiskFull, SymlinkRefused, disk_full, refuse_symlink  # noqa: F401

SCHEMA_VERSION = 2  # 2: point_id in every record, code fingerprint, oversubscription


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
    """The one id of a run point (a record's ``point``, its missing fields at their defaults): point_id.py's."""
    from reproduce.harness.point import RunPoint
    from reproduce.harness.point_id import point_id as of

    return of(RunPoint.from_dict(point).to_dict())


def former_point_ids(point: dict[str, Any]) -> set[str]:
    """The ids a run point had under earlier id rules (point_id.former_ids)."""
    from reproduce.harness.point import RunPoint
    from reproduce.harness.point_id import former_ids

    return former_ids(RunPoint.from_dict(point).to_dict())


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
    setup_s: dict[str, float] | None = None
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
    its factories only (``measured``, ``failed``, ``skipped``, ``from_dict``); read through them and the accessors
    (``rec.body.memory``, ``rec.total_ms``). ``rec["status"]`` and ``rec.get("timing_ms")`` read the same fields
    by name (the JSON's)."""

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
    def from_dict(cls, d: dict[str, Any], point_id_: str | None = None, repeat: int | None = None) -> "Record":
        """A record read back (``point_id_`` / ``repeat``: from its file name when the record predates them)."""
        if "point" not in d or "status" not in d:
            raise ValueError("not a run record (no point or status)")
        body = Body.from_dict({k: v for k, v in d.items() if k not in _HEADER})
        return cls(point=d["point"], status=d["status"], reason=d.get("reason"),
                   point_id=d.get("point_id") or point_id_ or "",
                   repeat=int(d["repeat"]) if d.get("repeat") is not None else int(repeat or 0), log=d.get("log"),
                   wall_s=d.get("wall_s"), body=body, schema=int(d.get("schema", 1)))

    def __getitem__(self, key: str) -> Any:
        if key == "status":
            return self.status.value
        if key in _HEADER:
            return getattr(self, key)
        value = getattr(self.body, key, None) if key in _BODY else None
        if value is None:
            raise KeyError(key)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def __contains__(self, key: str) -> bool:
        return key in _HEADER or (key in _BODY and getattr(self.body, key) is not None)


_BODY = frozenset(f.name for f in fields(Body))


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


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(
            ["git", *args], capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parent
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


# what a record's ``git_dirty`` does not count: results, figures and prose are not code
NOT_CODE = (":(exclude)results", ":(exclude)figures", ":(exclude)*.md", ":(exclude)datasets/*.md")


def code_dirty() -> bool | None:
    """Whether tracked code differs from the commit (edits to results/, figures/ or Markdown do not count); None
    outside a git checkout."""
    out = _git("status", "--porcelain", "--untracked-files=no", "--", ".", *NOT_CODE)
    return None if out is None else bool(out)


def git_sha() -> str | None:
    """The commit checked out here (None outside a git checkout)."""
    return _git("rev-parse", "HEAD")


def _installed(dist: str) -> str | None:
    """The installed version of a distribution, read without importing it (None when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


SCHEDULE_ENV = "DLRMBENCH_SCHEDULE"  # set by the launcher for a co-scheduled (duet) run: "duet"


def environment() -> dict[str, Any]:
    """Versions and hardware of this process (torch is imported here, never at CLI start-up): the machine's
    fingerprint and slug, git state, thread count."""
    import torch

    from reproduce.harness import allocator
    from reproduce.harness.machine import fingerprint, slug_of

    fp = fingerprint()
    return {
        "git_sha": git_sha(),
        "git_dirty": code_dirty(),
        "python": fp["python"],
        "torch": fp["torch"],
        "fbgemm_gpu": fp["fbgemm_gpu"],
        "torchrec": _installed("torchrec"),
        "cuda": fp["cuda"],
        "cuda_device": fp["gpu"],
        "cpu": fp["cpu"],
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        # the cores this process may run on, and whether a sweep ran it beside another run (duet: evidence.py)
        "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "schedule": os.environ.get(SCHEDULE_ENV, "solo"),
        "malloc": {k: v for k, v in sorted(os.environ.items()) if k.startswith(("MALLOC_", "THP_"))},
        "allocator": allocator.state(),
        "hostname": platform.node(),
        "platform": platform.platform(),
        "machine": fp,
        "machine_slug": slug_of(fp),
    }


def strict(value: Any) -> Any:
    """``value`` with every NaN / inf float replaced by None, so that records are strict JSON (null, not NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


def record_path(out_dir: str | Path, point: Any, repeat: int = 0) -> Path:
    """The record of one repeat of a point (a RunPoint): ``<out_dir>/<point_id>.r<repeat>.json``."""
    return Path(out_dir) / f"{point.point_id}.r{repeat}.json"


def log_path(record: Path) -> Path:
    """The log of the run whose record is ``record``: ``logs/<record stem>.log`` beside it (a pending record's:
    ``logs/<record stem>.log.new``)."""
    name = record.name.removesuffix(PENDING)
    return record.parent / "logs" / (f"{Path(name).stem}.log" + (PENDING if name != record.name else ""))


PENDING = ".new"  # a run's record and log while it runs: beside the finished ones, which they replace when complete


def pending_path(path: Path) -> Path:
    """Where a run writes its record (or log) until it is complete: ``<name>.new`` beside ``path`` (not *.json: a
    folder's records are its *.json files), so a rerun killed part-way leaves the finished record as it was."""
    return path.with_name(path.name + PENDING)


def promote_log(record: Path) -> None:
    """Put the pending log of the run of ``record`` in its log's place in one rename (never over a symbolic link);
    nothing when it wrote none."""
    pending, final = pending_path(log_path(record)), log_path(record)
    if pending.exists():
        refuse_symlink(final, "the run's log")
        os.replace(pending, final)


AFTER_FULL = "run again (a sweep resumes where it stopped)"
_FULL_WORDS = ("No space left on device", "[Errno 28]", "Disk quota exceeded", "[Errno 122]", "no space left on the "
               "device")


def says_disk_full(text: str) -> bool:
    """Whether a failure's reason (or a log's tail) says that the device was full: such a failure is not the point's,
    and a sweep redoes it once there is space."""
    return any(w in text for w in _FULL_WORDS)


def write_json(path: str | Path, obj: dict[str, Any]) -> Path:
    """Write strict JSON atomically (temporary file in the same directory, fsync, rename), never over a symbolic link
    (SymlinkRefused); on a full device nothing is left behind and DiskFull says where."""
    path = refuse_symlink(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise disk_full(exc, path, AFTER_FULL) from None
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(strict(obj), f, indent=2, sort_keys=True, default=str, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise disk_full(exc, path, AFTER_FULL) from None
        raise
    return path


def check_overwritable(path: str | Path) -> None:
    """Refuse (ValueError) when ``path`` holds something that is not a run record: a record is only ever written over
    a record (of the same point), never over a file of the user's."""
    path = refuse_symlink(path, "the record")
    if path.is_dir() or (path.exists() and not _is_record_file(path)):
        raise ValueError(f"{path} exists and is not a dlrmbench run record: refusing to overwrite it; move it away")


def _is_record_file(path: Path) -> bool:
    try:
        d = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return path.stat().st_size == 0 or _is_truncated_json(path)
    return isinstance(d, dict) and "point" in d and "status" in d


def _is_truncated_json(path: Path) -> bool:
    """A record cut short (a crash mid-write before records were atomic): JSON text that starts as a record does."""
    try:
        head = path.read_text()[:200]
    except (OSError, UnicodeDecodeError):
        return False
    return head.lstrip().startswith("{") and ('"point"' in head or '"status"' in head or '"code"' in head)


def write_record(path: str | Path, record: Record) -> Path:
    """Write a run record atomically (over an older record of the same run only: ``check_overwritable``)."""
    if not isinstance(record, Record):
        raise TypeError(f"write_record takes a Record, got {type(record).__name__}")
    check_overwritable(path)
    return write_json(path, record.to_dict())


def ids_from_name(path: Path) -> tuple[str, int]:
    """(point id, repeat) of a record's file name (``<id>.r<k>.json``; ``<id>.json``: repeat 0; pending:
    ``<id>.r<k>.json.new``)."""
    plain = Path(path.name.removesuffix(PENDING)).stem
    stem, dot, rep = plain.rpartition(".r")
    return (stem, int(rep)) if dot and rep.isdigit() else (plain, 0)


def read_record(path: str | Path) -> Record:
    """The record at ``path``; a file that is not a record (truncated, garbage) raises ValueError naming it. A record
    from before point ids in records gets its id and repeat from its file name."""
    path = Path(path)
    try:
        d = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a readable record ({exc}); delete it, or rerun its point") from None
    if not isinstance(d, dict):
        raise ValueError(f"{path}: not a record (a JSON {type(d).__name__}, not an object)")
    try:
        return Record.from_dict(d, *ids_from_name(path))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path}: not a record ({exc})") from None


@dataclass(frozen=True)
class Earlier:
    """A finished record that a rerun may replace: a few words on it ("ok record measured at 5f986e5") and the file
    it is (inode and time), to tell afterwards whether it was replaced."""

    what: str
    path: Path
    stamp: tuple[int, int]

    @property
    def replaced(self) -> bool:
        return _stamp(self.path) != self.stamp


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def finished_record(path: Path) -> Earlier | None:
    """The record at ``path`` that a rerun would replace, or None when there is none (or it cannot be read, or is a
    link: never replaced)."""
    if path.is_symlink() or not path.is_file():
        return None
    try:
        rec = read_record(path)
    except ValueError:
        return None
    sha = (rec.env.get("git_sha") or "")[:7]
    return Earlier(f"{rec.status.value} record" + (f" measured at {sha}" if sha else ""), path, _stamp(path))


def check_writable(record: Path) -> None:
    """SymlinkRefused naming the first of a run's files (its record, its log, their pending names) that is a symbolic
    link: checked before anything is launched (launch_point checks again under the run's lock)."""
    log = log_path(record)
    for path, what in ((record, "the record"), (log, "the run's log"), (pending_path(record), "the pending record"),
                       (pending_path(log), "the pending log")):
        refuse_symlink(path, what)


def records_in(out_dir: str | Path, only: set[str] | None = None) -> Iterator[Record]:
    """The records of a result set (only the file names in ``only``, when given); an unreadable one, or one whose
    point contradicts its name (``check_identity``), raises naming it. A symbolic link is no record of ours (none is
    ever written through one): it is left out."""
    for p in sorted(Path(out_dir).glob("*.json")):
        if (only is None or p.name in only) and not p.is_symlink():
            yield check_identity(p, read_record(p))


class RecordContradicts(ValueError):
    """A record whose point, re-derived into its id, is not the point its file name (or its stored id) says."""


def check_identity(path: Path, rec: Record) -> Record:
    """``rec`` (read from ``path``) when its point gives the id and repeat its file name and its stored point_id
    say; RecordContradicts naming the file otherwise (a point edited by hand, or a record written under another id
    that no sweep has adopted: read as it is, it would be counted as another point's run)."""
    stem, repeat = ids_from_name(path)
    try:
        derived = point_id(rec.point)
    except (ValueError, TypeError, KeyError) as exc:
        raise RecordContradicts(f"{path}: its point is not a valid run point ({exc}); delete it, or rerun its "
                                f"point") from None
    if derived == stem == rec.point_id and rec.repeat == repeat:
        return rec
    if stem == rec.point_id and rec.repeat == repeat and stem in former_point_ids(rec.point):
        raise RecordContradicts(f"{path}: written under the id its point had before every stated option was part of "
                                f"ids; its id is {derived} now: a sweep of its experiment renames it, or rename it to "
                                f"{derived}.r{repeat}.json")
    said = f"its file name says point {stem} repeat {repeat}"
    if rec.point_id != stem or rec.repeat != repeat:
        said += f", the record itself point {rec.point_id} repeat {rec.repeat}"
    raise RecordContradicts(f"{path}: {said}, but its point ({rec.point.get('impl')}, batch "
                            f"{rec.point.get('batch_size')}, ...) is point {derived}: its point was edited, or it was "
                            f"written under another id; move it away, or rerun its point")


# ---- the per-run lock: a run is launched by at most one live process at a time


class RunLocked(Locked):
    """Another live process is running this point's repeat."""


def lock_run(record: Path) -> Path:
    """Take ``<record>.lock`` for this process (impls/data/lockfile.py): held by another live process it raises
    RunLocked naming it; a stale one is taken over; one this process holds already is taken again (re-entrant)."""
    return acquire(record.with_name(record.name + ".lock"), f"{record.name} is being run", RunLocked)


def release_lock(lock: Path) -> None:
    """Give back one take of ``lock`` (removed with the last, and never when another process holds it now)."""
    release(lock)


def pending_files(record: Path) -> list[Path]:
    """What a run of ``record`` leaves beside it until it is complete: its pending record and log, its ranks' notes,
    its progress notes (the finished record and log are not among them)."""
    from reproduce.harness.progress import progress_path
    from reproduce.harness.rank import rank_files

    pending = pending_path(record)
    notes = [progress_path(p) for p in (pending, record)]
    return [pending, pending_path(log_path(record)), *notes, *(n.with_name(n.name + ".tmp") for n in notes),
            *(f for p in (pending, record) for kind in ("error", "step") for f in rank_files(p, kind).values())]


def clear_stale_locks(out_dir: str | Path) -> list[Path]:
    """Remove the run locks in ``out_dir`` whose holders are gone (a sweep or run killed outright), with what those
    runs left pending (their finished records stay); the locks removed."""
    from impls.data.lockfile import clear_stale

    gone = clear_stale(Path(out_dir), "*.json.lock")
    for lock in gone:
        for f in pending_files(lock.with_name(lock.name.removesuffix(".lock"))):
            if f.is_file() or f.is_symlink():
                f.unlink(missing_ok=True)
    return gone


# ---- records written under an older point id


def older_records(out_dir: str | Path, wanted: set[str] | None) -> dict[Path, Path]:
    """Records in ``out_dir`` written under an older point id (before a RunPoint field existed, so their id hashed
    fewer fields; before every stated option was part of ids) or before repeats (``<id>.json``, repeat 0), by the
    path their point and repeat have now, when that is one of ``wanted`` ids (None: any record named by one of its
    point's former ids) and has no record yet. Reads only."""
    found: dict[Path, Path] = {}
    for f in sorted(Path(out_dir).glob("*.json")):
        stem, _ = ids_from_name(f)
        if f.stem != stem and wanted is not None and stem in wanted:
            continue  # already under its id
        try:
            rec = read_record(f)
            pid = point_id(rec.point)
            mine = pid in wanted if wanted is not None else stem != pid and stem in former_point_ids(rec.point)
        except (ValueError, KeyError, TypeError):
            continue  # not a record of a point this code can read: left alone
        target = f.with_name(f"{pid}.r{rec.repeat}.json")
        if mine and not target.exists() and target not in found:
            found[target] = f
    return found


def adopt_older_records(out_dir: str | Path, wanted: set[str] | None) -> int:
    """Move each of ``older_records`` to the name its point and repeat have now (id and repeat set in the record);
    returns how many."""
    moved = 0
    for target, f in older_records(out_dir, wanted).items():
        rec = read_record(f)
        rec.point_id = target.name.rsplit(".r", 1)[0]
        write_record(target, rec)
        f.unlink()
        moved += 1
    return moved
