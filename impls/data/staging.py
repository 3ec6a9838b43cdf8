"""Where prepared and exported datasets are written: a staging folder beside the output, swapped in when complete.
Only folders this tool wrote are ever deleted: a complete dataset (its completion marker and meta.json), an empty
folder, or a staging folder carrying the staging mark. Anything else named by ``--out`` is refused, untouched."""
from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

MARKER = "COMPLETE"  # written last into a finished dataset
STAGING_MARK = ".dlrmbench-staging"  # inside a staging folder while it is being written


def is_dataset(path: Path) -> bool:
    """A complete dataset this tool wrote."""
    return (path / MARKER).is_file() and (path / "meta.json").is_file()


def _replaceable(path: Path, mark: str | None) -> bool:
    if not path.exists():
        return True
    if not path.is_dir():
        return False
    return not any(path.iterdir()) or (mark is not None and (path / mark).is_file()) or (
        mark is None and is_dataset(path))


def check_output(out: Path) -> None:
    """Refuse an ``out`` that is a file or a non-empty folder that is not a dataset this tool wrote."""
    out = Path(out)
    if not _replaceable(out, None):
        what = "a file" if out.is_file() else "a folder that is not a complete dlrmbench dataset"
        raise ValueError(f"--out {out} is {what} (no {MARKER} and meta.json): refusing to overwrite it; "
                         f"choose a new folder, or remove it yourself")


@contextmanager
def staged(out: Path) -> Iterator[Path]:
    """A fresh staging folder ``<out>.partial`` to write into; on success it replaces ``out`` (checked by
    ``check_output``) and gets the completion marker; on any error it is removed, and ``out`` is left as it was."""
    out = Path(out)
    check_output(out)
    partial = out.with_name(out.name + ".partial")
    if not _replaceable(partial, STAGING_MARK):
        raise ValueError(f"{partial} exists and was not made by dlrmbench: refusing to use it as the staging folder "
                         f"for {out}; move it away")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    (partial / STAGING_MARK).write_text("being written by dlrmbench; safe to delete\n")
    try:
        yield partial
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    check_output(out)  # nobody put anything there meanwhile
    (partial / STAGING_MARK).unlink()
    if out.exists():
        shutil.rmtree(out)
    partial.rename(out)
    (out / MARKER).write_text("ok\n")
