"""Writing our own files without harming anyone else's: nothing is opened for writing through a symbolic link (a link
where we would write is refused with one line naming it), and a full device is said as one line (``DiskFull``) naming
the folder, not an OSError traceback. The writers of records, logs, locks, staging folders, summaries and figures go
through here (impls/data/lockfile.py, impls/data/staging.py, reproduce/harness/records.py, launch.py, ...); a run's
progress and rank notes are written by the worker, under names its launcher clears (under the run's lock) first."""
from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import IO


class SymlinkRefused(ValueError):
    """A path we would write is a symbolic link: writing would change the file it points to (someone else's)."""


class DiskFull(OSError):
    """A file could not be written: the device holding it is full."""


def refuse_symlink(path: str | Path, what: str = "") -> Path:
    """``path`` when it is not a symbolic link (it may not exist); SymlinkRefused naming it and its target otherwise."""
    path = Path(path)
    if path.is_symlink():
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        label = f"{what} " if what else ""
        raise SymlinkRefused(f"{label}{path} is a symbolic link (to {target}): refusing to write through it; remove "
                             f"the link or move it away")
    return path


def open_for_write(path: str | Path, mode: str = "w", what: str = "") -> IO:
    """``open(path, mode)`` for writing ("w", "wb", "a") that never follows a symbolic link at ``path`` (O_NOFOLLOW:
    a link there is refused, whatever it points to, even when it appears after a check)."""
    path = Path(path)
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | (os.O_APPEND if "a" in mode else os.O_TRUNC)
    refuse_symlink(path, what)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            refuse_symlink(path, what)  # appeared between the check and the open
        raise disk_full(exc, path) from None
    return os.fdopen(fd, mode)


def write_text(path: str | Path, text: str, what: str = "") -> Path:
    """Write ``text`` to ``path`` (created or truncated), never through a symbolic link."""
    with open_for_write(path, "w", what) as f:
        try:
            f.write(text)
            f.flush()
        except OSError as exc:
            raise disk_full(exc, Path(path)) from None
    return Path(path)


def disk_full(exc: OSError, path: str | Path, then: str = "run again") -> OSError:
    """DiskFull naming ``path``'s folder for a full device (ENOSPC, EDQUOT), else ``exc`` as it is. ``then``: what to
    do once space is freed."""
    path = Path(path)
    if is_full(exc) and not isinstance(exc, DiskFull):
        return DiskFull(exc.errno, f"no space left on the device holding {path.parent} (writing {path.name}): free "
                                   f"some space and {then}")
    return exc


def is_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the device is full (ENOSPC, EDQUOT)."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def preallocate(folder: str | Path) -> None:
    """Reserve the blocks of every ``.npy`` array under ``folder`` (a memory-mapped array is made sparse): a write into
    a mapped page the device has no room for kills the process with SIGBUS and no message at all, so the room is taken
    before the first row is written, and a device too small is DiskFull now, naming the folder. A file system that
    cannot reserve (no fallocate, and glibc cannot emulate it) is left as it is."""
    for f in sorted(Path(folder).rglob("*.npy")):
        fd = os.open(f, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
        try:
            os.posix_fallocate(fd, 0, os.fstat(fd).st_size)
        except OSError as exc:
            if is_full(exc):
                raise disk_full(exc, f) from None
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise
        finally:
            os.close(fd)
