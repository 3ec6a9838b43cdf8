"""Each implementation declares the options it takes (``option_keys``; a sharded system also ``dist_option_keys``),
and the harness checks a point's options against the declaration alone. Here every declaration is held to the code
it describes (reproduce/conformance/declared.py, check-system's `interface` check)."""
import pytest

from impls.api import get_impl, registered_names
from reproduce.conformance.declared import declaration_problems


def _importable(name):
    try:
        get_impl(name)
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("name", [n for n in registered_names() if _importable(n)])
def test_declared_options_are_what_the_constructor_takes(name):
    assert declaration_problems(get_impl(name)) == [], name
