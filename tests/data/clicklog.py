"""A small MovieLens-like click log in CSV with a learnable signal, for the tabular end-to-end test and for
accuracy runs on tabular data (no real log can be downloaded here):
``python -m tests.data.clicklog OUT.csv ROWS [SEED]``.

Columns ``ts,user,item,genre,hour,rating``: ``ts`` increases with the row, ``user`` one of 300 (each with its own
effect), ``item`` drawn from 60,000 ids (about 10,900 distinct in 12,000 rows, 8,900 in the first 80 %; no effect of
its own), ``genre`` one or two of six genres joined by ``|`` (each with its own effect), ``hour`` the row
mod 24 (no effect); ``rating`` = round(3 + user effect + genre effects + noise) clipped to 1..5, so ``rating>=4``
is a click that users and genres predict."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def write_clicklog(path: Path, n: int = 12_000, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    user, item = rng.integers(0, 300, n), rng.integers(0, 60_000, n)
    genres = np.array(["a", "b", "c", "d", "e", "f"])
    g_eff, u_eff = rng.normal(0, 1.5, 6), rng.normal(0, 1.0, 300)
    lines = ["ts,user,item,genre,hour,rating"]
    for i in range(n):
        g = rng.choice(6, rng.integers(1, 3), replace=False)
        z = u_eff[user[i]] + g_eff[g].sum() + rng.normal(0, 0.3)
        lines.append(f"{i},u{user[i]},i{item[i]},{'|'.join(genres[g])},{i % 24},{int(np.clip(np.round(3 + z), 1, 5))}")
    Path(path).write_text("\n".join(lines) + "\n")
    return Path(path)


if __name__ == "__main__":
    write_clicklog(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 0)
