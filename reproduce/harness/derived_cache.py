"""What is derived from a source file's text alone (its code hash, the names it uses, the modules it imports), kept
on disk between processes.

Every run's worker fingerprints the code it executed (fingerprint.py), and reading the syntax trees of the ~40 files
a run loads costs about a second: the same second in every worker, for the same files. An entry is keyed by the
sha256 of what it is derived from (the file's bytes and path) and of the rule that derives it (the deriving module's
own source), so an entry can never describe other bytes or an older rule, and a miss only costs the derivation.
Entries live under ``$DLRMBENCH_CACHE`` (default ``$XDG_CACHE_HOME/dlrmbench``, else ``~/.cache/dlrmbench``), one
small JSON file each, written whole (a temporary file renamed over the entry). A cache folder that cannot be written
(a read-only home) costs the time it would have saved and nothing else.

The cache is bounded: a hit marks its entry used (its mtime), and a miss (a new file version) prunes the folder to
the MAX_ENTRIES most recently used entries when the last pruning is over PRUNE_EVERY_S old (a marker file's mtime
says when: a scan of the folder costs a fraction of a second, too much for every process). ``clear()``
(``make clean``) removes every entry and nothing else of the folder."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

VERSION = "1"  # of the entries' layout
MAX_ENTRIES = 5_000  # about 40 file versions a run, a few KiB each: a hundred code versions, ~20 MiB at most
PRUNE_EVERY_S = 3600.0
MARKER = ".pruned"  # in the folder: its mtime is the last pruning's
_pruned = False  # whether this process has looked whether a pruning is due


def cache_dir() -> Path:
    if os.environ.get("DLRMBENCH_CACHE"):
        return Path(os.environ["DLRMBENCH_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dlrmbench"


@lru_cache(maxsize=64)
def _rule_digest(rule: Path, mtime_ns: int, size: int) -> bytes:
    return hashlib.sha256(rule.read_bytes()).digest()


def rule_digest(rule: Path) -> bytes:
    """The sha256 of the source of the module that derives an entry (``rule``: its file)."""
    st = rule.stat()
    return _rule_digest(rule, st.st_mtime_ns, st.st_size)


def derived(kind: str, rule: Path, source: bytes, derive: Callable[[], Any]) -> Any:
    """``derive()`` (a JSON value), read from the cache when the same ``kind`` was derived before from the same
    ``source`` bytes by the same ``rule`` (the deriving module's file), else derived and stored."""
    h = hashlib.sha256()
    for part in (VERSION.encode(), kind.encode(), rule_digest(rule), source):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    key = h.hexdigest()
    entry = cache_dir() / key[:2] / f"{key[2:]}.json"
    try:
        stored = json.loads(entry.read_text())
        if isinstance(stored, dict) and stored.get("kind") == kind and "value" in stored:
            _touch(entry)
            return stored["value"]
    except (OSError, ValueError):
        pass  # absent, unreadable or cut short: derived again below
    value = derive()
    _store(entry, {"kind": kind, "value": value})
    global _pruned
    if not _pruned:
        _pruned = True
        if _pruning_due():
            prune()
    return value


def _pruning_due() -> bool:
    marker = cache_dir() / MARKER
    try:
        if time.time() - marker.stat().st_mtime < PRUNE_EVERY_S:
            return False
    except OSError:
        pass  # never pruned
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        return False  # a cache that cannot be written is not pruned either
    return True


def _touch(entry: Path) -> None:
    try:
        os.utime(entry)
    except OSError:
        pass  # a read-only cache: the entry still served


def entries(folder: Path | None = None) -> list[Path]:
    """The cache's entries (``<2 hex>/<62 hex>.json``), nothing else that may lie in its folder."""
    folder = cache_dir() if folder is None else folder
    hexd = set("0123456789abcdef")
    try:
        subs = [d for d in folder.iterdir() if len(d.name) == 2 and set(d.name) <= hexd and d.is_dir()]
    except OSError:
        return []
    return [f for d in subs for f in d.glob("*.json") if len(f.stem) == 62 and set(f.stem) <= hexd]


def prune(limit: int | None = None, folder: Path | None = None) -> int:
    """Remove all but the ``limit`` (default MAX_ENTRIES) most recently used entries; how many were removed."""
    limit = MAX_ENTRIES if limit is None else limit
    found = []
    for f in entries(folder):
        try:
            found.append((f.stat().st_mtime_ns, f))
        except OSError:
            continue
    found.sort(reverse=True)
    removed = 0
    for _, f in found[limit:]:
        try:
            f.unlink()
            removed += 1
        except OSError:
            pass
    return removed


def clear(folder: Path | None = None) -> int:
    """Remove every entry (and the subfolders they leave empty); files that are not entries stay. How many."""
    removed = prune(0, folder)
    folder = cache_dir() if folder is None else folder
    for d in (folder.iterdir() if folder.is_dir() else []):
        if d.is_dir() and len(d.name) == 2 and set(d.name) <= set("0123456789abcdef"):
            try:
                d.rmdir()  # only when empty
            except OSError:
                pass
    return removed


def _store(entry: Path, content: dict[str, Any]) -> None:
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(content, f)
            os.replace(tmp, entry)  # replaces a link at the entry's name, never writes through it
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return  # a cache that cannot be written: the value was derived all the same
