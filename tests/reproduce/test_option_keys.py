"""Implementation options are checked against what each implementation takes before anything launches: a typo
in -o or [impl_options] names the key and a close match, options scoped to a system the run does not include are
refused, plain options go to the systems that take them (refused when none does), and the keys come from the
constructors themselves."""
import pytest
from click.testing import CliRunner

from impls.api import get_impl, registered_names
from impls.sharding.build import DIST_KEYS, accepted_options
from reproduce.cli import cli
from reproduce.harness.resolve import load_experiment
from reproduce.harness.options import check_point
from reproduce.harness.point import RunPoint


def run_cli(tmp_path, *args):
    out = tmp_path / "records"
    res = CliRunner().invoke(cli, ["run", "--data", "uniform", "--out", str(out), *args])
    assert res.exit_code == 2, res.output  # a usage error
    assert not out.exists()  # nothing launched, nothing written
    return " ".join(res.output.split())  # click wraps long lines


def test_option_typo_is_refused_with_a_close_match(tmp_path):
    msg = run_cli(tmp_path, "--impl", "ttrec", "-o", "ttrec.chunck=100")
    assert "ttrec takes no option(s) ['chunck']" in msg and "did you mean 'chunk'?" in msg
    msg = run_cli(tmp_path, "--impl", "ecorec", "-o", "nonsense=1")
    assert "ecorec takes no option(s) ['nonsense']" in msg and "micro_batches" in msg  # lists what it takes


def test_options_for_a_system_not_run_are_refused(tmp_path):
    msg = run_cli(tmp_path, "--impl", "elrec", "-o", "ttrec.chunk=5")
    assert "options for ['ttrec'], which this run does not include (it runs elrec)" in msg


def test_a_plain_option_goes_to_the_systems_that_take_it(tmp_path):
    """-o tt_min_rows=1000 with dense-torch in the run reaches the TT systems only; a key no system of the run
    takes is refused with each system's reason."""
    from reproduce.harness.options import check_shared_options, options_for

    opts = {"tt_min_rows": 1000, "ranks": 8}
    points = [RunPoint(impl=i, data="uniform", batch_size=8, impl_options=options_for(i, opts))
              for i in ("dense-torch", "ttrec", "ecorec")]
    assert [p.impl_options for p in points] == [{}, opts, opts]
    check_shared_options(opts, points, "-o")
    msg = run_cli(tmp_path, "--impl", "ttrec", "--impl", "dense-torch", "-o", "rnaks=8")
    assert "no implementation of this run takes option(s) ['rnaks']" in msg and "did you mean 'ranks'?" in msg
    assert "dense-torch takes no option(s) ['rnaks']" in msg


def test_run_settings_and_sharding_keys_are_told_apart(tmp_path):
    msg = run_cli(tmp_path, "--impl", "ttrec", "-o", "seed=3")
    assert "'seed' is a run setting (--seed)" in msg
    msg = run_cli(tmp_path, "--impl", "ttrec", "-o", "sharding=data-parallel")
    assert "'sharding' applies over ranks (world size >= 2) only" in msg
    # over ranks the same key is fine, and a system that plans itself takes its planner's keys
    check_point(RunPoint(impl="ttrec", data="uniform", batch_size=8, world_size=2,
                         impl_options={"sharding": "data-parallel"}))
    check_point(RunPoint(impl="embark", data="uniform", batch_size=8, world_size=2, impl_options={"strategy": "uniform"}))
    with pytest.raises(ValueError, match=r"embark takes no option\(s\) \['sharding'\] over 2 ranks"):
        check_point(RunPoint(impl="embark", data="uniform", batch_size=8, world_size=2,
                             impl_options={"sharding": "table-wise"}))


EXPERIMENT = """
name = "typo"
[grid]
impl = ["ttrec", "dense-torch"]
data = ["uniform"]
batch_size = [64]
"""


@pytest.mark.parametrize("table,match", [
    ("[impl_options.ttrec]\nchunck = 100\n", r"\[grid\]: bad point .*ttrec takes no option\(s\) \['chunck'\]"),
    ("[impl_options.ecorec]\nmicro_batches = 2\n", r"\[impl_options\]: options for \['ecorec'\], which this run "),
    ("[impl_options]\nrnaks = 8\n", r"no implementation of this run takes option\(s\) \['rnaks'\]"),
])
def test_experiment_options_are_checked_over_the_whole_grid(tmp_path, table, match):
    path = tmp_path / "typo.toml"
    path.write_text(EXPERIMENT + table)
    with pytest.raises(ValueError, match=match):
        load_experiment(path, root=tmp_path)
    res = CliRunner().invoke(cli, ["sweep", str(path), "--root", str(tmp_path)])
    assert res.exit_code != 0 and not (tmp_path / "results").exists()


def test_option_keys_come_from_the_constructors():
    for name in registered_names():
        try:
            cls = get_impl(name)
        except ImportError:
            continue
        one, ranks = accepted_options(cls, False), accepted_options(cls, True)
        assert one <= ranks, name
        assert not one & {"seed", "device", "check_bounds", "plan", "comm", "tables", "optim"}, name
        if not cls.distributed_only and getattr(cls, "build_distributed", None) is None:
            assert set(DIST_KEYS) <= ranks, name
    # **kwargs followed to the base constructor and every configure() of the system
    assert {"ranks", "p", "q", "cores", "tt_min_rows", "chunk", "cache_rows"} <= accepted_options(get_impl("ttrec"), False)
    assert {"micro_batches", "min_chunk", "ranks"} <= accepted_options(get_impl("ecorec"), False)
    assert {"host_pipeline"} <= accepted_options(get_impl("elrec"), False)
    assert accepted_options(get_impl("dense-torch"), False) == frozenset()
    assert {"strategy", "hw", "storage", "fp16_comm"} <= accepted_options(get_impl("embark"), True)
    # and what is accepted is really taken: a constructor refuses a key outside the set
    from impls.api import EmbeddingOptim, TableSpec

    with pytest.raises(TypeError, match="nonsense"):
        get_impl("ttrec")([TableSpec("t", 1000, 8)], EmbeddingOptim(), nonsense=1)


def test_a_plain_experiment_option_reaches_only_the_systems_that_take_it(tmp_path):
    path = tmp_path / "shared.toml"
    path.write_text(EXPERIMENT + "[impl_options]\nranks = 8\n")
    points = {p.impl: p.impl_options for p in load_experiment(path, root=tmp_path).points}
    assert points == {"ttrec": {"ranks": 8}, "dense-torch": {}}
