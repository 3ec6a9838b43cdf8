"""Named synthetic workloads with the real table cardinalities of the datasets they stand in for
(the Criteo Kaggle / Terabyte and Avazu files, MLPerf DLRMv2, Meta's dlrm_datasets traces, HugeCTR's EMBark
benchmarks):
criteo-kaggle, criteo-terabyte-40m, dcnv2-multihot (also EMBark's DLRM-DCNv2), avazu-like, embark-t180 /
t200 / t510, meta-2021 / meta-2022 (trace-calibrated locality), sc24-f4(-ranked), uniform. Overrides:
``dim``, ``hotness``, ``max_rows`` (dlrm's --max-ind-range: rows capped to the modulus), ``alpha``,
``locality``, ``bag_sizes``, ``seed``, ``num_dense``; ``uniform`` also takes ``num_tables`` and ``rows``,
the meta presets ``num_tables``."""
from __future__ import annotations

import math
from dataclasses import replace
from statistics import NormalDist
from typing import Any, Callable, Sequence

import numpy as np

from impls.api import TableSpec
from impls.data.columns import AVAZU_CAT, CRITEO_CAT
from impls.data.synthetic import SyntheticSpec, tables_from_rows

CRITEO_NAMES = CRITEO_CAT  # C1..C26, as the prepared data names its tables

# facebookresearch/dlrm Kaggle, no --max-ind-range (sum 33,762,577)
CRITEO_KAGGLE_ROWS = (
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
    27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572,
)
# Terabyte, dlrm --max-ind-range=40000000 (MLPerf v0.7 / HugeCTR slot_size_array; sum 187,767,399)
CRITEO_TERABYTE_40M_ROWS = (
    39884406, 39043, 17289, 7420, 20263, 3, 7120, 1543, 63, 38532951, 2953546, 403346, 10, 2208,
    11938, 155, 4, 976, 14, 39979771, 25641295, 39664984, 585935, 12972, 108, 36,
)
# MLPerf DLRMv2 (DCNv2) --num_embeddings_per_feature (sum 204,184,588) and --multi_hot_sizes (sum 214)
DCNV2_ROWS = (
    40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282, 10, 2209,
    11938, 155, 4, 976, 14, 40000000, 40000000, 40000000, 590152, 12973, 108, 36,
)
DCNV2_HOTNESS = (3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1)


# Avazu (reczoo/BARS): hour (240 YYMMDDHH values over the 10 train days), then
# C1, banner_pos, site_id, site_domain, site_category, app_id, app_domain, app_category, device_id, device_ip,
# device_model, device_type, device_conn_type, C14..C21 (sum 9,449,445)
AVAZU_ROWS = (240, 7, 7, 4737, 7745, 26, 8552, 559, 36, 2686408, 6729486, 8251, 5, 4, 2626, 8, 9, 435, 4, 68, 172, 60)

# EMBark's synthetic workloads (HugeCTR benchmarks/embedding_collection/benchmark.sh and
# dataset/*.py): groups of (tables, hotness, vocabulary, dim); keys Zipf(1.1) through a
# random id permutation, fixed hotness, 13 dense features.
EMBARK_GROUPS = {
    # 177 tables in the config (the paper says 180); 66.3 B parameters, 14,450 keys and width 19,200 per sample
    "t180": ((5, 100, 10_000, 128), (5, 50, 4_000_000, 64), (5, 30, 4_000_000, 64), (5, 50, 50_000_000, 32),
             (20, 50, 1000, 128), (30, 30, 10_000, 128), (10, 20, 5_000_000, 256), (20, 20, 4_000_000, 128),
             (10, 100, 10, 128), (10, 10, 1000, 64), (10, 100, 10_000, 128), (5, 100, 100_000, 64),
             (40, 200, 4_000_000, 64), (1, 100, 50_000_000, 128), (1, 100, 500_000_000, 32)),
    # 200 tables, 103.9 B parameters, 4,550 keys and width 24,320 per sample
    "t200": ((10, 1, 100, 128), (10, 1, 1000, 128), (10, 5, 1000, 128), (10, 20, 10_000, 128),
             (20, 100, 10_000, 128), (10, 1, 10_000, 128), (10, 1, 100_000, 128), (10, 1, 1_000_000, 128),
             (10, 1, 2_000_000, 128), (10, 1, 2_000_000, 128), (10, 1, 4_000_000, 128), (20, 1, 4_000_000, 128),
             (20, 10, 2_000_000, 64), (10, 20, 4_000_000, 128), (10, 30, 4_000_000, 128),
             (10, 50, 4_000_000, 128), (10, 100, 50_000_000, 128)),
    # 510 tables, 114.6 B parameters, 2,670 keys and width 65,280 per sample
    "t510": ((100, 1, 1000, 128), (150, 1, 100_000, 128), (20, 1, 1_000_000, 128), (50, 1, 2_000_000, 128),
             (150, 1, 4_000_000, 128), (20, 10, 4_000_000, 128), (20, 100, 4_000_000, 128)),
}

