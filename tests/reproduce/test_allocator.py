"""The allocator policy of measured processes: applied once, stepping aside for a user's malloc variables, said
plainly where there is no glibc, and doing what it claims (freed large blocks stay resident until trimmed)."""
import json
import subprocess
import sys

import pytest

from reproduce.harness import allocator

GLIBC = allocator._glibc() is not None


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(allocator, "_applied", None)
    return allocator


def test_no_glibc_says_the_platform_allocator_runs(fresh, monkeypatch):
    monkeypatch.setattr(fresh, "_glibc", lambda: None)
    got = fresh.retain_freed_memory({})
    assert got["policy"] == "system" and "no glibc" in got["why"]
    assert fresh.state() is got and fresh.retain_freed_memory({}) is got  # applied once
    assert fresh.release_free_memory() is False


@pytest.mark.skipif(not GLIBC, reason="glibc only")
def test_a_users_malloc_variables_are_kept(fresh):
    got = fresh.retain_freed_memory({"MALLOC_ARENA_MAX": "2", "PATH": "/bin"})
    assert got["policy"] == "user" and got["variables"] == {"MALLOC_ARENA_MAX": "2"}


def test_state_before_any_policy_is_the_default(fresh):
    assert fresh.state()["policy"] == "default"


PROBE = """
import json, sys
import torch
from reproduce.harness import allocator
from reproduce.harness.memory import rss_bytes
if sys.argv[1] == "retain":
    allocator.retain_freed_memory({})
x = torch.ones(16 * 2**20)  # 64 MiB, above glibc's largest default mmap threshold (32 MiB)
held = rss_bytes()
del x
freed = rss_bytes()
allocator.release_free_memory()
print(json.dumps({"held": held, "freed": freed, "trimmed": rss_bytes(), "state": allocator.state()}))
"""


@pytest.mark.skipif(not GLIBC, reason="glibc only")
@pytest.mark.parametrize("policy", ["default", "retain"])
def test_freed_blocks_stay_resident_only_under_the_policy(policy):
    env = {k: v for k, v in __import__("os").environ.items() if k not in allocator.USER_VARIABLES}
    out = subprocess.run([sys.executable, "-c", PROBE, policy], capture_output=True, text=True, check=True, env=env)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    drop = got["held"] - got["freed"]
    if policy == "retain":
        assert got["state"]["policy"] == "retain"
        assert drop < 8 * 2**20  # the 64 MiB stayed in the heap for the next step
        assert got["held"] - got["trimmed"] > 48 * 2**20  # malloc_trim hands it back (the memory baseline's)
    else:
        assert got["state"]["policy"] == "default"
        assert drop > 48 * 2**20  # glibc's default munmaps it at once
