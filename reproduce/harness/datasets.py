"""Dataset manifests (``datasets/<name>.toml``) and the prepare step behind ``dlrmbench data prepare``."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from impls.data.datasets_facts import MANIFEST_DIR, manifest


def manifest_files(man: dict[str, Any], raw: Path) -> list[Path]:
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
    files = manifest_files(man, raw)
    out = out or root / name / "prepared"
    return prepare_text(name, files, out, man["reader"], man["layout"], max_ind_range=max_ind_range,
                        freq_threshold=freq_threshold, strict=strict, progress=progress,
                        seed=int(man.get("split_seed", 2018)))


def prepare_tabular(raw: str, out: Path | None, strict: bool, buckets: int | None, freq_threshold: int,
                    schema_path: Path | None, label: str | None, dense: str | None, categorical: str | None,
                    split: str | None, delimiter: str | None, progress: Callable[[int], None] | None = None,
                    root: Path = MANIFEST_DIR):
    """`data prepare tabular`: the schema from a file or from the flags (not both); the default output is
    ``datasets/<raw file stem>/prepared`` in the checkout, whatever the current folder."""
    from impls.data.tabular import prepare_tabular as prepare, raw_files
    from impls.data.tabular_schema import Schema

    flags = {"--label": label, "--dense": dense, "--categorical": categorical, "--split": split}
    if schema_path is not None:
        given = [k for k, v in flags.items() if v is not None]
        if given:
            raise ValueError(f"--schema describes the columns; drop {', '.join(given)} (or the schema)")
        if buckets or freq_threshold:
            raise ValueError("with --schema, give hash buckets / min_count per column in the schema file")
        schema = Schema.load(schema_path)
        if delimiter:
            schema = Schema(schema.label, schema.dense, schema.categorical, schema.split, delimiter)
    else:
        if label is None or categorical is None:
            raise ValueError("a tabular input needs --schema FILE, or at least --label and --categorical")
        schema = Schema.from_flags(label, dense, categorical, split, delimiter, freq_threshold, buckets)
    files = raw_files(raw)
    stem = files[0].name.split(".")[0] if len(files) == 1 else (Path(raw).name if Path(raw).is_dir()
                                                                 else files[0].parent.name)
    out = Path(out) if out is not None else root / stem / "prepared"
    return prepare(files, schema, out, name=stem, strict=strict, progress=progress)
