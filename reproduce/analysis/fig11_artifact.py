"""EcoRec's Figure 11 as its artifact recorded it: yatorho/SC24_ADE figure11/results.txt (commit d5a071e), forward +
backward time of the 28 largest tables of Meta's 2022 trace on one GPU (hardware not stated), D = 32, TT ranks
[32, 32], per batch size; "FBTT" is TT-Rec's kernel library. The per-batch ratios EL-Rec / EcoRec and FBTT / EcoRec
are what sc24_fig11 compares with (facts transcribed, no code)."""
from __future__ import annotations

SOURCE = "yatorho/SC24_ADE figure11/results.txt (one GPU, hardware not stated)"

# batch size -> total (forward + backward) ms of EcoRec, EL-Rec and FBTT
TOTAL_MS: dict[int, dict[str, float]] = {
    2048: {"ecorec": 93.942, "elrec": 110.449, "ttrec": 369.953},
    4096: {"ecorec": 142.599, "elrec": 187.256, "ttrec": 732.730},
    8192: {"ecorec": 214.058, "elrec": 320.119, "ttrec": 1449.127},
    16384: {"ecorec": 328.984, "elrec": 574.553, "ttrec": 2926.947},
    32768: {"ecorec": 524.802, "elrec": 1079.883, "ttrec": 5900.180},
    65536: {"ecorec": 843.539, "elrec": 2077.888, "ttrec": 11760.666},
    131072: {"ecorec": 1420.375, "elrec": 3809.499, "ttrec": 23565.312},
}


def ratio(numerator: str, batch: int) -> float:
    """The artifact's ``numerator`` / EcoRec total time at ``batch``."""
    t = TOTAL_MS[batch]
    return t[numerator] / t["ecorec"]
