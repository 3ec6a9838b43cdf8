import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def devices():
    """cpu, plus cuda when present (the ops are tested on every device they have kernels for)."""
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
