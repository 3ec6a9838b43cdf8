"""Published facts kept in the dataset manifests (datasets/<name>.toml), read by code that needs them."""
from __future__ import annotations

import tomllib
from pathlib import Path

MANIFEST_DIR = Path(__file__).resolve().parents[2] / "datasets"


def manifest_cardinalities(name: str, variant: str = "raw") -> list[int]:
    """The table cardinalities of ``name``'s manifest for ``variant`` (e.g. "raw", "max_ind_range_40m")."""
    path = MANIFEST_DIR / f"{name}.toml"
    if not path.is_file():
        raise ValueError(f"no dataset manifest {path}")
    cards = tomllib.loads(path.read_text()).get("cardinalities", {})
    if variant not in cards:
        raise ValueError(f"{name} has no cardinality variant {variant!r}; variants: {sorted(cards)}")
    return [int(x) for x in cards[variant]]
