"""Per-table options: a value for every table, or a ``{table name: value}`` mapping that sets tables one by one.

``value_for`` reads one table's value (and refuses a mapping naming a table the collection does not have);
``restrict`` cuts every per-table option down to some of the tables, for a collection built over a part of them
(a rank's shard, one stage of a pipeline). A system whose options also name tables in another form (a list, as
the TT systems' ``tt_tables``) restricts those in its ``EmbeddingCollection.options_for_tables``."""
from __future__ import annotations

from typing import Any, Iterable, Mapping


def value_for(value: Any, table: str, what: str, known: Iterable[str]) -> Any:
    """``value`` for ``table`` (None when a mapping leaves it out); ValueError when a mapping names an unknown
    table (``what`` names the option in the message)."""
    if isinstance(value, Mapping):
        known = set(known)
        unknown = set(value) - known
        if unknown:
            raise ValueError(f"{what} names unknown table(s) {sorted(unknown)}; tables: {sorted(known)}")
        return value.get(table)
    return value


def restrict(options: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """``options`` with every ``{table: value}`` mapping cut down to the tables in ``names``."""
    names = set(names)
    return {k: {t: x for t, x in v.items() if t in names} if isinstance(v, Mapping) else v
            for k, v in options.items()}
