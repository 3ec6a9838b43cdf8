"""`data prepare tabular`: any click log in CSV / TSV (plain or .gz) or Parquet, described by a ``Schema``
(impls/data/tabular_schema.py), into the prepared layout every run reads (datasets/README.md).

Two passes, as the Criteo / Avazu readers: pass 1 reads every row, drops and reports malformed ones (wrong column
count, a label or dense value that is not a number, a bad time), keeps the time column when the split is by time; the split is then fixed.
Pass 2 reads again, categorifies with the vocabulary fitted on the training split (impls/data/vocabulary.py: id 0
of every table is the out-of-vocabulary row of values the training split did not keep), and writes each split: ``dense.npy`` float32 [n, num_dense], ``labels.npy`` int8
[n], and ``sparse.npy`` int32 [n, T] (one value per field) or, when a field is multi-hot, ``lengths.npy`` int32
[n, T], ``row_offsets.npy`` int64 [n + 1] and ``values.bin`` (little-endian int64, sample-major), as `data synth`
writes them. Dense values: missing -> 0 after the transform; ``standardize`` uses the training split's mean and
std only (kept in meta.json). Categorical values are keyed by a 64-bit hash of their text (pandas' hash_array),
so a vocabulary is the sorted kept keys (``vocab/<field>.keys.npy``, their text in ``vocab/<field>.npy``, ids from 1);
a missing value is a value of its own (memory bounded by the distinct values). Written into
``<out>.partial`` and renamed with ``COMPLETE`` last (impls/data/staging.py)."""
from __future__ import annotations

import glob as globlib
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from impls.data.layout import SPLITS, Prepared, SplitWriter, id_arrays, load_prepared, write_meta, write_vocab
from impls.data.prepare import SplitPlan
from impls.data.id_runs import run_values
from impls.data.safe_write import preallocate
from impls.data.staging import content_key, staged
from impls.data.tabular_schema import OPS, Categorical, Schema, is_pattern
from impls.data.textio import MAX_EXAMPLES, BadRows, MalformedInput, Problems
from impls.data.vocabulary import TrainVocabulary, remap_columns, remap_values

BLOCK_BYTES = 16 << 20
F32_MAX = float(np.finfo(np.float32).max)
MISSING = "\x00missing"  # the text a missing categorical value is keyed by
# how ids are given (meta.json and the staging key: a dataset prepared another way is prepared again)
VOCABULARY = "fitted on the training split; id 0 is the out-of-vocabulary row, ids 1.. the kept values by key"


def raw_files(raw: str | Path) -> list[Path]:
    """A file, a folder's CSV / TSV / Parquet files (sorted), or a glob (sorted) when no file or folder has that name
    (a path holding ``[`` or ``*`` is taken as written when it exists)."""
    text = str(raw)
    if not Path(text).exists() and any(c in text for c in "*?["):
        files = sorted(Path(p) for p in globlib.glob(text))
    elif Path(text).is_dir():
        files = sorted(p for p in Path(text).iterdir() if _kind(p, None, strict=False))
    else:
        files = [Path(text)]
    files = [f for f in files if f.is_file()]
    if not files:
        raise FileNotFoundError(f"no raw file found at {raw}")
    return files


PARQUET_MAGIC = b"PAR1"  # a Parquet file's first (and last) four bytes
GZIP_MAGIC = b"\x1f\x8b"


def _starts_with(path: Path, magic: bytes) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(magic)) == magic
    except OSError:
        return False


def _gzipped(path: Path) -> bool:
    """A gzip file, told by its first bytes (whatever its name)."""
    return _starts_with(path, GZIP_MAGIC)


def _kind(path: Path, delimiter: str | None, strict: bool = True) -> str | None:
    """"parquet", or the delimiter of a text file: from the name (.parquet / .pq, .csv, .tsv, each optionally .gz),
    else from the content (Parquet's magic bytes; a named file's header line with tabs or commas, gzipped or not).
    ``strict`` False (a folder's listing): a file that is neither by name nor Parquet by content is None."""
    name = path.name.lower().removesuffix(".gz")
    if name.endswith((".parquet", ".pq")) or _starts_with(path, PARQUET_MAGIC):
        return "parquet"
    if delimiter:
        return delimiter
    if name.endswith(".tsv"):
        return "\t"
    if name.endswith(".csv"):
        return ","
    if not strict:
        return None
    sniffed = _sniff_delimiter(path)
    if sniffed:
        return sniffed
    raise ValueError(f"{path.name}: cannot tell the format from its name (.csv, .tsv, .parquet, each optionally .gz) "
                     f"or its content (neither Parquet nor a text header with tabs or commas); give the schema a "
                     f"delimiter")


