"""Systems from outside this repository: a class that implements impls/api.py's interface, named by

- a spec, ``package.module:Class`` (importable: installed, or on PYTHONPATH) or ``path/to/file.py:Class`` (one file,
  loaded from where it lies; a relative path from the current folder), given to ``--impl`` of `run`, `train`, `sweep`,
  `reproduce` and `check-system`;
- or its name, when an installed package declares it in the ``dlrmbench.systems`` entry-point group
  (``[project.entry-points."dlrmbench.systems"] lowrank = "mypkg.lowrank:LowRank"``): found without being imported,
  loaded when a point or a check names it.

Loading registers the class under its ``name`` (impls.registry.register), so every check, option routing and record
of ours treats it as one of ours; a name one of ours already has is refused. ``launch_module`` tells the launcher to
start a point's worker through reproduce.harness.outside_worker, which loads the same spec first; ``source`` gives the
fingerprint its files (the module, or every loaded module of its package) and its version (its distribution's)."""
from __future__ import annotations

import importlib
import importlib.metadata as metadata
import importlib.util
import inspect
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GROUP = "dlrmbench.systems"
_SPEC = re.compile(r"(?P<target>[^:]+):(?P<attr>[A-Za-z_][A-Za-z0-9_.]*)")
WORKER = "reproduce.harness.outside_worker"


@dataclass(frozen=True)
class Outside:
    """Where an outside system came from: its spec (as a worker loads it), the folder or file its code is (its
    package's folder, or the one module), and its distribution's version (None: not installed as a package)."""

    name: str
    spec: str
    code: Path
    version: str | None

    def files(self) -> list[Path]:
        """Its source files loaded in this process (the module of a one-file system; its package's modules)."""
        if self.code.is_file():
            return [self.code]
        out = set()
        for mod in list(sys.modules.values()):
            f = getattr(mod, "__file__", None)
            if f and Path(f).resolve().is_relative_to(self.code):
                out.add(Path(f).resolve())
        return sorted(out)


_loaded: dict[str, Outside] = {}  # name -> where it came from, for this process's launcher and fingerprint


def is_spec(text: str) -> bool:
    """Whether ``text`` names a class (``module:Class`` or ``file.py:Class``) rather than a registered name."""
    return _SPEC.fullmatch(text) is not None


def installed() -> dict[str, metadata.EntryPoint]:
    """The systems installed packages declare (entry-point group ``dlrmbench.systems``), by name; none imported."""
    return {ep.name: ep for ep in metadata.entry_points(group=GROUP)}


def _import(target: str, spec: str):
    """The module a spec names: a ``.py`` file loaded from its path, else an importable module."""
    if target.endswith(".py"):
        path = Path(target).resolve()
        if not path.is_file():
            raise ValueError(f"--impl {spec}: no file {path}")
        name = f"dlrmbench_outside_{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}"
        if name in sys.modules and Path(sys.modules[name].__file__).resolve() == path:
            return sys.modules[name]
        loader_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module  # a dataclass or a pickled function of the file finds its module
        try:
            loader_spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return module
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        raise ValueError(f"--impl {spec}: cannot import {target!r} ({exc}); install its package, put its folder on "
                         f"PYTHONPATH, or name a file: path/to/file.py:Class") from None


def _version(module) -> str | None:
    top = module.__name__.split(".")[0]
    for dist in metadata.packages_distributions().get(top, []):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def load(spec: str, expect: str | None = None) -> str:
    """Import the class ``spec`` names, check that it is an EmbeddingCollection with a name of its own, register it
    and return its name (``expect``: the name an entry point declared it under). ValueError naming what is wrong."""
    from impls.api import EmbeddingCollection, register, registered_names

    m = _SPEC.fullmatch(spec)
    if m is None:
        raise ValueError(f"--impl {spec!r}: not a system spec (package.module:Class or path/to/file.py:Class)")
    module = _import(m["target"], spec)
    obj: Any = module
    for part in m["attr"].split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ValueError(f"--impl {spec}: {module.__name__} has no {m['attr']!r}")
    if not (inspect.isclass(obj) and issubclass(obj, EmbeddingCollection)):
        raise ValueError(f"--impl {spec}: {m['attr']} is not a subclass of impls.api.EmbeddingCollection "
                         f"(got {obj!r})")
    name = obj.__dict__.get("name") or ""
    if not name:
        raise ValueError(f"--impl {spec}: {obj.__qualname__} sets no `name` of its own (its registry key, "
                         f"e.g. name = \"lowrank\")")
    if expect is not None and name != expect:
        raise ValueError(f"entry point {expect!r} ({spec}) names a class whose name is {name!r}")
    known = _loaded.get(name)
    if known is None and name in registered_names():
        raise ValueError(f"--impl {spec}: the name {name!r} is taken by a system of this suite; give the class "
                         f"another `name`")
    where = f"{Path(m['target']).resolve()}:{m['attr']}" if m["target"].endswith(".py") else spec  # any folder
    if known is not None and known.spec != where:
        raise ValueError(f"--impl {spec}: {name!r} is loaded already from {known.spec}")
    register(obj)
    if known is None:
        _loaded[name] = Outside(name, where, _code_of(module), _version(module))
    return name


def _code_of(module) -> Path:
    """The folder of a module's top-level package, or the module's file when it is a module of its own."""
    top = sys.modules.get(module.__name__.split(".")[0], module)
    f = Path(top.__file__).resolve()
    return f.parent if f.name == "__init__.py" else f


def resolve(name_or_spec: str) -> str:
    """The registry name of a system given by name (ours, one loaded already, an installed entry point) or by spec
    (loaded now); ValueError for a name nothing declares, with the names that are, and for one of our names that an
    installed entry point declares too (it would be shadowed without a word; a spec named like ours is refused the
    same way)."""
    from impls.registry import registered_names

    if is_spec(name_or_spec):
        return load(name_or_spec)
    eps = installed()
    if name_or_spec in registered_names():
        if name_or_spec in eps and name_or_spec not in _loaded:  # one of ours, and a package declares it too
            raise ValueError(f"the name {name_or_spec!r} is taken by a system of this suite, and an installed package "
                             f"declares a system by it too ({GROUP} entry point {name_or_spec} = "
                             f"{eps[name_or_spec].value}): rename that entry point, or run it by its spec, --impl "
                             f"{eps[name_or_spec].value} (with a `name` of its own)")
        return name_or_spec
    if name_or_spec in eps:
        return load(eps[name_or_spec].value, expect=name_or_spec)
    import difflib

    known = sorted({*registered_names(), *eps})
    close = difflib.get_close_matches(name_or_spec, known, n=1)
    raise ValueError(f"unknown implementation {name_or_spec!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                     + f"; known: {', '.join(known)}; a system of your own: --impl package.module:Class or "
                       f"path/to/file.py:Class, or an installed package's {GROUP} entry point")


def source(name: str) -> Outside | None:
    """Where a loaded outside system came from (None: one of ours)."""
    return _loaded.get(name)


def launch_module(name: str) -> list[str]:
    """The ``-m`` arguments that start a worker for a point of system ``name``: ours run the worker itself, an
    outside one the wrapper that loads its spec first."""
    src = _loaded.get(name)
    if src is None:
        return ["-m", "reproduce.harness.worker"]
    return ["-m", WORKER, "--system", src.spec]