# Meta dlrm_datasets traces (facebookresearch/dlrm_datasets): tables, native batch, mean ids per bag, and the
# `trace-calibrated` locality model below. Tables cycle through 8 strata (so 8, 16, ..., 856 tables keep the
# same mixture): bag means at the octiles of a lognormal(sigma 1.0) rescaled to the file's mean, rows at the
# octiles of a log-uniform on [rows_lo, rows_hi] paired by a fixed permutation, ids Zipf(0.9) through a random
# permutation. rows_hi was fitted here with the exact E[U] = sum_i 1 - (1 - p_i)^n at the native batch to the
# published unique fraction (2021: 14.5 %, 2022: 7.8 %); the index-weighted reuse histogram then spreads
# nearly flat over 2^0..2^16 as the published one does (tests/data/test_presets.py).
META_TRACES = {
    "2021": {"tables": 856, "batch": 65536, "hotness": 15.8, "rows_lo": 1e3, "rows_hi": 1.8e7},
    "2022": {"tables": 788, "batch": 131072, "hotness": 13.6, "rows_lo": 1e3, "rows_hi": 3.5e6},
}
META_ALPHA, META_SIGMA = 0.9, 1.0
_STRATA_ROWS = (3, 6, 0, 5, 2, 7, 1, 4)  # rows octile of each hotness octile


def tables_from_groups(groups: Sequence[tuple[int, float, int, int]], dim: int | None = None,
                       prefix: str = "t") -> tuple[TableSpec, ...]:
    """Tables from (count, hotness, rows, dim) groups, in order; ``dim`` overrides every group's dim."""
    out = []
    for count, hot, rows, d in groups:
        for _ in range(count):
            out.append(TableSpec(f"{prefix}{len(out)}", int(rows), int(dim or d), hotness=float(hot)))
    return tuple(out)


def trace_calibrated_tables(num_tables: int, mean_hotness: float, rows_lo: float, rows_hi: float, dim: int,
                            sigma: float = META_SIGMA) -> tuple[TableSpec, ...]:
    """Table i takes stratum i % 8 (see META_TRACES); bag means rescaled so the tables' mean is exact."""
    if num_tables <= 0:
        raise ValueError(f"num_tables must be > 0, got {num_tables}")
    k = len(_STRATA_ROWS)
    q = (np.arange(k) + 0.5) / k
    hot = np.exp([sigma * NormalDist().inv_cdf(float(x)) for x in q])
    rows = np.exp(math.log(rows_lo) + q * (math.log(rows_hi) - math.log(rows_lo)))[list(_STRATA_ROWS)]
    strata = np.arange(num_tables) % k
    hot = hot[strata] * mean_hotness / hot[strata].mean()
    return tuple(TableSpec(f"t{i}", int(rows[s]), dim, hotness=float(h)) for i, (s, h) in enumerate(zip(strata, hot)))


def _meta(year: str, num_tables: int | None = None, dim: int = 64, hotness: float | None = None,
          largest: int | None = None, **kw: Any) -> SyntheticSpec:
    """Meta-trace-like lookups (the `trace-calibrated` locality model); ``hotness`` overrides the mean bag;
    ``largest``: only that many of the tables, those with the most rows (ties: the first), in table order (EcoRec's
    Figure 11 times the trace's 28 largest)."""
    m = META_TRACES[year]
    tables = trace_calibrated_tables(int(num_tables or m["tables"]), float(hotness or m["hotness"]), m["rows_lo"],
                                     m["rows_hi"], dim)
    if largest is not None:
        if not 0 < int(largest) <= len(tables):
            raise ValueError(f"largest must be in 1..{len(tables)} (the preset's tables), got {largest}")
        keep = sorted(sorted(range(len(tables)), key=lambda i: -tables[i].num_embeddings)[: int(largest)])
        tables = tuple(tables[i] for i in keep)
    kw.setdefault("alpha", META_ALPHA)
    kw.setdefault("bag_sizes", "random")
    return SyntheticSpec(tables, **kw)


