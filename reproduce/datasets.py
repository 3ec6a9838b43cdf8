"""Dataset manifests (``datasets/<name>.toml``) and the prepare step behind ``dlrmbench data prepare``."""
from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Callable

MANIFEST_DIR = Path(__file__).resolve().parents[1] / "datasets"  # the checkout's datasets/, from any folder


def manifest(name: str, root: Path = MANIFEST_DIR) -> dict[str, Any]:
    path = root / f"{name}.toml"
    if not path.exists():
        known = sorted(p.stem for p in root.glob("*.toml"))
        raise ValueError(f"no dataset manifest {path}; known: {', '.join(known) or '(none)'}")
    return tomllib.loads(path.read_text())


def raw_files(man: dict[str, Any], raw: Path) -> list[Path]:
    """The raw files in manifest order: ``raw`` is the one file, or a folder holding them (plain or .gz)."""
    if raw.is_file():
        return [raw]
    if not raw.is_dir():
        raise FileNotFoundError(f"{raw} is neither a file nor a folder")
    found = []
    for expected in man["raw_files"]:
        stem = expected.removesuffix(".gz")
        hit = next((raw / n for n in (expected, stem, stem + ".gz") if (raw / n).is_file()), None)
        if hit is not None:
            found.append(hit)
    if not found:
        raise FileNotFoundError(f"none of {man['raw_files'][:3]}... found in {raw}")
    return found


def prepare(name: str, raw: Path, out: Path | None, strict: bool, max_ind_range: int | None, freq_threshold: int,
            progress: Callable[[int], None] | None = None, root: Path = MANIFEST_DIR):
    man = manifest(name, root)
    from impls.data.prepare import FORMATS, prepare_text

    if man["reader"] not in FORMATS:
        raise NotImplementedError(f"{name}: {man.get('prepare_note', 'no `data prepare` step for this dataset')}")
    files = raw_files(man, raw)
    out = out or root / name / "prepared"
    return prepare_text(name, files, out, man["reader"], man["layout"], max_ind_range=max_ind_range,
                        freq_threshold=freq_threshold, strict=strict, progress=progress,
                        seed=int(man.get("split_seed", 2018)))