def _sniff_delimiter(path: Path) -> str | None:
    """Tab or comma, whichever a text file's first line holds more of (None: neither, or not text)."""
    import gzip

    try:
        with (gzip.open if _gzipped(path) else open)(path, "rb") as f:
            line = f.readline(1 << 16).decode("utf-8-sig")
    except (OSError, UnicodeDecodeError, EOFError):
        return None
    tabs, commas = line.count("\t"), line.count(",")
    return None if not (tabs or commas) else ("\t" if tabs > commas else ",")


class Chunk:
    """One block of rows of one file: the schema's columns as Arrow arrays, and where each row came from: row i is
    the file's good row ``first + i``, at line ``first + i + 1 + header`` plus the malformed lines skipped before
    it (found only for the rows a report names)."""

    def __init__(self, columns: dict[str, Any], n: int, first: int, where: str, header: int = 1,
                 skipped: Sequence[int] = ()) -> None:
        self.columns, self.n, self.first, self.where = columns, n, first, where
        self.header, self.skipped = header, skipped
        self.not_utf8: dict[int, str] = {}  # row -> why (its text was not UTF-8; read as missing, the row is bad)

    def __len__(self) -> int:
        return self.n

    def at(self, i: int) -> str:
        line = self.first + i + 1 + self.header
        for s in sorted(self.skipped):  # each skipped line at or before it moves it down by one
            if s > line:
                break
            line += 1
        return f"{self.where}:{line}"


def _chunks(path: Path, schema: Schema, problems: Problems, strict: bool, optional: Sequence[str] = ()
            ) -> Iterator[Chunk]:
    """The blocks of rows of one file; a column of ``optional`` the file lacks is left out (new rows to score may
    hold no label)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    kind = _kind(path, schema.delimiter)
    cols = schema.columns
    if kind == "parquet":
        f = pq.ParquetFile(path)
        cols = [c for c in cols if c not in optional or c in f.schema_arrow.names]
        missing = [c for c in cols if c not in f.schema_arrow.names]
        if missing:
            raise ValueError(f"{path.name}: no column(s) {missing}; it has {f.schema_arrow.names}")
        _check_names(path.name, f.schema_arrow.names, cols)
        row = 0
        for rb in f.iter_batches(batch_size=1 << 16, columns=cols):
            yield Chunk({c: rb.column(c) for c in cols}, rb.num_rows, row, f"{path.name} row", header=0)
            row += rb.num_rows
        return
    header = _header(path, kind)
    cols = [c for c in cols if c not in optional or c in header]
    missing = [c for c in cols if c not in header]
    if missing:
        raise ValueError(f"{path.name}: no column(s) {missing} in its header {header}")
    _check_names(f"{path.name}:1", header, cols)
    skipped: list[int] = []
    first: list[str] = []  # the first malformed line's message (strict mode raises it)

    def bad_row(row) -> str:
        where, why = f"{path.name}:{row.number}", f"expected {row.expected_columns} columns, got {row.actual_columns}"
        problems.add(where, why, strict=False)
        if not first:
            first.append(f"{where}: {why}")
        skipped.append(int(row.number))
        return "skip"

    reader = pcsv.open_csv(
        pa.input_stream(str(path), compression="gzip" if _gzipped(path) else None), read_options=pcsv.ReadOptions(use_threads=False, block_size=BLOCK_BYTES),
        parse_options=pcsv.ParseOptions(delimiter=kind, invalid_row_handler=bad_row),
        convert_options=pcsv.ConvertOptions(include_columns=cols, column_types={c: pa.binary() for c in cols},
                                            strings_can_be_null=True))
    good = 0
    for rb in reader:
        if strict and first:
            raise MalformedInput(first[0])
        chunk = Chunk({}, rb.num_rows, good, path.name, skipped=skipped)
        chunk.columns = {c: _text(rb.column(c), chunk, c) for c in cols}
        yield chunk
        good += rb.num_rows
    if strict and first:
        raise MalformedInput(first[0])


def _text(arr, chunk: Chunk, column: str):
    """A binary column as UTF-8 text; a value that is not UTF-8 becomes missing and its row is noted in the chunk
    (reported as a malformed line naming the column and the byte)."""
    import pyarrow as pa

    try:
        return arr.cast(pa.string())
    except pa.ArrowInvalid:
        pass
    out = []
    for i, v in enumerate(arr.to_pylist()):  # the slow path, only for a block holding bytes that are not UTF-8
        try:
            out.append(None if v is None else v.decode("utf-8"))
        except UnicodeDecodeError as exc:
            chunk.not_utf8.setdefault(i, f"{column}: not UTF-8 text (byte {v[exc.start]:#04x} at {exc.start}); "
                                         f"save the file as UTF-8")
            out.append(None)
    return pa.array(out, pa.string())


def _header(path: Path, delimiter: str) -> list[str]:
    import gzip

    opener = gzip.open if _gzipped(path) else open
    with opener(path, "rb") as f:
        first = f.readline()
    try:
        line = first.decode("utf-8-sig").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path.name}:1: the header line is not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
                         f"offset {exc.start}); save the file as UTF-8") from None
    if not line:
        raise ValueError(f"{path.name}: empty file (a CSV / TSV needs a header line naming its columns)")
    return [c.strip().strip('"') for c in line.split(delimiter)]


def _check_names(where: str, names: list[str], cols: list[str]) -> None:
    """Refuse a header that names a column the schema reads more than once (which one was meant cannot be told)."""
    twice = {c: [i + 1 for i, n in enumerate(names) if n == c] for c in cols}
    twice = {c: at for c, at in twice.items() if len(at) > 1}
    if twice:
        said = "; ".join(f"{c!r} is columns {', '.join(map(str, at))}" for c, at in twice.items())
        raise ValueError(f"{where}: the header names a column the schema reads more than once ({said}): rename them "
                         f"so each name is one column")


def _floats(arr) -> tuple[np.ndarray, np.ndarray]:
    """(float64 values with NaN where missing, bad mask) of any Arrow column (text that is no number is bad)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_boolean(arr.type):
        arr = pc.cast(arr, pa.int8())
    if pa.types.is_timestamp(arr.type) or pa.types.is_date(arr.type):
        arr = pc.cast(pc.cast(arr, pa.timestamp("s")), pa.int64())
    present = ~np.asarray(arr.is_null().to_numpy(zero_copy_only=False), bool)
    try:
        vals = pc.cast(arr, pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64)  # nulls -> NaN
        return vals, present & np.isinf(vals)  # inf / -inf (or a number too large): NaN is missing, as pandas says
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    out, bad = np.full(len(arr), np.nan), np.zeros(len(arr), bool)
    for i, v in enumerate(arr.to_pylist()):  # the slow path, only for a block holding a bad value
        if v is None:
            continue
        try:
            out[i] = float(v)
        except (TypeError, ValueError):
            bad[i] = True
    return out, bad | (present & np.isinf(out))


