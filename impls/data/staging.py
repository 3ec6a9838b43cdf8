"""The one rule every command that writes a data folder follows (`data synth`, `data prepare`, `data reorder`):

- one writer per folder: ``<out>.lock`` (impls/data/lockfile.py) is held from the first look at ``out`` to the
  last byte written; a second writer is refused naming the process that holds it;
- write once, keyed by content: a finished folder carries its kind and key (what it was made from: raw bytes,
  schema, options) in its completion marker; asked again with the same kind and key it is reused, with any other it
  is refused naming each difference. A finished folder is never replaced or deleted: its owner removes it;
- never touch what we did not write: ``out`` is used only when it does not exist or is an empty folder; the output
  is written into ``<out>.partial`` (carrying a staging mark) and renamed to ``out`` when complete, the marker
  last. On any error the staging folder goes and ``out`` is left as it was. A ``<out>.partial`` without our mark
  is refused, untouched;
- a symbolic link given as ``out`` names the folder it points to (the user's choice of where the data goes): the
  lock, the staging folder and the output are that folder's; a link to nothing, or to a file, is refused. A link
  where we would write anything else (the lock, the staging folder, the marker) is never written through;
- a full device is one line naming the folder (DiskFull), with the staging folder removed."""
from __future__ import annotations

import json
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from impls.data.lockfile import Locked, held
from impls.data.safe_write import disk_full, refuse_symlink, write_text

MARKER = "COMPLETE"  # written last into a finished folder: {"kind": ..., "key": {...}}
STAGING_MARK = ".dlrmbench-staging"  # inside a staging folder while it is being written


def finished(out: Path) -> dict[str, Any] | None:
    """The completion marker of a finished folder ({"kind", "key"}; {} for one written before markers carried a
    key), or None when ``out`` is not finished."""
    marker = Path(out) / MARKER
    if not marker.is_file():
        return None
    try:
        d = json.loads(marker.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}  # "ok\n": an older marker
    return d if isinstance(d, dict) else {}


def differences(had: dict[str, Any], asked: dict[str, Any]) -> list[str]:
    """Each entry of two keys that differs, said as "name: made from X, asked Y" (raw files one by one: which
    file, and whether its name, size or content differs)."""
    out = []
    for k in sorted(set(had) | set(asked)):
        a, b = had.get(k), asked.get(k)
        if a == b:
            continue
        if k == "raw files" and isinstance(a, list) and isinstance(b, list):
            out += _raw_differences(a, b)
        else:
            out.append(f"{k}: made from {_said(a)}, asked {_said(b)}")
    return out


def _raw_differences(had: list, asked: list) -> list[str]:
    if len(had) != len(asked):
        return [f"raw files: made from {len(had)} file(s) {[f[0] for f in had]}, asked {len(asked)} "
                f"{[f[0] for f in asked]}"]
    out = []
    for i, (a, b) in enumerate(zip(had, asked)):
        if a == b:
            continue
        if a[0] != b[0]:
            out.append(f"raw file {i + 1}: made from {a[0]}, asked {b[0]}")
        elif a[1] != b[1]:
            out.append(f"raw file {b[0]}: made from {a[1]:,} bytes, asked {b[1]:,} bytes")
        else:
            had_hash = a[2][:12] if len(a) > 2 else "(not recorded)"
            out.append(f"raw file {b[0]}: same size, other content (sha256 {had_hash}..., now {b[2][:12]}...)")
    return out


def _said(v: Any) -> str:
    return "(not recorded)" if v is None else json.dumps(v, default=str)


def check_output(out: Path) -> None:
    """Refuse an ``out`` that is a file or a non-empty folder (this tool writes only into a new or empty folder)."""
    out = Path(out)
    if out.is_file():
        raise ValueError(f"--out {out} is a file: refusing to overwrite it; choose a new folder")
    if out.is_dir() and any(out.iterdir()):
        what = ("a complete dlrmbench output" if (out / MARKER).exists() else
                "a folder of other files (not a complete dlrmbench dataset)")
        raise ValueError(f"--out {out} is {what}: refusing to overwrite it (nothing in it is touched); choose a new "
                         f"folder, or remove it yourself")


class OutputLocked(Locked, ValueError):
    """Another live process writes this --out (a ValueError: the commands report it as a usage error)."""


@dataclass
class Stage:
    """Where to write (``path``), or ``reused``: ``out`` is finished with the same kind and key (write nothing)."""

    path: Path
    reused: bool


class InputChanged(ValueError):
    """A raw file changed while it was being read (still being written?): what was read is not one state of it."""


