"""Host-device syncs of one training step on a GPU: the first warm-up step runs under torch's sync debug mode
("warn": every op that makes the host wait for the device warns), and its warnings are counted, by the source line
that called the op. Untimed (a warm-up step); the harness's own synchronizations between phases are not counted."""
from __future__ import annotations

import os
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import torch

HOW = ("torch.cuda.set_sync_debug_mode('warn') over warm-up step 1 (untimed), each warning counted by the line that "
       "called the syncing op (syncs inside autograd's backward by the backward call); the clock's own "
       "synchronizations left out")
_ROOT = Path(__file__).resolve().parents[2]
_CLOCK = os.path.join("reproduce", "harness", "training.py")


def counted(run: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    """``run()``'s result and its syncs: ``{"per_step": n, "where": {"file:line": count}, "how": HOW}``."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            out = run()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    where: Counter[str] = Counter()
    for w in caught:
        if "synchroniz" in str(w.message) and not w.filename.endswith(_CLOCK):
            where[f"{_short(w.filename)}:{w.lineno}"] += 1
    return out, {"per_step": sum(where.values()), "where": dict(where.most_common()), "how": HOW}


def _short(path: str) -> str:
    """A path from the checkout's root (impls/..., tests/...), else the file's name."""
    p = Path(path)
    return str(p.relative_to(_ROOT)) if p.is_relative_to(_ROOT) else p.name
