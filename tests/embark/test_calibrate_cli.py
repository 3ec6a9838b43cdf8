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

    out = tmp_path / "gloo.json"
    res = CliRunner().invoke(cli, ["calibrate", "--world", "2", "--out", str(out)])
    assert res.exit_code == 0, res.output
    p = Profile.load(out)
    assert p.backend == "gloo" and p.threads == 1 and p.cores >= 1
    for name in ("all_to_all", "all_reduce", "all_gather"):
        line = p.collectives[name][2]
        assert line.fixed_s >= 0 and line.per_unit_s > 0  # 16 MiB takes longer than 64 B
        assert line.at(2**24) > line.at(64)
    assert set(p.lookup) >= {"dense"}
    for per in p.lookup.values():
        for lk in per.values():
            assert min(lk.fixed_s, lk.per_bag_s, lk.per_key_s, lk.per_byte_s) >= 0
            assert lk.at(2048, 2**17, 2**17 * 512) > lk.at(256, 256, 256 * 64)
    raw = json.loads(out.read_text())
    assert raw["measured"]["collectives"]["2"]["all_to_all"] and raw["env"]["cores"] == p.cores
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
