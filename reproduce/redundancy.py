"""Lookup redundancy per synthetic preset and batch size: nnz, distinct ids U and distinct TT prefix
groups E1 (3 cores, FBTT's suggested p), the quantities that set the three TT schedules' work
(tt-systems.md §5). Writes one CSV row per (preset, batch, table) plus a total row per (preset, batch)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from impls.core.tt import suggest_tt_shapes
from impls.core.tt_batch import redundancy
from impls.data.presets import get_preset
from impls.data.synthetic import SyntheticSource


def measure(presets: Sequence[str], batch_sizes: Sequence[int], batches: int = 2, **data_options) -> pd.DataFrame:
    rows = []
    for name in presets:
        spec = get_preset(name, **data_options)
        source = SyntheticSource(spec)
        radix = [suggest_tt_shapes(t.num_embeddings, 3)[-1] for t in spec.tables]
        for B in batch_sizes:
            for k in range(batches):
                sf = source.batch(k, B).sparse
                for i, t in enumerate(spec.tables):
                    v, o = sf.table(i)
                    nnz, u, e1 = redundancy(v, o, B, radix[i])
                    rows.append({"data": name, "batch_size": B, "batch": k, "table": t.name,
                                 "rows": t.num_embeddings, "nnz": nnz, "unique": u, "e1": e1})
    df = pd.DataFrame(rows)
    per_table = df.groupby(["data", "batch_size", "table", "rows"], as_index=False, sort=False)[
        ["nnz", "unique", "e1"]].mean()
    total = per_table.groupby(["data", "batch_size"], as_index=False, sort=False)[["nnz", "unique", "e1"]].sum()
    total["table"], total["rows"] = "*", per_table.groupby(["data", "batch_size"], sort=False)["rows"].sum().values
    out = pd.concat([per_table, total], ignore_index=True)
    out["unique_per_nnz"] = out["unique"] / out["nnz"]
    out["e1_per_nnz"] = out["e1"] / out["nnz"]
    return out


def write(df: pd.DataFrame, out_csv: Path) -> Path:
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out_csv, index=False)
    return out_csv
