"""`dlrmbench calibrate` measures this machine into a profile the planner reads; EMBark's default storage."""
import json

import pytest
import torch
from click.testing import CliRunner

from impls.embark.calibrated import Profile


@pytest.mark.slow
@pytest.mark.skipif(not torch.distributed.is_gloo_available(), reason="needs gloo")
def test_calibrate_writes_a_profile_the_planner_reads(tmp_path):
    from reproduce.cli import cli
    from reproduce.harness.calibration_run import ENGINE_WORKLOADS, QUICK

    out = tmp_path / "gloo.json"
    res = CliRunner().invoke(cli, ["calibrate", "--world", "2", "--quick"])  # never at the machine's profile
    assert res.exit_code != 0 and "--out" in res.output
    # the quick effort: the same program over a smaller grid (test_calibrated fits the full grid's shapes)
    res = CliRunner().invoke(cli, ["calibrate", "--world", "2", "--out", str(out), "--engine-workloads", "2",
                                   "--quick"])
    assert res.exit_code == 0, res.output
    p = Profile.load(out)
    assert p.backend == "gloo" and p.threads == 1 and p.cores >= 1
    for name in ("all_to_all", "all_reduce", "all_gather"):
        line = p.collectives[name][2]
        # fits of timings: their shape, never a timed inequality (the quick grid's largest message is 1 MiB, which
        # a loaded machine can time no slower than 64 B)
        assert line.fixed_s >= 0 and line.per_unit_s >= 0 and line.at(2**24) >= line.at(64)
    assert set(p.lookup) >= {"dense"}
    for per in p.lookup.values():
        for lk in per.values():
            assert min(lk.coef()) >= 0 and lk.cache_bytes > 0
            assert lk.at(2048, 2**17, 2**16, 2**17 * 512, 2**16 * 512, 2048 * 512) >= lk.at(256, 256, 256, *(256 * 64,) * 3)
    raw = json.loads(out.read_text())
    assert raw["measured"]["collectives"]["2"]["all_to_all"] and raw["env"]["cores"] == p.cores
    assert raw["effort"]["name"] == "quick" and len(raw["measured"]["collectives"]["2"]["all_to_all"]) == len(
        QUICK.sizes)
    assert raw["allocator"]["policy"] in {"harness", "user", "system"}
    # the engine term: fitted on measured steps of the candidate plans, with how well it then predicts them
    assert set(p.engine) == {2} and p.engine[2].fixed_s >= 0
    fit = raw["measured"]["engine_fit"]["2"]
    assert raw["measured"]["engine_workloads"] == [list(w) for w in ENGINE_WORKLOADS[:2]]
    assert fit["plans"] >= 8 and 0 <= fit["median_rel_err"] <= fit["max_rel_err"]
    assert {pt["plan"] for pt in raw["measured"]["engine"]["2"]} >= {"round_robin", "table_row_wise"}
    before = out.read_bytes()
    res = CliRunner().invoke(cli, ["calibrate", "--world", "2", "--out", str(out), "--if-missing"])
    assert res.exit_code == 0 and "exists" in res.output and out.read_bytes() == before
    res = CliRunner().invoke(cli, ["calibrate", "--world", "1", "--out", str(out)])
    assert res.exit_code != 0 and "world sizes must be >= 2" in res.output


def test_embark_storage_defaults_to_the_fastest_installed():
    from impls.embark.engines import default_storage

    try:
        import fbgemm_gpu  # noqa: F401
    except ImportError:
        assert default_storage() == "dense"
    else:
        assert default_storage() == "fbgemm"


def test_runs_name_their_machines_profile(tmp_path):
    """The harness names results/calibration/<machine>/<backend>.json for every EMBark run over ranks that plans on
    it (the default) and for any other strategy when the file exists; a missing one stops the run before it starts,
    saying how to write it; other systems and explicit profiles are left alone."""
    from pathlib import Path

    from reproduce.harness.calibration import missing_profiles, with_profile
    from reproduce.harness.point import RunPoint

    base = dict(data="uniform", batch_size=8, world_size=2)
    p = with_profile(RunPoint(impl="embark", **base), tmp_path, "box")
    want = str(tmp_path / "results" / "calibration" / "box" / "gloo.json")
    assert p.impl_options["calibration"] == want
    (problem,) = missing_profiles([p])
    assert want in problem and "dlrmbench calibrate --machine box --backend gloo" in problem
    rr = RunPoint(impl="embark", impl_options={"strategy": "round_robin"}, **base)
    hc = RunPoint(impl="embark", impl_options={"cost": "hugectr"}, **base)
    assert with_profile(rr, tmp_path, "box") == rr and with_profile(hc, tmp_path, "box") == hc  # run as they are
    Path(want).parent.mkdir(parents=True)
    Path(want).write_text("{}")
    assert with_profile(rr, tmp_path, "box").impl_options["calibration"] == want  # an existing profile is named
    assert not missing_profiles([p])
    own = RunPoint(impl="embark", impl_options={"calibration": "mine.json"}, **base)
    assert with_profile(own, tmp_path, "box") == own
    for other in (RunPoint(impl="torchrec", **base), RunPoint(impl="ttrec", data="uniform", batch_size=8)):
        assert with_profile(other, tmp_path, "box") == other


def test_a_sweep_without_its_profile_stops_before_it_runs(tmp_path):
    from reproduce.cli import cli
    from reproduce.harness.code import ROOT
    from reproduce.harness.resolve import load_experiment

    toml = ROOT / "reproduce" / "experiments" / "recsys24.toml"
    exp = load_experiment(toml, root=tmp_path, machine="box")
    planner = [p for p in exp.points if p.label == "embark planner"]
    assert planner and all(p.impl_options["calibration"].endswith("calibration/box/gloo.json") for p in planner)
    res = CliRunner().invoke(cli, ["sweep", str(toml), "--root", str(tmp_path), "--machine", "box"])
    assert res.exit_code != 0 and "no calibration profile" in res.output and "dlrmbench calibrate" in res.output
    assert not (tmp_path / "results" / "recsys24" / "box").exists() or not any(
        (tmp_path / "results" / "recsys24" / "box").iterdir())


def test_the_planner_without_a_profile_says_how_to_get_one():
    from impls.api import EmbeddingOptim, TableSpec
    from impls.embark.collection import EmbarkCollection

    with pytest.raises(ValueError, match=r"dlrmbench calibrate.*embark.cost=hugectr"):
        EmbarkCollection.build_distributed([TableSpec("a", 10, 4)], EmbeddingOptim("sgd", lr=0.1), None, None)
