"""Streaming text input shared by the Criteo (TSV) and Avazu (CSV) readers: chunked reading of plain or gzip
files in whole lines, the per-line column-count check, vectorized hex parsing, and the record of malformed
lines (counted, with file:line examples; ``strict`` raises on the first)."""
from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

CHUNK_BYTES = 16 << 20  # whole lines per chunk: big enough to amortize, small enough to stay in cache
MAX_EXAMPLES = 10

_HEX = np.full(256, 255, dtype=np.uint8)
for _c in b"0123456789":
    _HEX[_c] = _c - ord("0")
for _c in b"abcdef":
    _HEX[_c] = _c - ord("a") + 10
    _HEX[_c - 32] = _c - ord("a") + 10


class MalformedInput(ValueError):
    """A bad line in strict mode (names file and line)."""


@dataclass
class Problems:
    """Bad lines and file errors seen while reading, with the first examples."""

    count: int = 0
    examples: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # raw files dropped or cut short, each said once with why
    rows: int = 0  # well-formed lines read (a label that cannot be read is one of them)
    label_bad: int = 0  # of those, lines whose label cannot be read
    label_values: list[str] = field(default_factory=list)  # a few of the values that could not be read as a label

    def add_file(self, where: str, reason: str, strict: bool) -> None:
        """A raw file that could not be read whole: a problem of the file, not a malformed line."""
        msg = f"{where}: {reason}"
        if strict:
            raise MalformedInput(msg)
        self.files.append(msg)

    def add(self, where: str, reason: str, strict: bool) -> None:
        msg = f"{where}: {reason}"
        if strict:
            raise MalformedInput(msg)
        self.count += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(msg)

    def add_many(self, found: Sequence[tuple[str, str]], total: int, strict: bool) -> None:
        """``total`` problems of which ``found`` (the first few, in order) are described."""
        for where, reason in found:
            self.add(where, reason, strict)
        self.count += total - len(found)


@dataclass
class Rows:
    """Parsed good rows of one chunk: labels int8 [n], dense int64 [n, num_dense] (raw counts), cats int64
    [n, num_cat] (raw categorical values)."""

    labels: np.ndarray
    dense: np.ndarray
    cats: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)

    @staticmethod
    def empty(num_dense: int, num_cat: int) -> "Rows":
        return Rows(np.zeros(0, np.int8), np.zeros((0, num_dense), np.int64), np.zeros((0, num_cat), np.int64))

    def keep(self, mask: np.ndarray) -> "Rows":
        return Rows(self.labels[mask], self.dense[mask], self.cats[mask])


class BadRows:
    """Per-row reasons of one chunk's well-formed lines: the first reason per row is kept for the report."""

    def __init__(self, n: int) -> None:
        self.mask = np.zeros(n, dtype=bool)
        self.reasons: dict[int, str] = {}

    def flag(self, mask: np.ndarray, what: Callable[[int], str]) -> None:
        for i in np.flatnonzero(mask & ~self.mask)[:MAX_EXAMPLES]:
            self.reasons.setdefault(int(i), what(int(i)))
        self.mask |= mask

    def report(self, problems: Problems, where: Callable[[int], str], line_of: np.ndarray, strict: bool) -> None:
        shown = sorted(self.reasons)[:MAX_EXAMPLES]
        problems.add_many([(where(int(line_of[i])), self.reasons[i]) for i in shown], int(self.mask.sum()), strict)


def well_formed_lines(buf: bytes, sep: bytes, num_cols: int, where: Callable[[int], str], problems: Problems,
                      strict: bool) -> tuple[bytes, np.ndarray]:
    """The lines of ``buf`` (whole lines, no trailing newline) with exactly ``num_cols`` fields, joined, and
    their line indices in ``buf``; the others are reported with their field count."""
    lines = buf.split(b"\n")
    arr = np.frombuffer(buf, dtype=np.uint8)
    ends = np.append(np.flatnonzero(arr == 10), len(arr))  # one past each line
    seps_before = np.searchsorted(np.flatnonzero(arr == ord(sep)), ends)
    per_line = np.diff(seps_before, prepend=0)
    ok = per_line == num_cols - 1
    wrong = np.flatnonzero(~ok)
    name = "tab" if sep == b"\t" else "comma"
    problems.add_many([(where(int(i)), f"expected {num_cols} {name}-separated columns, got {int(per_line[i]) + 1}")
                       for i in wrong[:MAX_EXAMPLES]], len(wrong), strict)
    good_idx = np.flatnonzero(ok)
    return b"\n".join(lines[i] for i in good_idx), good_idx


