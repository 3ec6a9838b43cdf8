"""check-system (reproduce/conformance): every system of this suite and the worked example conform (what does not
apply says why), four broken variants each fail on the check that names their fault, and a system written in a folder
outside the checkout runs under `run`, `sweep` and `check-system` by its spec."""
import json
import re

import pytest
from click.testing import CliRunner

from impls.api import EmbeddingOptim, get_impl, registered_names
from reproduce.cli import cli
from reproduce.conformance.cases import TABLES, structure_options
from reproduce.conformance.checks import CHECKS, FAIL, NA, PASS, Subject, run_checks
from reproduce.harness import fingerprint, systems
from tests.conformance.outside_systems import BROKEN, forget_loaded_since, robe_source, source

EXAMPLE = "examples/lowrank.py:LowRankEmbedding"


@pytest.fixture
def outside(tmp_path):
    """Load outside systems by spec; forget them afterwards (the registry is the process's)."""
    before = set(systems._loaded)
    yield systems.load
    forget_loaded_since(before)


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "mine").mkdir()
    path = tmp_path / "mine" / "plain.py"
    path.write_text(source())
    return path


def _verdicts(cls, spec=None):
    return {o.check: o for o in run_checks(Subject(cls, structure_options(cls), spec))}


@pytest.mark.parametrize("name", registered_names())
def test_every_system_of_the_suite_conforms(name):
    try:
        cls = get_impl(name)
    except ImportError as exc:
        pytest.skip(f"{name} is not installed here: {exc}")
    verdicts = _verdicts(cls)
    assert list(verdicts) == list(CHECKS)
    assert not [o for o in verdicts.values() if o.status == FAIL], [o for o in verdicts.values() if o.status == FAIL]
    assert all(o.why for o in verdicts.values())  # a pass says what it held, an n/a why it does not apply
    assert verdicts["ranks"].status == PASS
    if cls.distributed_only:
        assert verdicts["forward"].status == NA and "ranks only" in verdicts["forward"].why
    elif not cls.supports_external_update:
        assert verdicts["gradient"].status == NA and "inside backward" in verdicts["gradient"].why


def test_memory_counts_a_tensor_that_tables_share_once():
    """A system whose tables share a tensor (here: every table also lists the first table's) holds it once: the
    memory check counts distinct tensors."""
    base = get_impl("dense-torch")

    class Shares(base):
        def table_parameters(self, table):
            own = list(super().table_parameters(table))
            first = self.tables[0].name
            return own if table == first else own + list(super().table_parameters(first))

    (verdict,) = run_checks(Subject(Shares, {}), ["memory report"])
    assert verdict.status == PASS, verdict


def test_the_worked_example_conforms(outside):
    name = outside(EXAMPLE)
    verdicts = _verdicts(get_impl(name), systems.source(name).spec)
    assert {o.status for o in verdicts.values()} == {PASS}, verdicts


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_each_broken_variant_fails_on_its_check(outside, folder, variant):
    name = outside(f"{folder}:{variant}")
    verdicts = {o.check: o for o in run_checks(Subject(get_impl(name), {}), [c for c in CHECKS if c != "ranks"])}
    failed = {c for c, o in verdicts.items() if o.status == FAIL}
    assert BROKEN[variant] in failed, verdicts
    assert verdicts["interface"].status == PASS and verdicts["bad ids"].status == PASS
    if variant == "NonDeterministic":
        assert failed == {"deterministic"}
    if variant == "IgnoresLearningRate":
        assert verdicts["gradient"].status == PASS  # its gradients are right; its step is not


def test_check_system_cli_names_the_failing_check(outside, folder):
    res = CliRunner().invoke(cli, ["check-system", f"{folder}:OffByOne", "--check", "forward", "--check", "interface"],
                             terminal_width=200)
    assert res.exit_code == 1 and "FAILS forward" in res.output, res.output
    assert "table 'a': pooled bags" in " ".join(res.output.split())  # the failing table is named
    res = CliRunner().invoke(cli, ["check-system", f"{folder}:Template"], terminal_width=200)
    assert res.exit_code == 0 and "template: conforms" in res.output, res.output
    res = CliRunner().invoke(cli, ["check-system", f"{folder}:Nope"])
    assert res.exit_code == 2 and "has no 'Nope'" in res.output
    res = CliRunner().invoke(cli, ["check-system", "dense-torch", "--check", "speed"])
    assert res.exit_code == 2 and "no check ['speed']" in res.output