def _embark(name: str, dim: int | None = None, **kw: Any) -> SyntheticSpec:
    kw.setdefault("alpha", 1.1)
    return SyntheticSpec(tables_from_groups(EMBARK_GROUPS[name], dim), **kw)


def _avazu(dim: int = 16, hotness: float = 1, **kw: Any) -> SyntheticSpec:
    """Avazu-like: its 22 categorical cardinalities, one id per field, no dense features."""
    kw.setdefault("num_dense", 0)
    kw.setdefault("alpha", 1.1)
    return SyntheticSpec(tables_from_rows(AVAZU_ROWS, dim, hotness, names=AVAZU_CAT), **kw)


def _criteo_kaggle(dim: int = 16, hotness: float = 1, **kw: Any) -> SyntheticSpec:
    return SyntheticSpec(tables_from_rows(CRITEO_KAGGLE_ROWS, dim, hotness, names=CRITEO_NAMES), **kw)


def _criteo_terabyte_40m(dim: int = 64, hotness: float = 1, **kw: Any) -> SyntheticSpec:
    return SyntheticSpec(tables_from_rows(CRITEO_TERABYTE_40M_ROWS, dim, hotness, names=CRITEO_NAMES), **kw)


def _dcnv2_multihot(dim: int = 128, hotness: Any = DCNV2_HOTNESS, **kw: Any) -> SyntheticSpec:
    return SyntheticSpec(tables_from_rows(DCNV2_ROWS, dim, hotness, names=CRITEO_NAMES), **kw)


def _uniform(num_tables: int = 8, rows: int = 1_000_000, dim: int = 64, hotness: float = 1, **kw: Any) -> SyntheticSpec:
    kw.setdefault("alpha", 0.0)
    return SyntheticSpec(tables_from_rows([int(rows)] * int(num_tables), dim, hotness), **kw)


def _sc24_f4(rows: int = 100_000_000, dim: int = 32, hotness: float = 46.4, **kw: Any) -> SyntheticSpec:
    """EcoRec's Table-1 feature: one 1e8-row table, D = 32, multi-hot (464,214 lookups per 10k samples
    in the artifact's results.txt, so 46.4 per sample), skewed ids; the trace itself is not public."""
    kw.setdefault("bag_sizes", "random")
    return SyntheticSpec(tables_from_rows([int(rows)], dim, hotness, "f"), **kw)


PRESETS: dict[str, Callable[..., SyntheticSpec]] = {
    "criteo-kaggle": _criteo_kaggle,
    "criteo-terabyte-40m": _criteo_terabyte_40m,
    "dcnv2-multihot": _dcnv2_multihot,
    "uniform": _uniform,
    "sc24-f4": _sc24_f4,
    "sc24-f4-ranked": lambda **kw: _sc24_f4(**{"locality": "ranked", **kw}),
    "avazu-like": _avazu,
    "embark-t180": lambda **kw: _embark("t180", **kw),
    "embark-t200": lambda **kw: _embark("t200", **kw),
    "embark-t510": lambda **kw: _embark("t510", **kw),
    "meta-2021": lambda **kw: _meta("2021", **kw),
    "meta-2022": lambda **kw: _meta("2022", **kw),
}


def preset_names() -> list[str]:
    return sorted(PRESETS)


def get_preset(name: str, max_rows: int | None = None, **overrides: Any) -> SyntheticSpec:
    """The SyntheticSpec of preset ``name`` with overrides applied; ValueError for unknown names/options."""
    if name not in PRESETS:
        raise ValueError(f"unknown data preset {name!r}; known: {', '.join(preset_names())}")
    overrides = {k: v for k, v in overrides.items() if v is not None}
    try:
        spec = PRESETS[name](**overrides)
    except TypeError as exc:
        raise ValueError(f"bad option for preset {name!r}: {exc}") from exc
    if max_rows is not None:
        if int(max_rows) <= 0:
            raise ValueError(f"max_rows must be > 0, got {max_rows}")
        capped = tuple(replace(t, num_embeddings=min(t.num_embeddings, int(max_rows))) for t in spec.tables)
        spec = replace(spec, tables=capped)
    return spec
