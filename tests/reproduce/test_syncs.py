"""The host-device sync count a GPU record carries (reproduce/harness/syncs.py)."""
import pytest
import torch

from reproduce.harness import syncs


def test_paths_are_named_from_the_checkout_root():
    assert syncs._short(str(syncs._ROOT / "impls" / "core" / "tt_collection.py")) == "impls/core/tt_collection.py"
    assert syncs._short(__file__) == "tests/reproduce/test_syncs.py"
    assert syncs._short("/usr/lib/python3/site-packages/torch/functional.py") == "functional.py"


@pytest.mark.gpu
def test_each_sync_is_counted_by_the_line_that_made_it():
    x = torch.ones(1000, device="cuda")

    def step():
        a = float(x.sum())  # one sync
        b = int(torch.nonzero(x > 0).shape[0])  # another
        return a + b

    out, got = syncs.counted(step)
    assert out == 2000.0
    assert got["per_step"] == 2
    assert all(where.startswith("tests/reproduce/test_syncs.py:") for where in got["where"])
    _, none = syncs.counted(lambda: x.mul_(2))
    assert none["per_step"] == 0
