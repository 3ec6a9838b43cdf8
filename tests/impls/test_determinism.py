"""Training is deterministic: the same seed and the same thread count (2 here, so shared
gradient rows really are summed by several threads) give bit-identical losses, tables and MLP weights, for
every implementation: single-process ones in this process, distributed-only ones on 2 gloo ranks."""
import pytest
import torch

from impls.api import get_impl, registered_names
from tests.impls.determinism_cases import train, train_on_rank
from tests.sharding.ranks import run_ranks


def available(name):
    try:
        return get_impl(name)
    except ImportError as exc:
        pytest.skip(f"{name} is not installed here: {exc}")


def assert_identical(a, b, what):
    (la, ta), (lb, tb) = a, b
    assert la == lb, f"{what}: losses differ: {la} vs {lb}"
    for i, (x, y) in enumerate(zip(ta, tb)):
        if isinstance(x, str):  # a digest from a rank
            assert x == y, f"{what}: tensor {i} differs (SHA-256 of its bytes)"
            continue
        assert torch.equal(x, y), f"{what}: tensor {i} differs by up to {float((x - y).abs().max()):.3g}"


SINGLE = [n for n in registered_names() if n not in ("embark", "torchrec")]


@pytest.mark.parametrize("optim", ["sgd", "adagrad"])
@pytest.mark.parametrize("name", SINGLE)
def test_two_runs_with_two_threads_are_bit_identical(name, optim):
    cls = available(name)
    assert not cls.distributed_only
    before = torch.get_num_threads()
    try:
        first, second = train(name, optim), train(name, optim)
    finally:
        torch.set_num_threads(before)
    assert all(torch.isfinite(torch.tensor(first[0]))), first[0]
    assert_identical(first, second, f"{name} ({optim})")


@pytest.mark.slow
@pytest.mark.parametrize("name,options", [("embark", {}), ("embark", {"storage": "tt"}), ("torchrec", {})],
                         ids=["embark", "embark-tt", "torchrec"])
def test_two_distributed_runs_are_bit_identical(tmp_path, name, options):
    cls = available(name)
    assert cls.distributed_only
    first = run_ranks(tmp_path / "a", 2, train_on_rank, name, "adagrad", options)
    second = run_ranks(tmp_path / "b", 2, train_on_rank, name, "adagrad", options)
    for rank, (x, y) in enumerate(zip(first, second)):
        assert_identical(x, y, f"{name} {options} rank {rank}")
