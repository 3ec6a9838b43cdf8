"""The fingerprints of the models' own code and inputs, written beside their outputs when they run (the scale
model's fit.json, EMBark's cost model's model.json) and compared by freshness.py: what the model's module imports of
the analysis and the library (fingerprint.py), and the sc24 records a fit read."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from reproduce.harness import code, fingerprint
from reproduce.harness.record_store import read_record

SCALE_MODEL = "reproduce.analysis.scale_model"


def model_fingerprint(module: str, root: Path = code.ROOT) -> dict[str, Any]:
    """A model's own code: its module and what it imports of the analysis and the library (not its figures, not the
    freshness check, not this module)."""
    analysis = tuple(m for m in code.modules(root) if m.startswith("reproduce.analysis")
                     and not m.startswith(("reproduce.analysis.plots", "reproduce.analysis.freshness",
                                           "reproduce.analysis.model_code")))
    return fingerprint.of_imports((module,), follow=analysis, root=root)


def scale_model_fingerprint(root: Path = code.ROOT) -> dict[str, Any]:
    """The scale model's own code (``model_fingerprint``)."""
    return model_fingerprint(SCALE_MODEL, root)


def fit_inputs(results: Path) -> dict[str, str | None]:
    """The sc24 records a fit reads, by file name, with their code digests."""
    return {f.name: (read_record(f).body.code or {}).get("digest") for f in sorted(Path(results).glob("*.json"))}
