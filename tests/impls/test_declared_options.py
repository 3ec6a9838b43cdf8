"""Each implementation declares the options it takes (``option_keys``; a sharded system also ``dist_option_keys``),
and the harness checks a point's options against the declaration alone. Here every declaration is held to the code
it describes: the keyword parameters of the constructor (following ``**kwargs`` up to the base that takes them), of
a TT system's ``configure``, and of ``build_distributed``."""
import inspect

import pytest

from impls.api import BUILD_ARGS, HARNESS_KEYS, ShardedCollection, get_impl, registered_names


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


def _importable(name):
    try:
        get_impl(name)
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("name", [n for n in registered_names() if _importable(n)])
def test_declared_options_are_what_the_constructor_takes(name):
    cls = get_impl(name)
    assert set(cls.option_names()) == signature_options(cls), name
    if issubclass(cls, ShardedCollection):
        keys, _ = keyword_names(cls.build_distributed)
        assert set(cls.dist_option_keys) == keys - BUILD_ARGS - HARNESS_KEYS - {"device"}, name
    else:
        assert not cls.dist_option_keys, name
