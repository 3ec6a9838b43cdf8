"""Avazu CTR (Kaggle 2014) ``train[.gz]``: a CSV with a header, ``id,click,hour,C1,banner_pos,...,C21``
(24 columns, the Kaggle 2014 CTR challenge's train.csv). The label is ``click``; the 22 categorical fields are ``hour``
(YYMMDDHH, 240 values over the 10 days) and the 21 that follow; ``id`` is dropped; there are no dense
features. Every categorical is a hex hash of at most 8 digits (site_id, device_ip, ...) or a small decimal
(C1, banner_pos, C14..C21, hour), so each is read as one hex number: injective per column, which is all
categorify needs. Optionally ``% max_ind_range``."""
from __future__ import annotations

from functools import partial
from typing import Callable

import numpy as np

from impls.data.columns import AVAZU_CAT as CAT_NAMES
from impls.data.textio import BadRows, Problems, Rows, well_formed_fields

HEADER = ",".join(("id", "click") + CAT_NAMES).encode()
NUM_DENSE, NUM_CAT = 0, len(CAT_NAMES)
NUM_COLS = 2 + NUM_CAT


def parse_lines(buf: bytes, where: Callable[[int], str], problems: Problems, strict: bool,
                max_ind_range: int | None = None) -> Rows:
    """Parse a buffer of whole data lines (no header). ``where(i)`` names line i (file:line) for messages."""
    parsed = well_formed_fields(buf, b",", NUM_COLS, where, problems, strict)
    if parsed is None:
        return Rows.empty(NUM_DENSE, NUM_CAT)
    f, good_idx = parsed
    bad = BadRows(len(f))
    labels, badl = f.label(1)
    bad.flag(badl, lambda i: f"click {f.text(i, 1)!r} is not 0 or 1")
    cats = np.zeros((len(f), NUM_CAT), dtype=np.int64)
    for j in range(NUM_CAT):
        vals, badhex = f.hex(2 + j)
        badhex |= f.length[:, 2 + j] == 0  # Avazu has no missing values: an empty field is a broken line
        bad.flag(badhex, lambda i, j=j: f"{CAT_NAMES[j]} {f.text(i, 2 + j)!r} is not a hex id of <= 8 digits")
        cats[:, j] = vals % max_ind_range if max_ind_range else vals
    bad.report(problems, where, good_idx, strict)
    return Rows(labels, np.zeros((len(f), 0), np.int64), cats).keep(~bad.mask)


def parser(problems: Problems, strict: bool, max_ind_range: int | None = None):
    """The line parser ``textio.iter_rows`` takes."""
    return partial(parse_lines, problems=problems, strict=strict, max_ind_range=max_ind_range)