def _times(arr) -> tuple[np.ndarray, np.ndarray]:
    """(seconds as float64, bad mask): numbers (seconds), or ISO-8601 date / time text (UTC unless it says its
    offset), each value read as what it is, so one column may mix them; a missing time is bad."""
    import pyarrow as pa
    import pyarrow.compute as pc

    vals, bad = _floats(arr)
    if bad.any() and pa.types.is_string(arr.type):
        idx = np.flatnonzero(bad)
        text = arr.take(pa.array(idx))
        try:  # the whole block's dates at once
            ts = pc.cast(pc.cast(text, pa.timestamp("s")), pa.int64()).to_numpy(zero_copy_only=False)
            vals[idx], bad[idx] = ts.astype(np.float64), False
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            for i, v in zip(idx, text.to_pylist()):  # the slow path: dates of several forms in one block
                t = _iso_seconds(v)
                if t is not None:
                    vals[i], bad[i] = t, False
    return vals, bad | np.isnan(vals)


def _iso_seconds(text: str | None) -> float | None:
    from datetime import datetime, timezone

    try:
        t = datetime.fromisoformat(text.strip())
    except (AttributeError, ValueError):
        return None
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()


def _labels(chunk: Chunk, schema: Schema) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow as pa

    rule, arr = schema.label, chunk.columns[schema.label.column]
    if rule.op is not None and isinstance(rule.value, str):
        text = np.asarray(arr.cast(pa.string()).to_pylist(), dtype=object)
        return OPS[rule.op](text, rule.value).astype(np.int8), np.asarray([v is None for v in text])
    if pa.types.is_string(arr.type) and rule.op is None:
        low = np.asarray([None if v is None else v.strip().lower() for v in arr.to_pylist()], dtype=object)
        y = np.isin(low, ["1", "true", "1.0"])
        return y.astype(np.int8), ~(y | np.isin(low, ["0", "false", "0.0"]))
    vals, bad = _floats(arr)
    bad |= np.isnan(vals)
    if rule.op is None:
        bad |= ~np.isin(vals, [0.0, 1.0])
        return (vals == 1).astype(np.int8), bad
    return OPS[rule.op](vals, rule.value).astype(np.int8), bad