def test_check_system_help_says_what_it_checks():
    res = CliRunner().invoke(cli, ["check-system", "--help"], terminal_width=200)
    text = " ".join(res.output.split())
    assert res.exit_code == 0 and "Hold SYSTEM to the interface" in text and "2 gloo ranks" in text, res.output
    res = CliRunner().invoke(cli, ["--help"], terminal_width=200)
    assert "check-system Hold SYSTEM to the interface" in " ".join(res.output.split()), res.output  # the command list


def test_a_spec_is_refused_by_name(outside, tmp_path):
    with pytest.raises(ValueError, match="no file"):
        outside(f"{tmp_path}/absent.py:X")
    (tmp_path / "taken.py").write_text("from impls.dense.torch_bag import DenseTorch\n"
                                       "class Taken(DenseTorch):\n    name = 'hash'\n"
                                       "class Nameless(DenseTorch):\n    pass\n")
    with pytest.raises(ValueError, match="taken by a system of this suite"):
        outside(f"{tmp_path}/taken.py:Taken")
    with pytest.raises(ValueError, match="sets no `name` of its own"):
        outside(f"{tmp_path}/taken.py:Nameless")
    with pytest.raises(ValueError, match="cannot import 'not_a_module_here'"):
        outside("not_a_module_here:X")
    with pytest.raises(ValueError, match="unknown implementation 'lowrnk'.*--impl package.module:Class"):
        systems.resolve("lowrnk")


SMALL = ["--data", "uniform", "--num-tables", "2", "--rows", "100", "--dim", "4", "-b", "8", "--iters", "1",
         "--warmup", "0", "--mode", "embedding-only"]


def test_a_run_races_an_outside_system_and_fingerprints_its_code(outside, folder, tmp_path):
    spec = f"{folder}:Template"
    res = CliRunner().invoke(cli, ["run", "--impl", "dense-fbgemm", "--impl", spec, *SMALL, "--out",
                                   str(tmp_path / "run")], terminal_width=200)
    assert res.exit_code == 0, res.output
    rec = json.loads(next((tmp_path / "run").glob("template__*.json")).read_text())
    assert rec["status"] == "ok" and rec["point"]["impl"] == "template"
    code = rec["body"]["code"] if "body" in rec else rec["code"]
    assert code["system"]["spec"] == f"{folder.resolve()}:Template" and str(folder.resolve()) in code["files"]
    assert fingerprint.changes(code, rec["point"]) == []
    folder.write_text(source() + "\nEDITED = True\n")  # the system's code changed: its records no longer describe it
    assert fingerprint.changes(code, rec["point"]) == [str(folder.resolve())]
    res = CliRunner().invoke(cli, ["run", "--impl", EXAMPLE, *SMALL, "-o", "lowrank.rnk=3"], terminal_width=200)
    assert res.exit_code == 2 and "did you mean 'rank'" in res.output, res.output  # its declared options, checked


def test_an_outside_system_runs_over_ranks_through_its_own_worker(outside, folder, tmp_path):
    res = CliRunner().invoke(cli, ["run", "--impl", f"{folder}:Template", *SMALL, "--world-size", "2", "--out",
                                   str(tmp_path)], terminal_width=200)  # torchrun starts every rank through it
    assert res.exit_code == 0, res.output
    (rec,) = tmp_path.glob("template__*.json")
    assert json.loads(rec.read_text())["status"] == "ok"


def test_a_sweep_races_an_outside_system_in_the_slot_its_experiment_leaves(outside, folder, tmp_path):
    spec = f"{folder}:Template"
    exp = tmp_path / "outside.toml"
    exp.write_text('name = "outside"\nrepeats = 1\n[defaults]\nmode = "embedding-only"\niters = 1\nwarmup = 0\n'
                   'num_batches = 1\n[data_options]\nnum_tables = 2\nrows = 100\ndim = 4\n[grid]\n'
                   'impl = ["dense-fbgemm", "$IMPL"]\ndata = ["uniform"]\nbatch_size = [8]\n')
    args = ["sweep", str(exp), "--root", str(tmp_path / "root"), "--machine", "m", "--no-probe"]
    res = CliRunner().invoke(cli, [*args, "--impl", spec], terminal_width=200)
    assert res.exit_code == 0, res.output
    names = sorted(p.name.split("__")[0] for p in (tmp_path / "root" / "results" / "outside" / "m").glob("*.json"))
    assert names == ["dense-fbgemm", "template"], names
    res = CliRunner().invoke(cli, [*args, "--dry-run"], terminal_width=200)  # without --impl: the slot is empty
    assert res.exit_code == 0 and "1 points" in res.output, res.output


