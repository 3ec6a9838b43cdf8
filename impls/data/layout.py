"""The prepared layout: what a dataset on disk is, whoever wrote it (`data prepare` for Criteo / Avazu text,
`data prepare tabular` for any click log, `data synth` for a synthetic stream) and whoever reads it
(prepared_source.py).

A prepared folder holds ``meta.json`` (``Prepared``), a ``COMPLETE`` marker written last (staging.py), optionally
``vocab/<field>.npy`` (each field's sorted raw keys), and one folder per split (``SPLITS``) with ``dense.npy``
(float32 [n, num_dense]), ``labels.npy`` (int8 [n]) and ``rows.npy`` (int64 [n]: each sample's row number in its
source - the raw files' good rows counted from 0 in file order, or a synthetic stream's sample number - so the same
split can be handed to another library), and either ``sparse.npy`` (int32 [n, T], one id per field:
the one-hot layout) or ``lengths.npy`` (int32 [n, T], bag sizes), ``row_offsets.npy`` (int64 [n + 1]) and
``values.bin`` (little-endian int64 ids, sample-major: sample i's bags in field order at values[row_offsets[i] :
row_offsets[i+1]]; the multi-hot layout). ``SplitWriter`` writes a split, ``split_arrays`` reads one back checked
against meta.json."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from impls.data.columns import CRITEO_CAT, CRITEO_NUM_DENSE
from impls.data.staging import MARKER

SPLITS = ("train", "val", "test")
META = "meta.json"
LAYOUTS = ("one-hot", "multi-hot")


@dataclass
class Prepared:
    """A prepared dataset's meta.json: its splits' row counts, each table's cardinality and name, the dense width,
    the layout, and what it was made from."""

    name: str
    out: Path
    rows: dict[str, int]
    cardinalities: list[int]
    bad_lines: int
    bad_examples: list[str]
    max_ind_range: int | None
    freq_threshold: int
    tables: list[str] = field(default_factory=lambda: list(CRITEO_CAT))  # (datasets prepared before Avazu)
    num_dense: int = CRITEO_NUM_DENSE
    layout: str = "one-hot"  # "one-hot": sparse.npy [n, T]; "multi-hot": lengths, row_offsets, values.bin
    dims: list[int] | None = None  # embedding dims the data was made for (synthetic exports)
    synthetic: str | None = None  # the SyntheticSpec of a `data synth` export
    raw: list[list] | None = None  # [file name, bytes, sha256] of each raw file it was prepared from, in order
    schema: dict | None = None  # `data prepare tabular`: the schema, dense column names and standardization
    warnings: list[str] = field(default_factory=list)  # said when prepared (e.g. a split with one class)
    key: dict | None = None  # what it was made from (impls/data/staging.py): raw bytes' sha256, schema, options

    def to_json(self) -> str:
        d = asdict(self)
        d["out"] = str(self.out)
        return json.dumps(d, indent=2)


def load_prepared(out: Path) -> Prepared | None:
    """The metadata of a complete prepared dataset, or None when ``out`` is not complete; a meta.json that cannot be
    read (cut short, edited, of another tool) raises ValueError naming it and what is wrong."""
    if not (out / MARKER).exists():
        return None
    return read_meta(out)


def read_meta(out: Path) -> Prepared:
    """The metadata in ``out``'s meta.json, complete or not (a kept model's copy of it has no marker)."""
    path = Path(out) / META
    try:
        d = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path} is missing (the folder has {MARKER} but no meta.json): prepare it again") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not readable JSON ({exc}): prepare the dataset again") from None
    names = {f.name for f in fields(Prepared)}
    if not isinstance(d, dict) or not {"name", "rows", "cardinalities"} <= set(d):
        raise ValueError(f"{path} is not a dlrmbench dataset's metadata (needs name, rows, cardinalities)")
    unknown = sorted(set(d) - names)
    if unknown:
        raise ValueError(f"{path} has field(s) {unknown} this version does not know: written by a newer dlrmbench?")
    d["out"] = Path(d.get("out", out))
    try:
        return Prepared(**d)
    except TypeError as exc:
        raise ValueError(f"{path}: {exc}") from None


def is_dataset(path: Path) -> bool:
    """Whether ``path`` holds a complete dataset (its marker and its meta.json)."""
    return (Path(path) / MARKER).is_file() and (Path(path) / META).is_file()


def write_meta(folder: Path, meta: Prepared) -> None:
    """``meta.json`` of a dataset being written (into its staging folder; the marker comes after it)."""
    (Path(folder) / META).write_text(meta.to_json())


def write_vocab(folder: Path, names, keys, values=None) -> None:
    """``vocab/<name>.npy``: each field's kept raw values in id order (an id is its key's index in the sorted keys).
    Where the keys are hashes of the values (``values`` given: a click log's text), the values go in
    ``<name>.npy`` (unicode) and the hashes beside them in ``<name>.keys.npy``; else the keys are the raw values."""
    vocab = Path(folder) / "vocab"
    vocab.mkdir()
    for i, (name, k) in enumerate(zip(names, keys)):
        if values is None:
            np.save(vocab / f"{name}.npy", k)
            continue
        np.save(vocab / f"{name}.npy", np.asarray(["" if v is None else str(v) for v in values[i]], dtype=str))
        np.save(vocab / f"{name}.keys.npy", k)


def vocab_keys(folder: Path, name: str) -> np.ndarray:
    """Field ``name``'s kept keys, sorted (a click log's hashes beside its values; else the values themselves)."""
    vocab = Path(folder) / "vocab"
    hashed = vocab / f"{name}.keys.npy"
    return np.load(hashed if hashed.is_file() else vocab / f"{name}.npy")


def id_arrays(d: Path, multi_hot: bool) -> dict[str, np.ndarray]:
    """A written split's ids opened for update in place (``sparse``, or ``values`` with ``lengths`` and
    ``row_offsets``; no ``values`` when every bag is empty)."""
    d = Path(d)
    if not multi_hot:
        return {"sparse": np.load(d / "sparse.npy", mmap_mode="r+")}
    out = {"lengths": np.load(d / "lengths.npy", mmap_mode="r"), "row_offsets": np.load(d / "row_offsets.npy",
                                                                                       mmap_mode="r")}
    if (d / "values.bin").stat().st_size:
        out["values"] = np.memmap(d / "values.bin", dtype="<i8", mode="r+")
    return out


class SplitWriter:
    """The arrays of one split of ``n`` rows, written in row order (``write``), flushed by ``close``."""

    def __init__(self, d: Path, n: int, num_dense: int, num_tables: int, multi_hot: bool) -> None:
        d = Path(d)
        d.mkdir()
        self.n, self.multi_hot, self.at = n, multi_hot, 0
        self.dense = np.lib.format.open_memmap(d / "dense.npy", "w+", np.float32, (n, num_dense))
        self.labels = np.lib.format.open_memmap(d / "labels.npy", "w+", np.int8, (n,))
        self.rows = np.lib.format.open_memmap(d / "rows.npy", "w+", np.int64, (n,))
        if multi_hot:
            self.lengths = np.lib.format.open_memmap(d / "lengths.npy", "w+", np.int32, (n, num_tables))
            self.row_off = np.lib.format.open_memmap(d / "row_offsets.npy", "w+", np.int64, (n + 1,))
            self.row_off[0] = 0
            self.values = open(d / "values.bin", "wb")
        else:
            self.sparse = np.lib.format.open_memmap(d / "sparse.npy", "w+", np.int32, (n, num_tables))

    def write(self, rows: np.ndarray, dense: np.ndarray, labels: np.ndarray, sparse: np.ndarray | None = None,
              lengths: np.ndarray | None = None, values: np.ndarray | None = None) -> None:
        """The next ``len(labels)`` samples, ``rows`` their row numbers in the source: one-hot ``sparse`` [m, T], or
        multi-hot bag sizes ``lengths`` [m, T] with their ``values`` sample-major."""
        a, m = self.at, len(labels)
        if a + m > self.n:
            raise ValueError(f"{m} more rows overrun the split's {self.n} (at {a})")
        self.rows[a : a + m] = rows
        self.dense[a : a + m] = dense
        self.labels[a : a + m] = labels
        if self.multi_hot:
            np.asarray(values).astype("<i8").tofile(self.values)
            self.lengths[a : a + m] = lengths
            self.row_off[a + 1 : a + m + 1] = self.row_off[a] + np.cumsum(np.asarray(lengths).sum(axis=1))
        else:
            self.sparse[a : a + m] = sparse
        self.at += m

    def close(self) -> None:
        """Everything on disk before the dataset is marked complete."""
        arrays = [self.rows, self.dense, self.labels] + ([self.lengths, self.row_off] if self.multi_hot
                                                        else [self.sparse])
        for a in arrays:
            a.flush()
        if self.multi_hot:
            self.values.close()


def _array(path: Path, shape: tuple[int, ...]) -> np.ndarray:
    """The memory-mapped array at ``path``; one missing, cut short or of another shape than meta.json says raises
    ValueError naming the file and what is wrong."""
    if not path.is_file():
        raise ValueError(f"{path} is missing: the dataset is incomplete; prepare it again")
    try:
        a = np.load(path, mmap_mode="r")
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"{path} is not a readable array ({exc}): cut short or damaged; prepare it again") from None
    if a.shape != shape:
        raise ValueError(f"{path} has shape {a.shape}, meta.json says {shape}: cut short or from another dataset; "
                         f"prepare it again")
    return a


def split_arrays(path: Path, meta, split: str) -> dict[str, np.ndarray]:
    """The memory-mapped arrays of one split, each checked against meta.json (opens, reads no data but the last
    row offset): dense, labels and sparse (one-hot) or lengths, row_offsets and values (multi-hot)."""
    d = Path(path) / split
    n, T = meta.rows[split], len(meta.tables)
    out = {"dense": _array(d / "dense.npy", (n, meta.num_dense)), "labels": _array(d / "labels.npy", (n,))}
    if (d / "rows.npy").is_file():  # datasets prepared before rows.npy existed have none
        out["rows"] = _array(d / "rows.npy", (n,))
    if meta.layout != "multi-hot":
        out["sparse"] = _array(d / "sparse.npy", (n, T))
        return out
    out["lengths"] = _array(d / "lengths.npy", (n, T))
    out["row_offsets"] = _array(d / "row_offsets.npy", (n + 1,))
    nnz = int(out["row_offsets"][-1])
    values = d / "values.bin"
    size = values.stat().st_size if values.is_file() else None
    if size != 8 * nnz:
        raise ValueError(f"{values}: {'missing' if size is None else f'{size:,} bytes'}, row_offsets.npy says "
                         f"{nnz:,} int64 ids ({8 * nnz:,} bytes): cut short or from another dataset; prepare it again")
    out["values"] = np.memmap(values, dtype="<i8", mode="r", shape=(nnz,)) if nnz else np.zeros(0, "<i8")
    return out