def _keys(arr, seen: list | None = None) -> np.ndarray:
    """int64 key of every value (a hash of its text; missing -> MISSING's); ``seen`` gets the (keys, texts) of the
    distinct values, so a vocabulary can keep the values its keys stand for."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_string(arr.type) and not pa.types.is_large_string(arr.type):
        arr = pc.cast(arr, pa.string())
    enc = pc.dictionary_encode(arr.fill_null(MISSING))  # hash each distinct value once
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    texts = enc.dictionary.to_pylist()
    uniq = pd.util.hash_array(np.asarray(texts, dtype=object)).view(np.int64)
    if seen is not None:
        seen.append((uniq, texts))
    return uniq[enc.indices.to_numpy(zero_copy_only=False)] if len(uniq) else np.zeros(len(arr), np.int64)


def _multi_keys(arr, sep: str, seen: list | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(bag sizes [n], keys of the values, row-major) of a multi-hot column: empty and missing fields are empty
    bags, empty pieces (``a||b``) are dropped."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_string(arr.type):
        arr = pc.cast(arr, pa.string())
    lists = pc.split_pattern(arr.fill_null(""), sep)
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    flat = pc.list_flatten(lists)
    keep = pc.not_equal(flat, "").to_numpy(zero_copy_only=False)
    owner = np.repeat(np.arange(len(lengths)), lengths)[keep]
    keys = _keys(flat.filter(pa.array(keep)), seen)
    return np.bincount(owner, minlength=len(lengths)).astype(np.int64), keys


class Parsed:
    """The good rows of one chunk: labels, raw dense values (NaN missing), each field's keys, time."""

    def __init__(self, chunk: Chunk, schema: Schema, problems: Problems, strict: bool) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        n = len(chunk)
        bad = BadRows(n)
        if chunk.not_utf8:
            rows = np.zeros(n, bool)
            rows[list(chunk.not_utf8)] = True
            bad.flag(rows, lambda i: chunk.not_utf8[i])
        problems.rows += n
        self.labelled = schema.label.column in chunk.columns  # rows to score may come without their label
        labels = np.zeros(n, np.int8)
        if self.labelled:
            labels, badl = _labels(chunk, schema)
            col = chunk.columns[schema.label.column]
            bad.flag(badl, lambda i: f"label {schema.label} cannot be read from {col[i].as_py()!r}")
            unread = badl & ~np.asarray(col.is_null().to_numpy(zero_copy_only=False), bool)  # a value, not a label
            problems.label_bad += int(unread.sum())
            for i in np.flatnonzero(unread)[:MAX_EXAMPLES]:
                if len(problems.label_values) < MAX_EXAMPLES and repr(col[int(i)].as_py()) not in problems.label_values:
                    problems.label_values.append(repr(col[int(i)].as_py()))
        if strict:  # a NUL byte is no text a click log holds (and the key of a missing value carries one)
            for name, arr in chunk.columns.items():
                if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
                    nul = np.asarray(pc.fill_null(pc.match_substring(arr, "\x00"), False), bool)
                    bad.flag(nul, lambda i, name=name: f"{name}: a NUL byte in its text")
        dense = np.zeros((n, len(schema.dense)))
        for j, (name, tf) in enumerate(schema.dense):
            dense[:, j], badj = _floats(chunk.columns[name])
            bad.flag(badj, lambda i, name=name, j=j: f"dense {name} {chunk.columns[name][i].as_py()!r} is not a number"
                                                f"{'' if np.isnan(dense[i, j]) else ' that is finite'}")
            if tf != "log1p":  # features are float32 (log1p brings any float64 into range)
                huge = np.abs(np.nan_to_num(dense[:, j])) > F32_MAX
                bad.flag(huge, lambda i, name=name: f"dense {name} {chunk.columns[name][i].as_py()!r} is too large "
                                                    f"for a float32 feature (give the column the log1p transform)")
        time = None
        if schema.split.kind == "time":
            name = schema.split.column
            time, badt = _times(chunk.columns[name])
            bad.flag(badt, lambda i: f"time {name} {chunk.columns[name][i].as_py()!r} is not a number or an ISO date")
        bad.report(problems, chunk.at, np.arange(n), strict)
        keep = ~bad.mask
        self.kept_rows, self.chunk = np.flatnonzero(keep), chunk  # where each good row came from: chunk.at(i)
        self.labels, self.dense = labels[keep], dense[keep]
        self.time = time[keep] if time is not None else None
        self.fields: list[tuple[np.ndarray | None, np.ndarray]] = []  # (bag sizes or None, keys) per field
        self.values: list[list] = []  # per field: the (keys, texts) of its distinct values in this chunk
        for c in schema.categorical:
            arr = chunk.columns[c.name].filter(pa.array(keep))
            seen: list = []
            self.fields.append(_multi_keys(arr, c.sep, seen) if c.sep else (None, _keys(arr, seen)))
            self.values.append(seen)

    def __len__(self) -> int:
        return len(self.labels)


