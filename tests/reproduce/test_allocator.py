"""The allocator policies of measured processes: stepping aside for a user's malloc variables, said plainly where
there is no glibc, and doing what they claim: under `retain` a freed large block stays resident (until trimmed),
under `eager` it goes back at once."""
import json
import os
import subprocess
import sys

import pytest

from reproduce.harness import allocator

GLIBC = allocator._glibc() is not None


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(allocator, "_state", {})
    return allocator


def test_no_glibc_says_the_platform_allocator_runs(fresh, monkeypatch):
    monkeypatch.setattr(fresh, "_glibc", lambda: None)
    got = fresh.apply("retain", "timed steps", {})
    assert got["policy"] == "system" and "no glibc" in got["why"] and fresh.state() == got
    assert fresh.release_free_memory() is False


@pytest.mark.skipif(not GLIBC, reason="glibc only")
def test_a_users_malloc_variables_are_kept(fresh):
    got = fresh.apply("retain", "timed steps", {"MALLOC_ARENA_MAX": "2", "PATH": "/bin"})
    assert got["policy"] == "user" and got["variables"] == {"MALLOC_ARENA_MAX": "2"} and "phases" not in got


def test_state_before_any_policy_is_the_default(fresh):
    assert fresh.state()["policy"] == "default"


PROBE = """
import json, sys
import torch
from reproduce.harness import allocator
from reproduce.harness.memory import rss_bytes
allocator.apply(sys.argv[1], "probe", {})
x = torch.ones(16 * 2**20)  # 64 MiB, above glibc's largest default mmap threshold (32 MiB)
held = rss_bytes()
del x
freed = rss_bytes()
allocator.release_free_memory()
print(json.dumps({"held": held, "freed": freed, "trimmed": rss_bytes(), "state": allocator.state()}))
"""


@pytest.mark.skipif(not GLIBC, reason="glibc only")
@pytest.mark.parametrize("policy", ["eager", "retain"])
def test_freed_blocks_stay_resident_only_under_retain(policy):
    out = subprocess.run([sys.executable, "-c", PROBE, policy], capture_output=True, text=True, check=True,
                         env={k: v for k, v in os.environ.items() if k not in allocator.USER_VARIABLES})
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["state"]["policy"] == "harness" and got["state"]["phases"]["probe"]["policy"] == policy
    drop = got["held"] - got["freed"]
    if policy == "retain":
        assert drop < 8 * 2**20  # the 64 MiB stayed in the heap for the next step
        assert got["held"] - got["trimmed"] > 48 * 2**20  # malloc_trim hands it back (before the memory baseline)
    else:
        assert drop > 48 * 2**20  # unmapped at once: the resident set follows the bytes in use
