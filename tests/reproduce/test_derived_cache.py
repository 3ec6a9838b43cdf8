"""The cache of values derived from a file's text (derived_cache.py): an entry is reused only for the same bytes and
the same deriving rule, a damaged entry is derived again, an unwritable cache costs nothing but time, and what the
fingerprint reads through it equals what it derives without it."""
import ast
import os
from pathlib import Path

import pytest

from reproduce.harness import code, derived_cache, fingerprint
from reproduce.harness.derived_cache import derived


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("DLRMBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def counted(value):
    calls = []

    def derive():
        calls.append(1)
        return value
    return derive, calls


def test_an_entry_is_reused_only_for_the_same_bytes_and_rule(cache, tmp_path):
    rule = tmp_path / "rule.py"
    rule.write_text("RULE = 1\n")
    derive, calls = counted(["a", "b"])
    assert derived("names", rule, b"x = 1", derive) == ["a", "b"]
    assert derived("names", rule, b"x = 1", derive) == ["a", "b"] and len(calls) == 1  # read back
    assert derived("imports", rule, b"x = 1", derive) and len(calls) == 2  # another kind of value
    assert derived("names", rule, b"x = 2", derive) and len(calls) == 3  # other bytes
    rule.write_text("RULE = 22\n")  # the rule that derives it changed: no entry of the old rule counts
    assert derived("names", rule, b"x = 1", derive) and len(calls) == 4
    assert len(list(cache.rglob("*.json"))) == 4 and not list(cache.rglob("*.tmp"))


def test_a_damaged_entry_is_derived_again_and_an_unwritable_cache_costs_only_time(cache, tmp_path):
    rule = tmp_path / "rule.py"
    rule.write_text("")
    derive, calls = counted("h")
    derived("code_hash", rule, b"src", derive)
    (entry,) = cache.rglob("*.json")
    entry.write_text('{"kind": "code_ha')  # cut short
    assert derived("code_hash", rule, b"src", derive) == "h" and len(calls) == 2
    assert derived("code_hash", rule, b"src", derive) == "h" and len(calls) == 2  # rewritten whole
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    os.environ["DLRMBENCH_CACHE"] = str(blocked / "cache")  # cannot be a folder at all (monkeypatch restores it)
    assert derived("code_hash", rule, b"more", derive) == "h" and len(calls) == 3


def test_the_fingerprint_reads_through_the_cache_what_it_derives_without_it(cache):
    files = [code.ROOT / "impls" / "core" / "ops.py", code.ROOT / "reproduce" / "harness" / "worker.py",
             code.ROOT / "impls" / "registry.py", code.ROOT / "impls" / "core" / "csrc" / "cpu" / "pooling.cpp"]
    for path in files:  # twice: derived and stored, then read back
        for _ in range(2):
            code._file_hash.cache_clear()
            fingerprint._names_in.cache_clear()
            assert code.file_hash(path) == code.code_hash(path)
            if path.suffix == ".py":
                assert set(code.imports_of(path)) == code._imports_in(path, path.read_text(), code.ROOT)
                assert fingerprint._names_in(path, 0) == frozenset(fingerprint._names(ast.parse(path.read_text())))
    assert len(list(cache.rglob("*.json"))) == 3 * 3 + 1
    assert derived_cache.cache_dir() == cache