def read_rows(files: Sequence[Path], schema: Schema, problems: Problems, strict: bool,
          progress: Callable[[int], None] | None, optional: Sequence[str] = ()) -> Iterator[tuple[int, Parsed]]:
    """Each file's good rows, a chunk at a time. A file that cannot be read whole (truncated, corrupt) is a problem of
    the file (``problems.files``; strict: raised): the rows read before the break are kept, the rest is lost, and the
    file is named with how many rows it gave."""
    import pyarrow as pa

    for k, path in enumerate(files):
        seen, broken = 0, False
        try:
            for chunk in _chunks(path, schema, problems, strict, optional):
                rows = Parsed(chunk, schema, problems, strict)
                seen += len(rows)
                yield k, rows
        except (OSError, EOFError, pa.ArrowException) as exc:
            broken = True
            what = "dropped" if seen == 0 else f"cut short: its first {seen:,} good rows kept, the rest lost"
            problems.add_file(f"raw file {path.name}", f"{what} (unreadable or truncated: {exc})", strict)
        if progress:
            progress(path.stat().st_size)
        if seen == 0 and not broken:
            problems.add_file(f"raw file {path.name}", "dropped (no valid rows)", strict)


def hashed(c: Categorical, keys: np.ndarray) -> np.ndarray:
    return (keys.view(np.uint64) % np.uint64(c.hash)).astype(np.int64)


def split_ids(schema: Schema, per_file: Sequence[int], time: np.ndarray | None) -> np.ndarray:
    """The split (index into SPLITS) of every good row."""
    total = sum(per_file)
    sp = schema.split
    if sp.kind == "files":
        if len(per_file) <= sp.held:
            raise ValueError(f"split {sp}: needs more than {sp.held} raw file(s), got {len(per_file)}")
        cut = sum(per_file[: len(per_file) - sp.held])
        return np.repeat(np.array([0, 1], np.int8), [cut, total - cut])
    sizes = [int(round(f * total)) for f in sp.fractions]
    sizes.append(total - sum(sizes))
    ranked = np.repeat(np.arange(len(sizes), dtype=np.int8), sizes)  # by rank: earliest / first drawn -> train
    if sp.kind == "time":
        order = np.argsort(time, kind="stable")
    else:
        order = np.random.default_rng(sp.seed).permutation(total)
    ids = np.empty(total, np.int8)
    ids[order] = ranked
    return ids


class Writer(SplitWriter):
    """The arrays of one split (layout.SplitWriter), fed a chunk's rows at a time with their fields, counting the
    positive labels."""

    def __init__(self, d: Path, n: int, schema: Schema) -> None:
        super().__init__(d, n, len(schema.dense), len(schema.categorical), schema.multi_hot)
        self.positives = 0

    def write_rows(self, first: int, idx: np.ndarray, labels, dense,
                   fields: list[tuple[np.ndarray, np.ndarray]]) -> None:
        """Rows ``idx`` of a chunk whose first row is the source's good row ``first``; ``fields``: per field (bag
        sizes [n], ids row-major)."""
        self.positives += int(labels[idx].sum())
        if not self.multi_hot:
            self.write(first + idx, dense[idx], labels[idx], sparse=np.stack([ids[idx] for _, ids in fields], axis=1))
            return
        L, values = sample_major(fields, idx)
        self.write(first + idx, dense[idx], labels[idx], lengths=L, values=values)


