"""Named synthetic workloads with the real table cardinalities of the datasets they stand in for
(sources in ../shared/reference/datasets-and-benchmarks.md §1-3). Overrides: ``dim``, ``hotness``,
``max_rows`` (dlrm's --max-ind-range: rows capped to the modulus), ``alpha``, ``locality``,
``bag_sizes``, ``seed``; ``uniform`` also takes ``num_tables`` and ``rows``."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from impls.data.synthetic import SyntheticSpec, tables_from_rows

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


def _criteo_kaggle(dim: int = 16, hotness: float = 1, **kw: Any) -> SyntheticSpec:
    return SyntheticSpec(tables_from_rows(CRITEO_KAGGLE_ROWS, dim, hotness, "C"), **kw)


def _criteo_terabyte_40m(dim: int = 64, hotness: float = 1, **kw: Any) -> SyntheticSpec:
    return SyntheticSpec(tables_from_rows(CRITEO_TERABYTE_40M_ROWS, dim, hotness, "C"), **kw)


def _dcnv2_multihot(dim: int = 128, hotness: Any = DCNV2_HOTNESS, **kw: Any) -> SyntheticSpec:
    return SyntheticSpec(tables_from_rows(DCNV2_ROWS, dim, hotness, "C"), **kw)


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
