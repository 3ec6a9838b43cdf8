import os

import pytest
import torch

if os.environ.get("PYTEST_XDIST_WORKER"):  # `make test` runs one worker per core: each keeps to one intra-op thread
    torch.set_num_threads(1)


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


def tt_targets():
    """(device, CPU ISA build) pairs the TT ops are tested on: every ISA build of the CPU kernels in the library
    (an AVX-512 build carries an AVX2 one, so CI on either kind of machine runs the AVX2 kernels), and cuda (None)
    when present."""
    from impls.core import ops

    return [("cpu", isa) for isa in ops.cpu_isas()] + ([("cuda", None)] if torch.cuda.is_available() else [])


def on_target(target):
    """The context a test body runs the TT ops in for one tt_targets() entry: (device, its ISA scope)."""
    from contextlib import nullcontext

    from impls.core import ops

    device, isa = target
    return device, (ops.use_cpu_isa(isa) if isa else nullcontext())
