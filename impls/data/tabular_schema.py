"""What `data prepare tabular` reads from a click log: the label (a 0/1 column or a rule such as ``rating >= 4``),
the dense columns and their transform, the categorical columns (a vocabulary of the values seen, or hashed into
buckets; optionally multi-hot with a separator), and the split (by time, seeded random, or by file). Given as a
``schema.toml`` or as flags; both end in one ``Schema`` (its ``to_dict`` goes into the dataset's meta.json).

schema.toml::

    label = "rating >= 4"          # or a 0/1 column: label = "click"
    split = "time:ts:0.8"          # time:COLUMN[:TRAIN[,VAL]] | random[:SEED[:TRAIN[,VAL]]] | files[:K]
    delimiter = ","                # optional: by extension (.csv ",", .tsv "\\t")
    [dense]                        # column = "standardize" | "log1p" | "none"
    hour = "log1p"
    age = "standardize"
    "f_*" = "standardize"          # a glob: the columns it matches; "*": every numeric column not named otherwise
    [categorical]                  # column = {} or { min_count = N, hash = BUCKETS, sep = "|" }
    user = {}
    item = { min_count = 2 }
    genre = { sep = "|" }
"""
from __future__ import annotations

import operator
import re
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

TRANSFORMS = ("standardize", "log1p", "none")
OPS = {">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt, "<": operator.lt}
_RULE = re.compile(r"^\s*(.+?)\s*(>=|<=|==|!=|>|<)\s*(.+?)\s*$")


@dataclass(frozen=True)
class LabelRule:
    """The label: ``column`` itself (0/1, true/false) or ``column OP value`` (value a number, or a string for
    == / !=)."""

    column: str
    op: str | None = None
    value: float | str | None = None

    @staticmethod
    def parse(text: str) -> "LabelRule":
        m = _RULE.match(text)
        if not m:
            if not text.strip():
                raise ValueError("the label is empty: name a 0/1 column or give a rule such as 'rating >= 4'")
            return LabelRule(text.strip())
        column, op, raw = m.groups()
        raw = raw.strip().strip("'\"")
        try:
            value: float | str = float(raw)
        except ValueError:
            if op not in ("==", "!="):
                raise ValueError(f"label rule {text!r}: {op} needs a number, got {raw!r}") from None
            value = raw
        return LabelRule(column, op, value)

    def __str__(self) -> str:
        return self.column if self.op is None else f"{self.column} {self.op} {self.value}"


@dataclass(frozen=True)
class Categorical:
    name: str
    min_count: int = 0  # values seen fewer times share id 0 (vocabulary mode)
    hash: int | None = None  # buckets: id = hash(value) % buckets, no vocabulary
    sep: str | None = None  # multi-hot: the separator between the values of one field

    def __post_init__(self) -> None:
        for k, want in (("min_count", int), ("hash", int), ("sep", str)):
            v = getattr(self, k)
            if v is not None and (not isinstance(v, want) or isinstance(v, bool)):
                raise ValueError(f"categorical {self.name!r}: {k} must be {'a whole number' if want is int else 'text'}"
                                 f", got {v!r}")
        if self.min_count < 0 or (self.hash is not None and self.hash <= 0):
            raise ValueError(f"categorical {self.name!r}: min_count must be >= 0 and hash > 0, got {self.min_count}, "
                             f"{self.hash}")
        if self.hash is not None and self.min_count > 1:
            raise ValueError(f"categorical {self.name!r}: a hashed field keeps every value (no min_count)")
        if self.sep == "":
            raise ValueError(f"categorical {self.name!r}: the multi-hot separator is empty")


@dataclass(frozen=True)
class SplitSpec:
    """``time``: the earliest TRAIN share of rows by ``column`` train, then VAL, the latest rows test (ties keep
    file order); ``random``: a seeded partition with exactly those shares; ``files``: the last ``held`` files are
    the held-out split ``val``, the others train. Without VAL the held-out rows are ``val``."""

    kind: str
    column: str | None = None
    seed: int = 0
    fractions: tuple[float, ...] = (0.8,)
    held: int = 1

    @staticmethod
    def parse(text: str) -> "SplitSpec":
        kind, _, rest = text.strip().partition(":")
        parts = rest.split(":") if rest else []
        try:
            if kind == "time":
                if not parts or not parts[0]:
                    raise ValueError("time needs a column: time:COLUMN[:TRAIN[,VAL]]")
                spec = SplitSpec("time", column=parts[0], fractions=_fractions(parts[1] if len(parts) > 1 else None))
                if len(parts) > 2:
                    raise ValueError("too many parts")
                return spec
            if kind == "random":
                if len(parts) > 2:
                    raise ValueError("too many parts")
                return SplitSpec("random", seed=int(parts[0]) if parts and parts[0] else 0,
                                 fractions=_fractions(parts[1] if len(parts) > 1 else None))
            if kind == "files":
                held = int(parts[0]) if parts else 1
                if held < 1 or len(parts) > 1:
                    raise ValueError("files takes one count of held-out files >= 1")
                return SplitSpec("files", held=held)
        except ValueError as exc:
            raise ValueError(f"split {text!r}: {exc}") from None
        raise ValueError(f"split {text!r}: use time:COLUMN[:TRAIN[,VAL]], random[:SEED[:TRAIN[,VAL]]] or files[:K]")

    def __str__(self) -> str:
        frac = ",".join(f"{f:g}" for f in self.fractions)
        return {"time": f"time:{self.column}:{frac}", "random": f"random:{self.seed}:{frac}",
                "files": f"files:{self.held}"}[self.kind]


def _fractions(text: str | None) -> tuple[float, ...]:
    if text is None:
        return (0.8,)
    fr = tuple(float(x) for x in text.split(","))
    if not 1 <= len(fr) <= 2 or any(not 0 < f < 1 for f in fr) or sum(fr) > 1 + 1e-9:
        raise ValueError(f"fractions are TRAIN or TRAIN,VAL, each in (0, 1), summing to <= 1; got {text!r}")
    return fr


@dataclass(frozen=True)
class Schema:
    label: LabelRule
    dense: tuple[tuple[str, str], ...] = ()  # (column, transform)
    categorical: tuple[Categorical, ...] = ()
    split: SplitSpec = field(default_factory=lambda: SplitSpec("random"))
    delimiter: str | None = None

    def __post_init__(self) -> None:
        if not self.categorical:
            raise ValueError("the schema names no categorical column: a DLRM needs at least one embedding table")
        seen = [d for d, _ in self.dense] + [c.name for c in self.categorical]
        dupes = sorted({n for n in seen if seen.count(n) > 1})
        if dupes:
            raise ValueError(f"column(s) {dupes} named twice among the dense and categorical columns")
        if self.label.column in seen:
            raise ValueError(f"the label column {self.label.column!r} is also a feature")
        for name, tf in self.dense:
            if tf not in TRANSFORMS:
                raise ValueError(f"dense column {name!r}: transform {tf!r} is not one of {TRANSFORMS}")

    @property
    def columns(self) -> list[str]:
        """Every column read (label, dense, categorical, the time column)."""
        cols = [self.label.column, *(d for d, _ in self.dense), *(c.name for c in self.categorical)]
        if self.split.kind == "time" and self.split.column not in cols:
            cols.append(self.split.column)
        return cols

    @property
    def multi_hot(self) -> bool:
        return any(c.sep for c in self.categorical)

    def to_dict(self) -> dict[str, Any]:
        return {"label": str(self.label), "dense": dict(self.dense), "split": str(self.split),
                "categorical": {c.name: {k: v for k, v in asdict(c).items() if k != "name" and v not in (None, 0)}
                                for c in self.categorical},
                **({"delimiter": self.delimiter} if self.delimiter else {})}

    @staticmethod
    def from_dict(d: dict[str, Any], where: str = "schema") -> "Schema":
        bad = sorted(set(d) - {"label", "dense", "categorical", "split", "delimiter"})
        if bad:
            raise ValueError(f"{where}: unknown key(s) {bad}; keys: label, dense, categorical, split, delimiter")
        if "label" not in d:
            raise ValueError(f"{where}: no label (a 0/1 column, or a rule such as 'rating >= 4')")
        if not isinstance(d.get("dense") or {}, dict) or not isinstance(d.get("categorical") or {}, dict):
            raise ValueError(f"{where}: dense and categorical are tables (column = ...)")
        cats = []
        for name, opts in (d.get("categorical") or {}).items():
            opts = opts or {}
            if not isinstance(opts, dict) or set(opts) - {"min_count", "hash", "sep"}:
                raise ValueError(f"{where}: categorical {name!r} takes a table of min_count, hash, sep; got {opts!r}")
            try:
                cats.append(Categorical(name, **opts))
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
        dense = tuple((name, tf) for name, tf in (d.get("dense") or {}).items())
        for k, v in (("label", d["label"]), ("split", d.get("split", "random")), ("delimiter", d.get("delimiter")),
                     *((f"dense {n!r} transform", tf) for n, tf in dense)):
            if v is not None and not isinstance(v, str):
                raise ValueError(f"{where}: {k} must be text, got {v!r}")
        return Schema(LabelRule.parse(str(d["label"])), dense, tuple(cats),
                      SplitSpec.parse(str(d.get("split", "random"))), d.get("delimiter"))

    @staticmethod
    def load(path: Path) -> "Schema":
        try:
            doc = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ValueError(f"schema file not found: {path}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{path}: invalid TOML: {exc}") from None
        return Schema.from_dict(doc, str(path))

    @staticmethod
    def from_flags(label: str, dense: str | None, categorical: str | None, split: str | None,
                   delimiter: str | None = None, freq_threshold: int = 0, buckets: int | None = None) -> "Schema":
        """``dense``: ``a,b:log1p`` (standardize unless named); ``categorical``: ``user,item:min_count=2,genre:sep=|``
        (``freq_threshold`` / ``buckets`` apply to every categorical column that does not say otherwise)."""
        dense_cols = []
        for item in _items(dense):
            name, _, tf = item.partition(":")
            dense_cols.append((name, tf or "standardize"))
        cats = []
        for item in _items(categorical):
            name, *mods = item.split(":")
            opts: dict[str, Any] = {}
            for m in mods:
                k, eq, v = m.partition("=")
                if not eq or k not in ("min_count", "hash", "sep"):
                    raise ValueError(f"categorical {item!r}: modifiers are min_count=N, hash=N, sep=X")
                try:
                    opts[k] = v if k == "sep" else int(v)
                except ValueError:
                    raise ValueError(f"categorical {item!r}: {k} must be a whole number, got {v!r}") from None
            if buckets and "hash" not in opts and "min_count" not in opts:
                opts["hash"] = buckets
            elif freq_threshold and "min_count" not in opts and "hash" not in opts:
                opts["min_count"] = freq_threshold
            cats.append(Categorical(name, **opts))
        return Schema(LabelRule.parse(label), tuple(dense_cols), tuple(cats), SplitSpec.parse(split or "random"),
                      delimiter)


def is_pattern(column: str) -> bool:
    """A dense column given as a pattern (``*``, a glob), put as columns when the raw files' header is read."""
    return any(c in column for c in "*?[")


def _items(text: str | None) -> list[str]:
    return [x.strip() for x in (text or "").split(",") if x.strip()]
