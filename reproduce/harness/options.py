"""Implementation options: which options each system of a point gets (plain keys to every system that takes them,
``[impl_options.X]`` tables to X only) and the checks that need the world outside a point's values - the
implementation is registered and takes these options, the data exists - run where points are made (an experiment's
resolution, `dlrmbench run`), never by a worker or a reader of old records."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from reproduce.harness.point import RunPoint


def check_point(point: RunPoint) -> RunPoint:
    """``point`` when the world agrees with it: its data can be opened with its options, a training run's data is a
    folder, its implementation is registered, runs where the point runs (one device or ranks) and takes its
    options; ValueError naming what is wrong otherwise."""
    from impls.data.sources import check_source

    check_impl(point.impl)
    check_source(point.data, **point.data_options)
    if point.epochs and not Path(point.data).is_dir():
        raise ValueError(f"a training run reads a dataset on disk; {point.data!r} is not a folder (prepare one with "
                         f"`dlrmbench data prepare`, or write a preset's stream with `dlrmbench data synth`)")
    if point.world_size == 1:
        from impls.api import get_impl

        try:
            if get_impl(point.impl).distributed_only:
                raise ValueError(f"{point.impl} runs over ranks only: give it a world size >= 2")
        except ImportError:
            pass  # an optional dependency: the worker reports it
    check_impl_options(point.impl, point.impl_options, point.world_size)
    check_option_values(point)
    return point


def check_option_values(point: RunPoint) -> None:
    """The values of a point's implementation options, checked as the system will read them on the point's tables
    (``table_param_bytes``: TT ranks, shapes, cores, ...) before any process starts; ValueError naming the option.
    A trace file's tables are read by the worker only (opening one here would cost what the run costs)."""
    from impls.api import get_impl
    from impls.data.sources import is_trace_file, open_source

    if not point.impl_options:
        return
    for key in ("ranks",):
        if key in point.impl_options:
            _positive_ints(point.impl_options[key], key)
    if is_trace_file(point.data):
        return
    try:
        cls = get_impl(point.impl)
    except (ImportError, ValueError):
        return  # check_impl's error, or a missing optional dependency (the worker's)
    tables = open_source(point.data, **point.data_options).tables
    try:
        cls.table_param_bytes(tables, cls.options_for_tables(point.impl_options, [t.name for t in tables]))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{point.impl}: {exc}") from None


def _positive_ints(value: Any, key: str) -> None:
    """``value`` (one value, a list, or {table: value}) holds integers >= 1 only; ValueError naming ``key``."""
    values = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [value]
    for v in values:
        if isinstance(v, (list, tuple)):
            _positive_ints(v, key)
        elif isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{key} must be >= 1 (an integer), got {v!r}")


def options_for(impl: str, impl_options: dict[str, Any], world_size: int = 1) -> dict[str, Any]:
    """The options one implementation gets: a plain key goes to every implementation that takes it in this kind of
    run (``check_shared_options`` refuses one that no implementation of the run takes), a table named after an
    implementation (``[impl_options.ecorec]``, or ``ecorec.micro_batches`` on the CLI) only to it."""
    from impls.registry import registered_names

    names = set(registered_names())
    shared = {k: v for k, v in impl_options.items() if k not in names and _takes(impl, k, world_size)}
    own = impl_options.get(impl, {})
    if not isinstance(own, dict):
        raise ValueError(f"impl_options.{impl} must be a table of options, got {own!r}")
    return {**shared, **own}


def _takes(impl: str, key: str, world_size: int) -> bool:
    from impls.api import get_impl
    from impls.sharding.build import accepted_options

    try:
        cls = get_impl(impl)
    except (ImportError, ValueError):
        return True  # an unknown name is check_impl's error; a missing optional dependency the worker's
    return key in accepted_options(cls, world_size > 1)


class UnknownOptions(ValueError):
    """An implementation option the implementation does not take."""


def check_impl_options(impl: str, options: dict[str, Any], world_size: int) -> None:
    """Every key of a point's impl_options is one the implementation takes in this kind of run (one device,
    or over ranks): a typo is refused before anything launches, naming the key, a close match and the keys
    the implementation does take."""
    import difflib

    from impls.api import HARNESS_KEYS, get_impl

    if not options:
        return
    try:
        cls = get_impl(impl)
    except (ImportError, ValueError):
        return  # an unknown name is check_impl's error; a missing optional dependency the worker's
    from impls.sharding.build import accepted_options

    known = accepted_options(cls, world_size > 1)
    bad = sorted(set(options) - known)
    if not bad:
        return
    notes = []
    other = accepted_options(cls, world_size == 1)
    for k in bad:
        close = difflib.get_close_matches(k, sorted(known), n=1)
        if k in HARNESS_KEYS:
            flag = {"check_bounds": "--no-check-bounds"}.get(k, "--" + k)
            notes.append(f"{k!r} is a run setting ({flag}), not an implementation option")
        elif close:
            notes.append(f"{k!r}: did you mean {close[0]!r}?")
        elif k in other:
            notes.append(f"{k!r} applies {'over ranks (world size >= 2)' if world_size == 1 else 'on one device'} only")
    where = f"over {world_size} ranks" if world_size > 1 else "on one device"
    raise UnknownOptions(f"{impl} takes no option(s) {bad} {where}" + (f" ({'; '.join(notes)})" if notes else "")
                     + f"; its options: {', '.join(sorted(known)) or 'none'}")


def check_scoped_options(impl_options: dict[str, Any], run_impls: Iterable[str], where: str) -> None:
    """Options scoped to one implementation ([impl_options.X], ``-o X.key=value``) need X in the run: options
    for a system that never runs are a mistake, not something to ignore."""
    from impls.registry import registered_names

    running = set(run_impls)
    idle = sorted(k for k in impl_options if k in registered_names() and k not in running)
    if idle:
        raise ValueError(f"{where}: options for {idle}, which this run does not include (it runs "
                         f"{', '.join(sorted(running))})")


def check_impl(name: str) -> None:
    """An experiment names registered implementations only (ours, an outside one loaded by --impl, an installed
    package's entry point, loaded here): a typo is an error before anything runs."""
    from reproduce.harness.systems import resolve

    resolve(name)


def check_shared_options(impl_options: dict[str, Any], points: Iterable["RunPoint"], where: str) -> None:
    """Every plain option reached at least one point (some implementation of the run takes it); one that none
    takes is refused, with each implementation's reason (a typo's close match, a run setting, ranks only)."""
    from impls.registry import registered_names

    points = list(points)
    plain = {k: v for k, v in impl_options.items() if k not in registered_names()}
    unused = {k: v for k, v in plain.items() if not any(k in p.impl_options for p in points)}
    if not unused:
        return
    reasons = []
    for impl, ws in dict.fromkeys((p.impl, p.world_size) for p in points):
        try:
            check_impl_options(impl, unused, ws)
        except UnknownOptions as exc:
            reasons.append(str(exc))
    if len(reasons) == 1:
        raise UnknownOptions(f"{where}: {reasons[0]}")
    raise UnknownOptions(f"{where}: no implementation of this run takes option(s) {sorted(unused)}: "
                         + "; ".join(reasons))


