"""The registry of implementations: each registers under its name (``register``); ``get_impl(name)`` imports its
module on first use, so an optional dependency (fbgemm, torchrec) only matters to the implementation that needs it."""
from __future__ import annotations

import importlib

from impls.interface import EmbeddingCollection

# name -> module that defines (and registers) the implementation; imported on first use.
_MODULES: dict[str, str] = {
    "dense-torch": "impls.dense.torch_bag",
    "dense-fbgemm": "impls.dense.fbgemm_tbe",
    "ttrec": "impls.ttrec.collection",
    "elrec": "impls.elrec.collection",
    "ecorec": "impls.ecorec.collection",
    "embark": "impls.embark.collection",
    "torchrec": "impls.torchrec_peer.collection",
    "hash": "impls.compress.hashing",
    "qr": "impls.compress.qr",
    "md": "impls.compress.md",
}
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
