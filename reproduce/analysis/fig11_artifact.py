"""EcoRec's Figure 11 as its artifact recorded it (facts/sc24_ade.toml, from yatorho/SC24_ADE figure11/results.txt
at commit d5a071e): forward + backward time of the 28 largest keys of Meta's 2022 trace on one GPU (hardware not
stated), D = 32, TT ranks [32, 32], per batch size; "FBTT" is TT-Rec's kernel library. The per-batch ratios EL-Rec /
EcoRec and FBTT / EcoRec are what sc24_fig11 compares with."""
from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

FACTS = Path(__file__).resolve().parent / "facts" / "sc24_ade.toml"
SOURCE = "yatorho/SC24_ADE figure11/results.txt (one GPU, hardware not stated)"


@lru_cache(maxsize=1)
def facts() -> dict:
    """The artifact's published results (the whole data file)."""
    with open(FACTS, "rb") as f:
        return tomllib.load(f)


def _figure11(what: str) -> dict[int, dict[str, float]]:
    out = {}
    for key, row in facts()["figure11"].items():
        if key.startswith("b") and isinstance(row, dict):
            out[int(row["batch"])] = {s: v[what] for s, v in row.items() if isinstance(v, dict)}
    return dict(sorted(out.items()))


TOTAL_MS: dict[int, dict[str, float]] = _figure11("total_ms")  # batch -> system -> forward + backward ms
FORWARD_MS: dict[int, dict[str, float]] = _figure11("forward_ms")


def ratio(numerator: str, batch: int) -> float:
    """The artifact's ``numerator`` / EcoRec total time at ``batch``."""
    t = TOTAL_MS[batch]
    return t[numerator] / t["ecorec"]