def sample_major(fields: list[tuple[np.ndarray, np.ndarray]], idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bag sizes [m, T], values sample-major with the fields in order) of rows ``idx``; ``fields``: per field (bag
    sizes [n], ids row-major)."""
    m, T = len(idx), len(fields)
    L = np.stack([lens[idx] for lens, _ in fields], axis=1)  # [m, T]
    order_keys, vals = [], []
    for j, (lens, ids) in enumerate(fields):  # field j's values of rows idx, tagged (row, field)
        vals.append(run_values(lens, ids, idx))
        order_keys.append(np.repeat(np.arange(m) * T + j, lens[idx]))
    order = np.argsort(np.concatenate(order_keys), kind="stable")  # sample-major, fields in order
    return L, np.concatenate(vals)[order]


def split_said(schema: Schema, files: Sequence[Path], sizes: dict[str, int]) -> str:
    """How the rows were split, in words: the rows per split, and for a split by files which files went where."""
    sp = schema.split
    rows = ", ".join(f"{s} {n:,}" for s, n in sizes.items())
    if sp.kind != "files":
        return f"split {sp}: {rows} rows"
    names = [f.name for f in files]
    cut = len(names) - sp.held
    return (f"split {sp} (the last {sp.held} file(s) in the order given; a folder or glob is in name order): "
            f"{rows} rows; training on {', '.join(names[:cut])}; held out: {', '.join(names[cut:])}")


SAMPLE_ROWS = 1000  # rows of the first file read to tell which columns hold numbers (--dense "*")


def _sample(path: Path, delimiter: str | None) -> dict[str, Any]:
    """The first rows of a raw file, every column (text columns as text)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    kind = _kind(path, delimiter)
    if kind == "parquet":
        batch = next(pq.ParquetFile(path).iter_batches(batch_size=SAMPLE_ROWS), None)
        return {} if batch is None else {n: batch.column(n) for n in batch.schema.names}
    header = _header(path, kind)
    reader = pcsv.open_csv(
        pa.input_stream(str(path), compression="gzip" if _gzipped(path) else None),
        read_options=pcsv.ReadOptions(use_threads=False, block_size=1 << 20),
        parse_options=pcsv.ParseOptions(delimiter=kind, invalid_row_handler=lambda row: "skip"),
        convert_options=pcsv.ConvertOptions(column_types={c: pa.string() for c in header}, strings_can_be_null=True))
    try:
        batch = reader.read_next_batch()
    except StopIteration:
        return {c: pa.array([], pa.string()) for c in header}
    return {n: batch.column(n).slice(0, SAMPLE_ROWS) for n in batch.schema.names}


def _not_numeric(arr) -> str | None:
    """None when every present value of a sampled column is a number (and one is present), else an example why."""
    vals, bad = _floats(arr)
    if bad.any():
        return f"{arr[int(np.flatnonzero(bad)[0])].as_py()!r} is not a number"
    if np.isnan(vals).all():
        return "no value in the sampled rows"
    return None


def resolve_dense(schema: Schema, files: Sequence[Path]) -> tuple[Schema, str | None]:
    """The schema with its dense patterns (``*``: every numeric column not named otherwise; a glob such as ``f_*``:
    the columns it matches, each of which must hold numbers) put as the columns of the first file's header, in
    header order, numeric told by its first SAMPLE_ROWS rows; and what they became, in words (None: no pattern)."""
    import fnmatch

    patterns = [(n, tf) for n, tf in schema.dense if is_pattern(n)]
    if not patterns:
        return schema, None
    sample = _sample(Path(files[0]), schema.delimiter)
    named = {schema.label.column, *(c.name for c in schema.categorical), *(n for n, _ in schema.dense
                                                                           if not is_pattern(n))}
    if schema.split.kind == "time":
        named.add(schema.split.column)
    dense, said, taken = [(n, tf) for n, tf in schema.dense if not is_pattern(n)], [], set(named)
    for pattern, tf in patterns:
        got = []
        for col in sample:
            if col in taken or not fnmatch.fnmatchcase(col, pattern):
                continue
            why = _not_numeric(sample[col])
            if why is not None:
                if pattern == "*":
                    continue  # every numeric column: this one is not
                raise ValueError(f"--dense {pattern!r} matches column {col!r}, which does not hold numbers in "
                                 f"{Path(files[0]).name}'s first rows ({why}): narrow the pattern, or name it as "
                                 f"categorical")
            got.append(col)
        if not got:
            raise ValueError(f"--dense {pattern!r} matches no {'numeric ' if pattern == '*' else ''}column not named "
                             f"otherwise; {Path(files[0]).name} has {list(sample)}")
        taken.update(got)
        dense += [(c, tf) for c in got]
        shown = ", ".join(got[:10]) + (f" and {len(got) - 10} more" if len(got) > 10 else "")
        said.append(f"dense {pattern!r} ({tf}): {len(got)} column(s): {shown}")
    import dataclasses

    return dataclasses.replace(schema, dense=tuple(dense)), "; ".join(said)


