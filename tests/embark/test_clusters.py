"""EMBark's DP / RB / UB clusters on 2 and 4 gloo ranks: forward, loss and every table after one step equal the
single-device model; bytes equal §1.4's closed forms exactly; fp16 payloads halve the bytes."""
import pytest

from tests.sharding.ranks import run_ranks
from tests.embark import cluster_cases as cc


@pytest.mark.parametrize("world", [2, 4])
def test_clusters_equal_single_device(tmp_path, world):
    run_ranks(tmp_path, world, cc.check_embark, "sgd", False)


def test_adagrad_and_fp16_payloads(tmp_path):
    run_ranks(tmp_path / "a", 2, cc.check_embark, "adagrad", False)
    fp32 = run_ranks(tmp_path / "b", 2, cc.check_embark, "sgd", False)
    fp16 = run_ranks(tmp_path / "c", 2, cc.check_embark, "sgd", True)
    for a, b in zip(fp32, fp16):
        for phase in ("embark.fwd", "embark.bwd"):
            assert b[phase] * 2 == a[phase]


def test_hierarchical_rb_two_nodes_of_two(tmp_path):
    """Same numbers as one device; the rail (inter-node) bytes of each GPU are 1/L of what a flat exchange of the
    same shards sends to the other node."""
    sent = run_ranks(tmp_path, 4, cc.check_embark, "sgd", False, True, L=2)
    flat_inter = cc.flat_inter_node_bytes(cc.hier_plan(), 12, 2)
    for rank, s in enumerate(sent):
        assert s["embark.fwd.rail"] * 2 == flat_inter[rank]


def test_tt_tables_inside_clusters(tmp_path):
    run_ranks(tmp_path, 2, cc.check_tt_storage)


@pytest.mark.parametrize("strategy", ["embark", "table_row_wise", "uniform", "round_robin"])
def test_planner_and_baseline_plans_execute_exactly(tmp_path, strategy):
    """4 ranks as 2 nodes of 2, so table_row_wise (and possibly the planner) run hierarchical RB."""
    run_ranks(tmp_path, 4, cc.check_strategy_plans, strategy, L=2)


def test_calibrated_planner_executes_exactly(tmp_path):
    import json

    from tests.embark.test_calibrated import profile

    path = tmp_path / "gloo.json"
    path.write_text(json.dumps(profile(a2a=(1e-4, 1e-9), ar=(1e-4, 1e-9)).to_dict()))
    run_ranks(tmp_path / "ranks", 2, cc.check_calibrated_planner, str(path))


def test_build_draws_only_the_ranks_own_shards(tmp_path):
    run_ranks(tmp_path, 4, cc.check_build_generates_own_shards_only)
