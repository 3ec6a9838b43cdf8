"""dlrmbench.systems is the public API: every name it exports is documented, and every registered system's class has
a docstring (what ``help()`` shows a user)."""
from __future__ import annotations

import dlrmbench.systems as systems
from impls.api import get_impl, registered_names


def test_every_public_name_and_system_class_is_documented():
    undocumented = [n for n in systems.__all__ if not (getattr(systems, n).__doc__ or "").strip()]
    for name in registered_names():
        try:
            cls = get_impl(name)
        except ImportError:
            continue
        if not (cls.__doc__ or "").strip():
            undocumented.append(name)
    assert not undocumented, undocumented
    assert set(systems.systems()) == set(registered_names())
