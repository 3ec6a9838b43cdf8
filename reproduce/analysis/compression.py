"""TT-Rec's model-size claims as parameter-count arithmetic on the real cardinalities: compress the k largest
tables with 3 TT cores (FBTT's suggested shapes) at rank r, keep the rest dense; the ratio is the dense
model's embedding parameters over the compressed model's. Published (TT-Rec, MLSys'21): Kaggle 4x to
221x ("117x" in the arXiv abstract), Terabyte 112x; ranks {8, 16, 32, 64}, the 3/5/7 largest tables."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from impls.core import tt
from impls.data.datasets_facts import manifest_cardinalities

# (dataset, cardinality variant in its manifest, embedding dim of the MLPerf/dlrm config)
CONFIGS = (("criteo-kaggle", "raw", 16), ("criteo-terabyte", "max_ind_range_10m_subsample_0875", 64))


def model_ratio(rows: Sequence[int], dim: int, k: int, rank: int) -> float:
    largest = set(sorted(range(len(rows)), key=lambda i: -rows[i])[:k])
    dense = sum(rows) * dim
    compressed = sum(rows[i] * dim for i in range(len(rows)) if i not in largest)
    compressed += sum(tt.TTShape.create(rows[i], dim, rank).num_params for i in largest)
    return dense / compressed


def compression_table(ks: Sequence[int] = (3, 5, 7), ranks: Sequence[int] = (8, 16, 32, 64)) -> pd.DataFrame:
    out = []
    for name, variant, dim in CONFIGS:
        rows = manifest_cardinalities(name, variant)
        for k in ks:
            for r in ranks:
                out.append({"dataset": name, "variant": variant, "dim": dim, "tt_tables": k, "rank": r,
                            "ratio": model_ratio(rows, dim, k, r)})
    return pd.DataFrame(out)
