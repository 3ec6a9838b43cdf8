"""What a system declares, held to its code: the options it takes (``option_keys``; a sharded system also
``dist_option_keys``) are the keyword parameters of its constructor (following ``**kwargs`` up to the base that takes
them), of a TT system's ``configure``, and of ``build_distributed``; the harness checks a point's options against
the declaration alone."""
from __future__ import annotations

import inspect

from impls.api import BUILD_ARGS, HARNESS_KEYS, EmbeddingCollection, ShardedCollection


def keyword_names(fn) -> tuple[set[str], bool]:
    params = inspect.signature(fn).parameters.values()
    named = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"self", "cls"}
    return named, any(p.kind is p.VAR_KEYWORD for p in params)


def signature_options(cls) -> set[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        own, more = keyword_names(init)
        names |= own
        if not more:
            break
    for klass in cls.__mro__:
        if "configure" in klass.__dict__:
            names |= keyword_names(klass.__dict__["configure"])[0]
    return names - BUILD_ARGS - HARNESS_KEYS


def declaration_problems(cls) -> list[str]:
    """What is wrong with ``cls``'s declarations (empty: nothing)."""
    if not (isinstance(cls, type) and issubclass(cls, EmbeddingCollection)):
        return [f"{cls!r} is not a subclass of impls.api.EmbeddingCollection"]
    out = []
    if not cls.name:
        out.append("no `name` (its registry key)")
    declared, takes = set(cls.option_names()), signature_options(cls)
    if declared != takes:
        out.append(f"option_keys {sorted(declared)} != the constructor's keyword options {sorted(takes)} (declared, "
                   f"not taken: {sorted(declared - takes)}; taken, not declared: {sorted(takes - declared)})")
    if cls.distributed_only != issubclass(cls, ShardedCollection):
        out.append("distributed_only must be True exactly for a ShardedCollection")
    if issubclass(cls, ShardedCollection):
        keys = keyword_names(cls.build_distributed)[0] - BUILD_ARGS - HARNESS_KEYS - {"device"}
        if set(cls.dist_option_keys) != keys:
            out.append(f"dist_option_keys {sorted(cls.dist_option_keys)} != build_distributed's {sorted(keys)}")
    elif cls.dist_option_keys:
        out.append("dist_option_keys on a system that does not shard itself (the sharding layer's keys are its own)")
    return out