class Fields:
    """The fields of a buffer of well-formed lines (each with exactly ``num_cols`` fields), located without
    copying: field j of line i is ``buf[start[i, j] : start[i, j] + length[i, j]]``."""

    def __init__(self, buf: bytes, sep: bytes, num_cols: int) -> None:
        self.arr = np.frombuffer(buf, dtype=np.uint8)
        ends = np.flatnonzero((self.arr == ord(sep)) | (self.arr == 10))
        ends = np.append(ends, len(self.arr))  # the last line has no newline
        if len(ends) % num_cols:
            raise ValueError("Fields needs lines that all have exactly num_cols fields")
        starts = np.empty_like(ends)
        starts[0], starts[1:] = 0, ends[:-1] + 1
        self.start = starts.reshape(-1, num_cols)
        self.length = (ends - starts).reshape(-1, num_cols)

    def __len__(self) -> int:
        return len(self.start)

    def text(self, i: int, j: int) -> str:
        s = int(self.start[i, j])
        return self.arr[s : s + int(self.length[i, j])].tobytes().decode(errors="replace")

    def _chars(self, j: int, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(bytes [n, width] from field j's start, meaningful where ``present``; present mask; lengths)."""
        L = self.length[:, j]
        width = max(1, min(width, int(L.max()) if len(L) else 1))  # only as wide as the longest field
        pos = self.start[:, j, None] + np.arange(width, dtype=self.start.dtype)
        chars = self.arr.take(pos, mode="clip")
        present = np.arange(width) < L[:, None]
        return chars, present, L

    def hex(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """(values int64, bad mask) of field j as hex of at most 8 digits; empty -> 0."""
        chars, present, L = self._chars(j, 8)
        digits = _HEX[chars]
        bad = (L > 8) | ((digits == 255) & present).any(axis=1)
        val = np.zeros(len(L), dtype=np.int64)
        for i in range(chars.shape[1]):
            val = np.where(present[:, i], val * 16 + (digits[:, i] & 15), val)
        return val, bad

    def integer(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """(values int64, bad mask) of field j as a decimal integer (optional leading '-', at most 18 digits);
        empty -> 0."""
        chars, present, L = self._chars(j, 19)
        neg = (chars[:, 0] == ord("-")) & (L > 0)
        digit = (chars >= ord("0")) & (chars <= ord("9"))
        is_sign = np.zeros_like(present)
        is_sign[:, 0] = neg
        bad = (L > 19) | (present & ~digit & ~is_sign).any(axis=1) | (neg & (L == 1)) | ((L == 19) & ~neg)
        val = np.zeros(len(L), dtype=np.int64)
        d = chars.astype(np.int64) - ord("0")
        for i in range(chars.shape[1]):
            val = np.where(present[:, i] & digit[:, i], val * 10 + d[:, i], val)
        return np.where(neg, -val, val), bad

    def label(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """(0/1 int8, bad mask) of field j, which must be exactly '0' or '1'."""
        c = self.arr[np.minimum(self.start[:, j], len(self.arr) - 1)]
        ok = (self.length[:, j] == 1) & ((c == ord("0")) | (c == ord("1")))
        return np.where(ok, c - ord("0"), 0).astype(np.int8), ~ok


def well_formed_fields(buf: bytes, sep: bytes, num_cols: int, where: Callable[[int], str], problems: Problems,
                       strict: bool) -> tuple[Fields, np.ndarray] | None:
    """The Fields of ``buf``'s lines that have ``num_cols`` fields and their line indices (the others are
    reported), or None when no line is left."""
    if buf.endswith(b"\n"):
        buf = buf[:-1]
    if not buf:
        return None
    good, good_idx = well_formed_lines(buf, sep, num_cols, where, problems, strict)
    if not good_idx.size:
        return None
    return Fields(good, sep, num_cols), good_idx


def _gunzip(path: Path, piece: int = 1 << 20) -> Iterator[tuple[bytes, int]]:
    """(decompressed bytes, compressed bytes read so far) of a gzip file (several members too), streamed, so that
    everything before a cut is kept. A file cut short raises EOFError naming the compressed byte offset, after
    yielding all it could decompress."""
    d, started, consumed = zlib.decompressobj(31), False, 0
    with open(path, "rb") as f:
        while True:
            comp = f.read(piece)
            if not comp:
                break
            consumed += len(comp)
            while comp:
                started = True
                try:
                    out = d.decompress(comp)
                except zlib.error as exc:
                    raise EOFError(f"corrupt gzip data near compressed byte {consumed:,} ({exc})") from None
                if out:
                    yield out, consumed
                if not d.eof:
                    break
                comp, d, started = d.unused_data, zlib.decompressobj(31), False  # the next member
    if started and not d.eof:
        raise EOFError(f"the gzip stream ends early, at compressed byte {consumed:,} of the file")


def read_chunks(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[int, bytes, int]]:
    """(first line number, whole lines, bytes read so far) of a plain or gzip file, chunk by chunk. A truncated gzip
    yields every whole line before the cut, then raises EOFError with the byte offset (the cut line is dropped)."""
    if path.suffix == ".gz":
        pieces = _gunzip(path)
    else:
        def plain() -> Iterator[tuple[bytes, int]]:
            done = 0
            with open(path, "rb") as f:
                while data := f.read(chunk_bytes):
                    done += len(data)
                    yield data, done
        pieces = plain()
    line, buf, done = 1, bytearray(), 0
    try:
        for data, done in pieces:
            buf += data
            if len(buf) < chunk_bytes:
                continue
            cut = buf.rfind(b"\n")
            if cut < 0:
                continue
            body = bytes(buf[: cut + 1])
            del buf[: cut + 1]
            yield line, body, done
            line += body.count(b"\n")
    except EOFError as exc:
        cut = buf.rfind(b"\n")
        if cut >= 0:  # the whole lines before the cut are good rows
            yield line, bytes(buf[: cut + 1]), done
            line += buf[: cut + 1].count(b"\n")
        raise EOFError(f"{exc}; every whole line before it was read, line {line} was cut") from None
    if buf:
        yield line, bytes(buf) + (b"" if buf.endswith(b"\n") else b"\n"), done


# parse(buffer of whole lines without the last newline, where(i) -> "file:line" of line i) -> Rows
Parser = Callable[[bytes, Callable[[int], str]], Rows]


def iter_rows(files: Sequence[Path], parse: Parser, problems: Problems, strict: bool, header: bytes | None = None,
              chunk_bytes: int = CHUNK_BYTES, progress: Callable[[int], None] | None = None) -> Iterator[tuple[int, Rows]]:
    """(file index, parsed rows) chunk by chunk over all files. With ``header``, each file's first line must be
    exactly that header (a file with another first line is reported and skipped: its column order is unknown).
    File-level problems (empty, truncated gzip) are reported like bad lines."""
    for k, path in enumerate(files):
        seen, last, broken = 0, 0, False
        try:
            for first, body, done in read_chunks(path, chunk_bytes):
                if progress:
                    progress(done - last)
                last = done
                if first == 1 and body.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark, not data
                    body = body[3:]
                if first == 1 and header is not None:
                    top, _, body = body.partition(b"\n")
                    if top.rstrip(b"\r") != header:
                        problems.add(f"{path.name}:1", f"expected the header {header.decode()!r}, got "
                                     f"{top[:80].decode(errors='replace')!r}; file skipped", strict)
                        broken = True
                        break
                    first = 2
                if b"\r" in body:  # files written on Windows
                    body = body.replace(b"\r\n", b"\n")
                if body.endswith(b"\n"):
                    body = body[:-1]
                if not body:
                    continue
                rows = parse(body, lambda i, f=first: f"{path.name}:{f + i}")
                seen += len(rows)
                yield k, rows
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            problems.add(str(path.name), f"truncated or corrupt gzip after {seen} good rows ({exc})", strict)
            broken = True
        if seen == 0 and not broken:
            problems.add(str(path.name), "no valid rows (empty file?)", strict)
