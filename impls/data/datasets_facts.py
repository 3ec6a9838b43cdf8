"""The dataset manifests (datasets/<name>.toml: raw files, split layout, published facts such as cardinalities), the
one place they are found and read."""
from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

MANIFEST_DIR = Path(__file__).resolve().parents[2] / "datasets"  # the checkout's datasets/, from any folder


def manifest(name: str, root: Path = MANIFEST_DIR) -> dict[str, Any]:
    """``name``'s manifest; ValueError naming the ones there are."""
    path = root / f"{name}.toml"
    if not path.is_file():
        known = sorted(p.stem for p in root.glob("*.toml"))
        raise ValueError(f"no dataset manifest {path}; known: {', '.join(known) or '(none)'}")
    return tomllib.loads(path.read_text())


def manifest_cardinalities(name: str, variant: str = "raw") -> list[int]:
    """The table cardinalities of ``name``'s manifest for ``variant`` (e.g. "raw", "max_ind_range_40m")."""
    cards = manifest(name).get("cardinalities", {})
    if variant not in cards:
        raise ValueError(f"{name} has no cardinality variant {variant!r}; variants: {sorted(cards)}")
    return [int(x) for x in cards[variant]]