def prepare_tabular(files: Sequence[Path], schema: Schema, out: Path, name: str = "tabular", strict: bool = False,
                    progress: Callable[[int], None] | None = None) -> Prepared:
    """Prepare ``files`` as ``schema`` says (its dense patterns resolved against the first file: resolve_dense)."""
    files = [Path(f) for f in files]
    for f in files:
        _kind(f, schema.delimiter)
    schema, dense_said = resolve_dense(schema, files)
    raw = content_key(files)
    key = {"format": "tabular", "raw files": raw, "schema": schema.to_dict(), "strict": strict, "vocabulary": VOCABULARY}
    with staged(Path(out), "prepared", key, files) as stage:
        if stage.reused:
            return load_prepared(Path(out))
        partial = stage.path
        problems = Problems()
        per_file = [0] * len(files)
        times = []
        for k, rows in read_rows(files, schema, problems, strict, progress):
            per_file[k] += len(rows)
            if rows.time is not None:
                times.append(rows.time)
        total = sum(per_file)
        if total == 0:
            raise ValueError(f"{name}: no valid rows in {[f.name for f in files]}; e.g. "
                             f"{(problems.files + problems.examples)[:3]}")
        _check_labels(schema, problems)
        ids = split_ids(schema, per_file, np.concatenate(times) if times else None)
        sizes = {s: int((ids == k).sum()) for k, s in enumerate(SPLITS)}
        sizes = {s: n for s, n in sizes.items() if n}
        if "train" not in sizes or len(sizes) < 2:
            raise ValueError(f"{name}: split {schema.split} of {total} rows leaves {sizes}: a training and a held-out "
                             f"split need rows")
        plan = SplitPlan(sizes, ids=ids)
        vocabs = {j: TrainVocabulary() for j, c in enumerate(schema.categorical) if not c.hash}  # hashed: none
        writers = {s: Writer(partial / s, n, schema) for s, n in sizes.items()}
        preallocate(partial)  # the arrays' room taken now: a full device is DiskFull, never SIGBUS
        pos = 0
        stats = np.zeros((3, len(schema.dense)))  # training rows: count, sum, sum of squares of present values
        for _, rows in read_rows(files, schema, Problems(), False, None):
            n = len(rows)
            fields = [(lens if lens is not None else np.ones(n, np.int64),
                       vocabs[j].ids(keys, rows.values[j]) if j in vocabs else hashed(c, keys))
                      for j, (c, (lens, keys)) in enumerate(zip(schema.categorical, rows.fields))]
            dense = transformed(rows.dense, schema)
            for split, idx in plan.assign(pos, n):
                if not len(idx):
                    continue
                writers[split].write_rows(pos, idx, rows.labels, dense, fields)
                if split == "train":
                    present = ~np.isnan(dense[idx])
                    x = np.where(present, dense[idx], 0.0)
                    stats += [present.sum(0), x.sum(0), (x * x).sum(0)]
                    for j, v in vocabs.items():  # the vocabulary is fitted on the training rows only
                        v.count(run_values(*fields[j], idx))
            pos += n
        if pos != total or {s: w.at for s, w in writers.items()} != sizes:
            raise ValueError(f"{name}: the second pass read {pos:,} rows, the first {total:,}; did a file change?")
        warnings = problems.files + _one_class(schema, {s: (w.positives, w.at) for s, w in writers.items()})
        scale = _finish_dense(writers, schema, stats)
        fitted = {j: v.final(schema.categorical[j].min_count) for j, v in vocabs.items()}
        _remap(partial, writers, {j: remap for j, (remap, _, _) in fitted.items()})
        cards = [c.hash if c.hash else len(fitted[j][1]) + 1 for j, c in enumerate(schema.categorical)]
        write_vocab(partial, [schema.categorical[j].name for j in fitted], [k for _, k, _ in fitted.values()],
                    [t for _, _, t in fitted.values()])
        meta = Prepared(name, Path(out), sizes, cards, problems.count, problems.examples, None, 0,
                        [c.name for c in schema.categorical], len(schema.dense),
                        layout="multi-hot" if schema.multi_hot else "one-hot", raw=raw, key=key,
                        schema={"columns": schema.to_dict(), "dense_scale": scale,
                                "dense_names": [d for d, _ in schema.dense],
                                "split": split_said(schema, files, sizes), "vocabulary": VOCABULARY,
                                **({"dense_resolved": dense_said} if dense_said else {})},
                        warnings=warnings)
        write_meta(partial, meta)
    return meta


