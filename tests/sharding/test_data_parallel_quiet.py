"""A data-parallel step warns about nothing: its row-sparse gradients are built in range by construction and say so
(torch warned "Sparse invariant checks are implicitly disabled" at every step, filling every run's log)."""
import warnings

import torch

from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, get_impl
from impls.sharding.context import DistContext
from impls.sharding.data_parallel import DataParallelCollection


def test_a_data_parallel_step_warns_nothing(tmp_path):
    ctx = DistContext.init(0, 1, f"file://{tmp_path}/rdzv", device="cpu", timeout_s=30)
    try:
        tables = [TableSpec("t0", 20, 4), TableSpec("t1", 30, 4)]
        coll = DataParallelCollection(tables, EmbeddingOptim("sgd", lr=0.1), ctx, local_cls=get_impl("dense-torch"))
        sf = SparseFeatures(torch.tensor([1, 2, 3, 4]), torch.tensor([0, 1, 2, 3, 4]), 2)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            coll(sf).sum().backward()
            coll.optimizer_step()
    finally:
        ctx.close()
