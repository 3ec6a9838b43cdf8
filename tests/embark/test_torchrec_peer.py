"""TorchRec as a peer: KJT adapters both ways, and DistributedModelParallel (table-wise, column-wise,
data-parallel, and TorchRec's own planner choosing among them) equal to the single-device model for forward, loss
and one SGD step on 2 gloo ranks."""
import pytest
import torch

from impls.api import SparseFeatures
from tests.sharding.ranks import run_ranks
from tests.embark import torchrec_cases as tc

torchrec = pytest.importorskip("torchrec", reason="torchrec is not installed (make install installs it on CPU)")


def test_kjt_round_trip():
    from impls.ebc.kjt import from_kjt, to_kjt
    from tests.sharding.sharded_cases import global_batch

    f = global_batch(5, 1, tables=tc.TR_TABLES).sparse
    kjt = to_kjt(f, tc.TR_TABLES)
    assert list(kjt.keys()) == [t.name for t in tc.TR_TABLES] and kjt.stride() == 5
    back = from_kjt(kjt, tc.TR_TABLES)
    assert torch.equal(back.values, f.values) and torch.equal(back.offsets, f.offsets)
    rev = list(reversed(tc.TR_TABLES))  # keys in another order: permuted to the asked order
    again = from_kjt(to_kjt(f.select_tables(list(reversed(range(len(rev))))), rev), tc.TR_TABLES)
    assert torch.equal(again.values, f.values) and torch.equal(again.offsets, f.offsets)
    with pytest.raises(ValueError, match="no key"):
        from_kjt(kjt, tc.TR_TABLES[:2] + (tc.TABLES[0].__class__("zz", 3, 4),))
    assert isinstance(back, SparseFeatures)


@pytest.mark.parametrize("sharding,optim", [("table_wise", "sgd"), ("column_wise", "sgd"), ("data_parallel", "sgd"),
                                            ("table_wise", "adagrad"), ("data_parallel", "adagrad"),
                                            ("planner", "sgd")])
def test_dmp_equals_single_device(tmp_path, sharding, optim):
    run_ranks(tmp_path, 2, tc.check_torchrec, sharding, optim)


def test_unavailable_sharding_is_a_clear_error(tmp_path):
    run_ranks(tmp_path, 2, tc.check_refused, "row_wise")