def test_an_entry_point_named_like_one_of_ours_is_refused(tmp_path, monkeypatch):
    site = tmp_path / "site"
    info = site / "shadow-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shadow\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[dlrmbench.systems]\necorec = shadow:EcoRec\n")
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(ValueError, match=r"'ecorec' is taken by a system of this suite, and an installed package "
                                         r"declares a system by it too .*ecorec = shadow:EcoRec"):
        systems.resolve("ecorec")
    assert systems.resolve("elrec") == "elrec"  # the suite's other names are untouched


def test_an_installed_package_declares_its_system_by_entry_point(outside, tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "plainpkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(source())
    info = tmp_path / "site" / "plainpkg-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plainpkg\nVersion: 1.2.3\n")
    (info / "top_level.txt").write_text("plainpkg\n")
    (info / "entry_points.txt").write_text("[dlrmbench.systems]\ntemplate = plainpkg:Template\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert "template" in systems.installed() and "template" not in registered_names()  # found, not loaded
    assert systems.resolve("template") == "template"  # loaded when named
    src = systems.source("template")
    assert src.spec == "plainpkg:Template" and src.version == "1.2.3" and src.files() == [(pkg / "__init__.py").resolve()]


ROBE = "examples/robe.py:RobeEmbedding"


def test_a_system_whose_tables_share_one_array_conforms(outside):
    """examples/robe.py: every table reads one flat array (table_parameters of each is the same tensor). The
    gradient, SGD and Adagrad checks differentiate and step all tables at once, the memory check counts the array
    once, and the ranks check runs it over its own dist_defaults (data-parallel)."""
    name = outside(ROBE)
    cls = get_impl(name)
    emb = cls(list(TABLES), EmbeddingOptim("sgd", lr=0.1), size=96)
    assert len({p.data_ptr() for t in emb.tables for p in emb.table_parameters(t.name)}) == 1
    verdicts = _verdicts(cls, systems.source(name).spec)
    assert {o.status for o in verdicts.values()} == {PASS}, verdicts
    assert "data-parallel sharding (its dist_defaults)" in verdicts["ranks"].why
    assert "all tables at once" in verdicts["adagrad"].why


def test_planted_bugs_in_the_shared_array_system_still_fail(outside, tmp_path):
    path = tmp_path / "robe_planted.py"
    path.write_text(robe_source())
    wrong = get_impl(outside(f"{path}:RobeWrongGradient"))
    verdicts = {o.check: o for o in run_checks(Subject(wrong, {"size": 96}), ["gradient", "sgd", "forward"])}
    assert verdicts["gradient"].status == FAIL and verdicts["forward"].status == PASS, verdicts
    stale = get_impl(outside(f"{path}:RobeStaleAdagrad"))
    verdicts = {o.check: o for o in run_checks(Subject(stale, {"size": 96}), ["gradient", "sgd", "adagrad"])}
    assert verdicts["adagrad"].status == FAIL and "two adagrad steps" in verdicts["adagrad"].why, verdicts
    assert verdicts["sgd"].status == PASS and verdicts["gradient"].status == PASS


def test_the_ranks_check_over_another_sharding_names_the_rank_and_the_table(outside):
    """Table-wise sharding gives each rank an array of its own tables (another model): check-system --sharding
    table-wise says so, naming the rank and the table whose rows differ."""
    res = CliRunner().invoke(cli, ["check-system", ROBE, "--check", "ranks", "--sharding", "table-wise"],
                             terminal_width=240)
    said = " ".join(res.output.split())
    assert res.exit_code == 1 and "FAILS ranks" in said, said
    assert re.search(r"rank \d's pooled rows of table '\w' \(bags [\d.]+, table-wise sharding\)", said), said
