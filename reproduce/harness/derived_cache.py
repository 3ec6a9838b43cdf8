"""What is derived from a source file's text alone (its code hash, the names it uses, the modules it imports), kept
on disk between processes.

Every run's worker fingerprints the code it executed (fingerprint.py), and reading the syntax trees of the ~40 files
a run loads costs about a second: the same second in every worker, for the same files. An entry is keyed by the
sha256 of what it is derived from (the file's bytes and path) and of the rule that derives it (the deriving module's
own source), so an entry can never describe other bytes or an older rule, and a miss only costs the derivation.
Entries live under ``$DLRMBENCH_CACHE`` (default ``$XDG_CACHE_HOME/dlrmbench``, else ``~/.cache/dlrmbench``), one
small JSON file each, written whole (a temporary file renamed over the entry). A cache folder that cannot be written
(a read-only home) costs the time it would have saved and nothing else."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

VERSION = "1"  # of the entries' layout


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
            return stored["value"]
    except (OSError, ValueError):
        pass  # absent, unreadable or cut short: derived again below
    value = derive()
    _store(entry, {"kind": kind, "value": value})
    return value


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
