"""Lookup redundancy per source (preset, prepared dataset or trace file) and batch size: nnz, distinct ids U and
distinct TT prefix groups E1 (3 cores by default, FBTT's suggested p), the quantities that set the three TT
schedules' work (TTShape's work counts in impls/core/tt.py), and the share of lookups on the hottest 1% of rows. One
row per (source, batch, table) plus a total row per (source, batch)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import pandas as pd
import torch

from impls.core.tt import suggest_tt_shapes
from impls.core.tt_batch import redundancy
from impls.data.locality import batch_locality
from impls.data.sources import open_source

# the study's sources and batch sizes (`dlrmbench redundancy` without --data / -b, a step of `dlrmbench bench`)
SOURCES = ("criteo-kaggle", "criteo-terabyte-40m", "dcnv2-multihot", "sc24-f4", "sc24-f4-ranked")
BATCH_SIZES = (2048, 8192, 32768)


def top_share(values: torch.Tensor, rows: int, fraction: float = 0.01) -> float:
    """Share of the lookups that go to the hottest ``fraction`` of the table's rows (as seen here)."""
    if values.numel() == 0:
        return 0.0
    counts = torch.unique(values, return_counts=True)[1]
    k = max(1, math.ceil(fraction * rows))
    return float(torch.topk(counts, min(k, counts.numel())).values.sum()) / values.numel()


def measure(sources: Sequence[str], batch_sizes: Sequence[int], batches: int = 2, cores: int = 3,
            locality: bool = False, **data_options):
    """The redundancy table; with ``locality``, also the Locality of the first batch of the last source and
    batch size (for `data stats`)."""
    rows = []
    loc = None
    for name in sources:
        source = open_source(name, **data_options)
        tables = source.tables
        radix = [suggest_tt_shapes(t.num_embeddings, cores)[-1] for t in tables]
        for B in batch_sizes:
            for k in range(batches):
                sf = source.batch(k, B).sparse
                if locality and k == 0:
                    loc = batch_locality(sf)
                for i, t in enumerate(tables):
                    v, o = sf.table(i)
                    nnz, u, e1 = redundancy(v, o, B, radix[i])
                    rows.append({"data": name, "batch_size": B, "batch": k, "table": t.name,
                                 "rows": t.num_embeddings, "nnz": nnz, "unique": u, "e1": e1,
                                 "top1pct_share": top_share(v, t.num_embeddings)})
    df = pd.DataFrame(rows)
    per_table = df.groupby(["data", "batch_size", "table", "rows"], as_index=False, sort=False)[
        ["nnz", "unique", "e1", "top1pct_share"]].mean()
    per_table["hotness"] = per_table["nnz"] / per_table["batch_size"]
    total = per_table.groupby(["data", "batch_size"], as_index=False, sort=False)[["nnz", "unique", "e1"]].sum()
    total["table"], total["rows"] = "*", per_table.groupby(["data", "batch_size"], sort=False)["rows"].sum().values
    out = pd.concat([per_table, total], ignore_index=True)
    out["unique_per_nnz"] = out["unique"] / out["nnz"]
    out["e1_per_nnz"] = out["e1"] / out["nnz"]
    return (out, loc) if locality else out


def write(df: pd.DataFrame, out_csv: Path) -> Path:
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out_csv, index=False)
    return out_csv