def _stats(files: Sequence[Path]) -> list[tuple[int, int] | None]:
    out = []
    for f in files:
        try:
            st = Path(f).stat()
            out.append((st.st_size, st.st_mtime_ns))
        except OSError:
            out.append(None)
    return out


def _check_unchanged(files: Sequence[Path], before: list, exc: BaseException | None = None) -> None:
    """InputChanged naming each of ``files`` whose size or time differs from ``before``."""
    changed = [Path(f).name for f, a, b in zip(files, before, _stats(files)) if a != b]
    if changed:
        why = f" ({exc})" if exc is not None else ""
        raise InputChanged(f"raw file(s) {', '.join(changed)} changed while being read{why}: is one still being "
                           f"written? Prepare once it is complete (nothing was written)")


@contextmanager
def staged(out: Path, kind: str, key: dict[str, Any], inputs: Sequence[Path] = ()) -> Iterator[Stage]:
    """Hold ``out``'s lock; reuse a finished ``out`` of the same ``kind`` and ``key`` (refuse one of another, naming
    the differences); else yield a fresh staging folder ``<out>.partial`` that replaces ``out`` (new or empty) when
    the block ends without error, with the completion marker written last. ``inputs``: the files the block reads; one
    that changes meanwhile (size or time) fails it with InputChanged naming the file, whatever else went wrong."""
    out = resolve_out(Path(out))
    before = _stats(inputs)
    with held(out.with_name(out.name + ".lock"), f"--out {out} is being written", OutputLocked):
        done = finished(out)
        if done is not None:
            asked = {"kind": kind, **key}
            had = {"kind": done.get("kind"), **done.get("key", {})}
            if not done:
                raise ValueError(f"--out {out} is a complete output written before outputs recorded what they were "
                                 f"made from, so it cannot be told whether it matches: use it as it is (--data "
                                 f"{out}), or remove it to write it again")
            diff = differences(had, asked)
            if diff:
                raise ValueError(f"--out {out} is complete but was made from other inputs ({'; '.join(diff)}): "
                                 f"choose another --out, or remove it to write it again")
            yield Stage(out, reused=True)
            return
        check_output(out)
        partial = out.with_name(out.name + ".partial")
        refuse_symlink(partial, "the staging folder")
        if partial.exists() and not (partial.is_dir() and (partial / STAGING_MARK).is_file() or _empty_dir(partial)):
            raise ValueError(f"{partial} exists and was not made by dlrmbench: refusing to use it as the staging "
                             f"folder for {out}; move it away")
        shutil.rmtree(partial, ignore_errors=True)  # ours, left by a writer that was killed (we hold the lock)
        try:
            partial.mkdir(parents=True)
            write_text(partial / STAGING_MARK, "being written by dlrmbench; safe to delete when no dlrmbench runs\n")
            try:
                yield Stage(partial, reused=False)
            except Exception as exc:  # noqa: BLE001 - a changed input is the cause of whatever it broke
                _check_unchanged(inputs, before, exc)
                raise
            _check_unchanged(inputs, before)
            check_output(out)  # nobody put anything there meanwhile (we hold the lock; a user may not)
            (partial / STAGING_MARK).unlink()
            if out.exists():
                out.rmdir()  # empty (checked above)
            partial.rename(out)
        except BaseException as exc:
            shutil.rmtree(partial, ignore_errors=True)
            if isinstance(exc, OSError):
                raise disk_full(exc, partial) from None
            raise
        try:
            write_text(out / MARKER, json.dumps({"kind": kind, "key": key}, indent=2, default=str) + "\n")
        except OSError as exc:  # the data is whole but unmarked: a rerun would refuse it as "not ours"
            shutil.rmtree(out, ignore_errors=True)
            raise disk_full(exc, out) from None


def resolve_out(out: Path) -> Path:
    """``out``, or the folder a symbolic link ``out`` points to (made absolute); a link to nothing or to a file is
    refused (ValueError)."""
    if not out.is_symlink():
        return out
    target = Path(os.path.realpath(out))
    if not target.is_dir():
        what = "a file" if target.exists() else "nothing"
        raise ValueError(f"--out {out} is a symbolic link to {what} ({target}): give a folder, or a link to one")
    return target


def _empty_dir(path: Path) -> bool:
    return path.is_dir() and not any(path.iterdir())


def content_key(files: list[Path]) -> list[list]:
    """[name, bytes, sha256 of the bytes] of each raw file, in order: what a dataset was prepared from."""
    import hashlib

    out = []
    for f in files:
        h = hashlib.sha256()
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
        out.append([Path(f).name, Path(f).stat().st_size, h.hexdigest()])
    return out
