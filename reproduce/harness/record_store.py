"""The record store: the one place run records are written and read - their paths (``<point id>.r<repeat>.json``
and its log), atomic writes (never over a symbolic link, nothing left behind on a full device), reading, a record's
identity check, a rerun's pending files and the per-run lock. Every writer (the worker, the launcher, sweeps, the
Slurm steps) goes through it."""
from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from impls.data.lockfile import Locked, acquire, release
# the store's errors, defined where impls/ raises them too (a lock, a staging folder)
from impls.data.safe_write import DiskFull, SymlinkRefused, disk_full, refuse_symlink  # noqa: F401
from reproduce.harness.code import is_commit
from reproduce.harness.records import Record, point_id


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
    """The record at ``path``; a file that is not a record (truncated, garbage, an older schema) raises ValueError
    naming it."""
    path = Path(path)
    try:
        d = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a readable record ({exc}); delete it, or rerun its point") from None
    if not isinstance(d, dict):
        raise ValueError(f"{path}: not a record (a JSON {type(d).__name__}, not an object)")
    try:
        rec = Record.from_dict(d)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path}: not a record ({exc})") from None
    sha = rec.env.get("git_sha")
    if sha is not None and not is_commit(sha):  # it reaches `git show` (freshness): never as an option
        raise ValueError(f"{path}: not a record (its env.git_sha {sha!r} is not a commit id, 7 to 64 hex digits)")
    return rec


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
    say; RecordContradicts naming the file otherwise (a point edited by hand, or a record written under another id:
    read as it is, it would be counted as another point's run)."""
    stem, repeat = ids_from_name(path)
    try:
        derived = point_id(rec.point)
    except (ValueError, TypeError, KeyError) as exc:
        raise RecordContradicts(f"{path}: its point is not a valid run point ({exc}); delete it, or rerun its "
                                f"point") from None
    if derived == stem == rec.point_id and rec.repeat == repeat:
        return rec
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

