"""An exclusive lock file: created with O_EXCL, holding ``pid host start`` of its holder (``start``: when that process
started, from /proc, so that another process given the same pid later is not taken for the holder), so one process
at a time writes what it guards (a dataset folder, a run's record). A lock held by a live process is refused with
its holder named; a stale one (its process gone, on this host) is taken over, and ``clear_stale`` removes those a
killed process left; a lock of another host is never taken over (this host cannot see that process). Re-entrant: a
process that holds a lock may take it again (a sweep holds a run's lock around the launch that takes it too), and it
is removed when the last of its holder's takes releases it."""
from __future__ import annotations

import os
import socket
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from impls.data.safe_write import disk_full, write_text

_HELD: dict[Path, int] = {}  # locks this process holds -> how many takes are not released yet


class Locked(RuntimeError):
    """Another live process holds the lock."""


def holder(lock: Path) -> tuple[int, str] | None:
    """(pid, host) written in ``lock``; None when there is no lock or it cannot be read."""
    said = _said(lock)
    return None if said is None else said[:2]


def _said(lock: Path) -> tuple[int, str, str | None] | None:
    """(pid, host, start or None) written in ``lock``."""
    try:
        pid, host, start = (Path(lock).read_text().strip().split(" ") + ["", ""])[:3]
        return int(pid), host or socket.gethostname(), start or None  # a lock of pid only: written on this host
    except (OSError, ValueError):
        return None


def started(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks after boot, /proc/PID/stat field 22); None where unreadable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2:].split()[19]
    except (OSError, ValueError, IndexError):
        return None


def _holds(said: tuple[int, str, str | None]) -> bool:
    """Whether the process a lock names (on this host) is alive and is that process (not a later one given its pid)."""
    pid, _, start = said
    if not _alive(pid):
        return False
    now = started(pid)
    return start is None or now is None or now == start


def stale(lock: Path) -> bool:
    """Whether ``lock`` was left by a process of this host that is gone (or by an unreadable write long ago): safe to
    remove. A lock of another host is never stale here."""
    said = _said(lock)
    if said is None:
        return Path(lock).exists() and _age(Path(lock)) >= YOUNG
    return said[1] == socket.gethostname() and not _holds(said)


def clear_stale(folder: Path, pattern: str) -> list[Path]:
    """Remove the stale locks matching ``pattern`` in ``folder`` (a sweep resumed after a kill); the ones removed."""
    gone = []
    for lock in sorted(Path(folder).glob(pattern)):
        if lock.is_file() and not lock.is_symlink() and stale(lock):
            lock.unlink(missing_ok=True)
            gone.append(lock)
    return gone


YOUNG = 10.0  # seconds: an unreadable lock younger than this is being written by its creator, not stale


def _age(lock: Path) -> float:
    import time

    try:
        return time.time() - lock.stat().st_mtime
    except OSError:
        return float("inf")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def acquire(lock: Path, what: str, error: type[Locked] = Locked) -> Path:
    """Take ``lock`` for this process; when another live process holds it, ``error`` is raised saying ``what`` (e.g.
    "--out D is being written") "by process PID"."""
    lock = Path(lock).absolute()
    me = (os.getpid(), socket.gethostname())
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise disk_full(exc, lock) from None
    for _ in range(3):
        try:
            _create(lock, f"{me[0]} {me[1]} {started(me[0]) or ''}".strip() + "\n")
        except FileExistsError:
            said = _said(lock)
            who = None if said is None else said[:2]
            if who is None and _age(lock) < YOUNG:  # being created (no hard links here): its holder is alive
                raise error(f"{what} by another process (lock {lock}, just created); wait for it to end") from None
            if who == me and lock in _HELD:
                _HELD[lock] += 1
                return lock
            if who is not None and who != me and (who[1] != me[1] or _holds(said)):
                where = "" if who[1] == me[1] else f" on host {who[1]}"
                raise error(f"{what} by process {who[0]}{where} (lock {lock}); wait for it to end, "
                            f"or remove the lock if that process is gone") from None
            lock.unlink(missing_ok=True)  # stale (its process is gone), unreadable, or left by this pid's predecessor
            continue
        _HELD[lock] = 1
        return lock
    raise error(f"{what}: could not take the lock {lock}")


def _create(lock: Path, text: str) -> None:
    """Create ``lock`` holding ``text`` in one step (FileExistsError when it exists): written to a file of its own,
    then hard-linked to the lock's name, so no other process ever reads a lock that exists but is still empty (an
    empty lock read as unreadable was taken over while its creator wrote its pid)."""
    tmp = lock.with_name(f".{lock.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)  # a predecessor's with this pid, or a link planted there: never written through
    try:
        write_text(tmp, text)
    except BaseException as exc:  # a full disk fails after creating the file: nothing is left behind
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise disk_full(exc, lock) from None
        raise
    try:
        os.link(tmp, lock)
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links: create exclusively, then write (see YOUNG in acquire)
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o644)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
        except BaseException:
            lock.unlink(missing_ok=True)
            raise
    finally:
        tmp.unlink(missing_ok=True)


def release(lock: Path) -> None:
    """Give back one take of ``lock``; the file goes with the last one, and only while it is still this process's
    (never a lock another process took over meanwhile)."""
    lock = Path(lock).absolute()
    left = _HELD.get(lock, 0) - 1
    if left > 0:
        _HELD[lock] = left
        return
    _HELD.pop(lock, None)
    if holder(lock) == (os.getpid(), socket.gethostname()):
        lock.unlink(missing_ok=True)


@contextmanager
def held(lock: Path, what: str, error: type[Locked] = Locked) -> Iterator[Path]:
    """``lock`` held for the block."""
    path = acquire(lock, what, error)
    try:
        yield path
    finally:
        release(path)
