"""One name for every data source a run, `data stats` or `redundancy` can read: a synthetic preset name
(impls/data/presets.py), a prepared dataset folder (`data prepare` / `data synth`), or a Meta trace file
(``*.pt`` / ``*.pt.gz``). ``held_out`` gives the batches a run evaluates on: the prepared dataset's ``val``
split (else ``test``), or a synthetic stream's batches from HELD_OUT_START on, which no run trains on."""
from __future__ import annotations

from pathlib import Path
from typing import Any

HELD_OUT_START = 10**6  # first held-out batch index of a synthetic stream


def _file_source_options(name: str, options: dict[str, Any]) -> int | None:
    extra = sorted(k for k, v in options.items() if v is not None and k not in ("dim", "seed"))
    if extra:
        raise ValueError(f"{name} is a dataset on disk: {', '.join(extra)} apply to synthetic presets only")
    return options.get("dim")


def is_trace_file(name: str) -> bool:
    return name.endswith(".pt") or name.endswith(".pt.gz")


def open_source(name: str, split: str = "train", reorder: str | None = None, **options: Any):
    """The source behind ``name``; ``options`` are preset overrides (``dim`` also applies to files);
    ``reorder``: a folder from `data reorder` whose bijections relabel the ids (EL-Rec's reordering)."""
    base = _open(name, split, **options)
    if reorder is None:
        return base
    from impls.data.reorder import Reordering, ReorderedSource

    return ReorderedSource(base, Reordering.load(Path(reorder)))


def _open(name: str, split: str, **options: Any):
    path = Path(name)
    if path.is_dir():
        from impls.data.prepared_source import PreparedSource

        return PreparedSource(path, split, dim=_file_source_options(name, options))
    if is_trace_file(name):
        if not path.is_file():
            raise ValueError(f"trace file {name} not found")
        from impls.data.meta_traces import MetaTraceSource

        dim = _file_source_options(name, options)
        return MetaTraceSource(path, dim=dim) if dim else MetaTraceSource(path)
    from impls.data.presets import get_preset
    from impls.data.synthetic import SyntheticSource

    return SyntheticSource(get_preset(name, **options))


def check_source(name: str, reorder: str | None = None, **options: Any) -> None:
    """Fail fast (ValueError) on a name that is no preset, prepared dataset or trace file, or on options that
    do not apply to it; opens nothing big."""
    if reorder is not None and not (Path(reorder) / "reorder.json").is_file():
        raise ValueError(f"{reorder} holds no reordering (no reorder.json): run `dlrmbench data reorder` first")
    path = Path(name)
    if path.is_dir():
        from impls.data.prepared_source import check_prepared

        check_prepared(path)
        _file_source_options(name, options)
    elif is_trace_file(name):
        if not path.is_file():
            raise ValueError(f"trace file {name} not found")
        _file_source_options(name, options)
    else:
        from impls.data.presets import PRESETS, get_preset

        if name not in PRESETS:
            raise ValueError(f"data {name!r} is no preset ({', '.join(sorted(PRESETS))}), prepared dataset folder "
                             "or trace file (*.pt, *.pt.gz)")
        get_preset(name, **options)


def held_out(name: str, source, reorder: str | None = None, **options: Any) -> tuple[Any, int]:
    """(source, first batch index) of the evaluation batches that go with ``source`` (opened from ``name``)."""
    from impls.data.prepared_source import PreparedSource
    from impls.data.reorder import ReorderedSource
    from impls.data.synthetic import SyntheticSource

    if isinstance(source, ReorderedSource):  # held-out data relabelled by the same bijection
        inner, start = held_out(name, source.source, **options)
        return ReorderedSource(inner, source.reordering), start
    if isinstance(source, SyntheticSource):
        return source, HELD_OUT_START
    if isinstance(source, PreparedSource):
        for split in ("val", "test"):
            if split in source.meta.rows and source.meta.rows[split] > 0:
                return PreparedSource(name, split, dim=options.get("dim")), 0
        raise ValueError(f"{name} has no held-out split (val or test) to evaluate on")
    raise ValueError(f"{name} carries no labels (a lookup trace): evaluation needs a labelled dataset")
