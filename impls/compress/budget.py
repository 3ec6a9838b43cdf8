"""Sizing a compressed collection from a byte budget, the same way for every method: tables with fewer than
``min_rows`` rows stay dense (fp32, as the dlrm tricks' thresholds keep them), and the rest share what the budget
leaves in proportion to their dense bytes (every compressed table shrinks by the same factor), except that a table
gets at least the least its method can hold (``least``: QR's two tables near sqrt(N) rows each, one row of a
hashed table), the others then shrinking a little more. Budgets count parameter bytes only: an optimizer's state
follows the parameters (Adagrad doubles both sides alike)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from impls import table_options
from impls.api import TableSpec

# every method's default size: a quarter of the dense bytes (MD's narrowest rows, dim 1, are 1/16 of a 16-wide
# table: a tenth would leave it no room), tables under 1,000 rows dense
BUDGET, MIN_ROWS = 0.25, 1000


@dataclass(frozen=True)
class Share:
    """What one table may hold: None = stays dense, else its compressed part's target fp32 bytes."""

    table: TableSpec
    target_bytes: int | None

    @property
    def dense(self) -> bool:
        return self.target_bytes is None


def shares(tables: Sequence[TableSpec], budget: float, min_rows: int, method: str,
           least: Callable[[TableSpec], int] = lambda t: 0) -> list[Share]:
    """Each table's share of ``budget`` (a fraction of the collection's dense bytes, 0 < budget <= 1); ValueError
    naming what does not fit."""
    if not 0 < budget <= 1:
        raise ValueError(f"{method}: budget is a fraction of the dense tables' bytes in (0, 1], got {budget}")
    if min_rows < 0:
        raise ValueError(f"{method}: min_rows must be >= 0, got {min_rows}")
    total = sum(t.dense_bytes for t in tables)
    small = [t for t in tables if t.num_embeddings < min_rows]
    left = budget * total - sum(t.dense_bytes for t in small)
    big = sum(t.dense_bytes for t in tables if t.num_embeddings >= min_rows)
    if left < 0 or (big and left <= 0):
        raise ValueError(f"{method}: a budget of {budget:g} x {total:,} B = {budget * total:,.0f} B is spent by the "
                         f"{len(small)} tables under min_rows={min_rows} that stay dense "
                         f"({total - big:,} B); raise the budget or min_rows")
    comp = [t for t in tables if t.num_embeddings >= min_rows]
    floor = {t.name: least(t) for t in comp}
    if sum(floor.values()) > left:
        worst = max(comp, key=lambda t: floor[t.name] / t.dense_bytes)
        raise ValueError(f"{method}: the {len(comp)} compressed tables need at least {sum(floor.values()):,} B "
                         f"({worst.name!r} alone {floor[worst.name]:,} B), the budget leaves them {left:,.0f} B")

    def used(f: float) -> float:
        return sum(max(floor[t.name], f * t.dense_bytes) for t in comp)

    lo, hi = 0.0, (left / big if big else 1.0)
    for _ in range(60):  # the largest common factor whose shares (each at least its floor) fit what is left
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if used(mid) <= left else (lo, mid)
    return [Share(t, None if t.num_embeddings < min_rows else int(max(floor[t.name], lo * t.dense_bytes)))
            for t in tables]


def per_table(value: Any, tables: Sequence[TableSpec], what: str) -> list[Any]:
    """An option given for every table or as a ``{table: value}`` mapping, read for each table (None: unset)."""
    names = [t.name for t in tables]
    return [table_options.value_for(value, t.name, what, names) for t in tables]



def tt_rank_for_budget(cls: type, tables: Sequence[TableSpec], budget: float, options: dict[str, Any],
                       ranks: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128)) -> int:
    """The largest TT rank (one for every TT table, as TT-Rec sets it) from ``ranks`` whose collection of TT system
    ``cls`` under ``options`` (its tt_min_rows, cores, ...) fits ``budget`` of the dense tables' bytes; ValueError
    when even the smallest does not."""
    limit = budget * sum(t.dense_bytes for t in tables)
    fits = [r for r in ranks if sum(cls.table_param_bytes(tables, {**options, "ranks": r})) <= limit]
    if not fits:
        least = sum(cls.table_param_bytes(tables, {**options, "ranks": min(ranks)}))
        raise ValueError(f"{cls.name}: rank {min(ranks)} already holds {least:,} B, over a budget of {budget:g} x the "
                         f"dense tables = {limit:,.0f} B")
    return max(fits)


def options_for_budget(cls: type, tables: Sequence[TableSpec], budget: float, options: dict[str, Any]) -> dict[str, Any]:
    """The options that size system ``cls`` (beside its ``options``) to ``budget`` of the dense tables' bytes: a
    method sized by a budget (hash, qr, md) takes it as is; a TT system the largest rank that fits
    (``tt_rank_for_budget``). ValueError when the method cannot fit the budget (naming why), or has no size to set."""
    names = set(cls.option_names())
    if "budget" in names:
        sized = {**options, "budget": budget}
        cls.table_param_bytes(tables, sized)  # what does not fit is refused here, by the method's own rule
        return {"budget": budget}
    if "ranks" in names and hasattr(cls, "table_param_bytes"):
        return {"ranks": tt_rank_for_budget(cls, tables, budget, options)}
    raise ValueError(f"{cls.name}: no size to set from a budget (its tables hold their own bytes)")