# a label column where more lines than this share (and more than MAX_EXAMPLES lines) hold a value that is not a label
# is read with the wrong rule: a few such lines are bad lines, dropped and counted
LABEL_BAD_MAX = 0.01


def _remap(partial: Path, writers: dict[str, "Writer"], maps: dict[int, np.ndarray]) -> None:
    """Put every split's provisional ids of the vocabulary fields through their final map (the arrays are closed)."""
    if not maps:
        return
    for split, w in writers.items():
        arrays = id_arrays(partial / split, w.multi_hot)
        if "sparse" in arrays:
            remap_columns(arrays["sparse"], maps)
        elif "values" in arrays:
            remap_values(arrays["values"], arrays["lengths"], arrays["row_offsets"], maps)
        for a in arrays.values():
            if isinstance(a, np.memmap) and a.mode == "r+":
                a.flush()


def _check_labels(schema: Schema, problems: Problems) -> None:
    """Refuse a label whose values cannot be read on more than LABEL_BAD_MAX of the lines (0/1/2/5 counts with no
    rule: half the log would be dropped as malformed), naming the values and the rule that is likely wanted. A
    missing label is a bad line, not counted here."""
    if problems.label_bad <= max(LABEL_BAD_MAX * problems.rows, MAX_EXAMPLES):
        return
    col = schema.label.column
    hint = (f"give a rule that makes it 0/1, e.g. --label '{col}>=1' (or label = \"{col}>=1\" in a schema)"
            if schema.label.op is None else "check the rule and the column")
    raise ValueError(f"label {schema.label}: {problems.label_bad:,} of {problems.rows:,} lines "
                     f"({problems.label_bad / problems.rows:.1%}) have a value that is not a label (e.g. "
                     f"{', '.join(problems.label_values[:5])}): {hint}")


def _one_class(schema: Schema, counts: dict[str, tuple[int, int]]) -> list[str]:
    """Refuse a label rule that gives one class over every row (nothing to learn, AUC undefined); a split with one
    class is a warning (its AUC is undefined). ``counts``: split -> (positives, rows)."""
    pos, rows = sum(p for p, _ in counts.values()), sum(n for _, n in counts.values())
    if pos in (0, rows):
        raise ValueError(f"label {schema.label} gives one class: {pos:,} of {rows:,} rows are 1; a model needs both "
                         f"classes (check the rule and the column)")
    return [f"split {s}: label {schema.label} gives one class ({p:,} of {n:,} rows are 1): AUC on it is undefined"
            for s, (p, n) in counts.items() if p in (0, n)]


def transformed(raw: np.ndarray, schema: Schema) -> np.ndarray:
    out = raw.copy()
    for j, (_, tf) in enumerate(schema.dense):
        if tf == "log1p":
            out[:, j] = np.log1p(np.maximum(raw[:, j], 0))
    return out


def _finish_dense(writers: dict[str, Writer], schema: Schema, stats: np.ndarray) -> dict[str, list[float]]:
    """Standardize with the training rows' mean / std, missing -> 0, flush everything; the (mean, std) used."""
    count, s1, s2 = stats
    mean = np.divide(s1, count, out=np.zeros_like(s1), where=count > 0)
    std = np.sqrt(np.maximum(np.divide(s2, count, out=np.zeros_like(s2), where=count > 0) - mean**2, 0))
    std = np.where(std > 0, std, 1.0)
    shift = np.array([mean[j] if tf == "standardize" else 0.0 for j, (_, tf) in enumerate(schema.dense)])
    div = np.array([std[j] if tf == "standardize" else 1.0 for j, (_, tf) in enumerate(schema.dense)])
    scale = {"mean": shift.tolist(), "std": div.tolist()}
    for w in writers.values():
        for lo in range(0, len(w.dense), 1 << 20):
            w.dense[lo : lo + (1 << 20)] = standardized(w.dense[lo : lo + (1 << 20)], scale)
        w.close()
    return scale


def standardized(features: np.ndarray, scale: dict[str, list[float]]) -> np.ndarray:
    """float32 features (after their transform) standardized with the training split's (mean, std), missing -> 0."""
    block = np.asarray(features, dtype=np.float32).astype(np.float64)
    return np.nan_to_num((block - np.asarray(scale["mean"])) / np.asarray(scale["std"]), nan=0.0).astype(np.float32)
