"""An experiment's budget and seed axes: every system sized to a fraction of the dense tables' bytes by its own rule
(options_for_budget), what cannot fit set aside with its reason (and written beside the records), seeds as points of
their own; and an experiment's own dataset ([synth]), written by the sweep and refused until then."""

import pytest

from impls.api import get_impl
from impls.data.presets import get_preset
from reproduce.analysis.aggregate import summarize_experiment
from reproduce.analysis.frontier import INFEASIBLE, read_infeasible
from reproduce.harness.experiment import parse
from reproduce.harness.resolve import load_experiment
from reproduce.harness.point import RunPoint
from reproduce.harness.synth_data import synth_folder, write_synth

DATA = 'data = ["uniform"]\nbatch_size = [64]\n'
HEAD = """name = "budgets"
repeats = 1
[defaults]
iters = 2
warmup = 0
[data_options]
num_tables = 2
rows = 5000
dim = 8
[variants.dense]
impl = "dense-torch"
label = "dense"
[variants.hash]
impl = "hash"
impl_options = { min_rows = 100 }
[variants.md]
impl = "md"
label = "MD"
impl_options = { min_rows = 100 }
[variants.tt]
impl = "ecorec"
label = "TT"
impl_options = { tt_min_rows = 100 }
"""


def write(tmp_path, body):
    path = tmp_path / "budgets.toml"
    path.write_text(HEAD + body)
    return path


def test_budget_and_seed_axes_size_each_system_and_set_aside_what_cannot_fit(tmp_path):
    path = write(tmp_path, f'[grid]\nvariant = ["dense"]\n{DATA}seed = [0, 1]\n'
                           f'[[grids]]\nvariant = ["hash", "md", "tt"]\n{DATA}seed = [0, 1]\nbudget = [0.5, 0.01]\n')
    exp = load_experiment(path, root=tmp_path)
    tables = get_preset("uniform", num_tables=2, rows=5000, dim=8).tables
    dense = sum(t.dense_bytes for t in tables)
    by = {(p.label or p.impl, p.budget, p.seed): p for p in exp.points}
    assert set(by) == {(n, b, s) for s in (0, 1) for n, b in
                       [("dense", 0.0), ("hash", 0.5), ("hash", 0.01), ("MD", 0.5), ("TT", 0.5), ("TT", 0.01)]}
    assert by[("hash", 0.01, 1)].impl_options == {"min_rows": 100, "budget": 0.01}
    for b in (0.5, 0.01):  # TT: the largest rank that fits, every point within its budget
        tt = by[("TT", b, 0)]
        assert sum(get_impl("ecorec").table_param_bytes(tables, tt.impl_options)) <= b * dense
    assert by[("TT", 0.5, 0)].impl_options["ranks"] > by[("TT", 0.01, 0)].impl_options["ranks"]
    assert len({p.point_id for p in exp.points}) == len(exp.points)  # seeds are points of their own
    # MD's narrowest rows (dim 1) are 1/8 of these tables: 1/100 cannot fit, once for both seeds, with MD's reason
    assert [(i.name, i.budget) for i in exp.infeasible] == [("MD", 0.01)]
    assert "md: the 2 compressed tables need" in exp.infeasible[0].reason
    exp.out_dir.mkdir(parents=True)
    summarize_experiment(exp)  # no records yet: the summary is empty, the set-aside points are written
    assert read_infeasible(exp.out_dir) == [i.__dict__ for i in exp.infeasible]
    assert not list(exp.out_dir.glob("*.json"))  # every *.json of a result set is a run's record
    only_fit = write(tmp_path, f'[grid]\nvariant = ["hash"]\n{DATA}budget = [0.5]\n')
    summarize_experiment(load_experiment(only_fit, root=tmp_path))
    assert not (exp.out_dir / INFEASIBLE).exists()  # nothing set aside now: the old list goes


def test_a_budget_that_nothing_fits_or_a_single_point_cannot_fit_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="no points to run: every one cannot fit its budget"):
        load_experiment(write(tmp_path, f'[grid]\nvariant = ["md"]\n{DATA}budget = [0.01]\n'), root=tmp_path)
    single = ('[grid]\nvariant = ["dense"]\n' + DATA + '[[points]]\nimpl = "md"\ndata = "uniform"\nbatch_size = 64\n'
              'budget = 0.01\nimpl_options = { min_rows = 100 }\n')
    with pytest.raises(ValueError, match="bad \\[\\[points\\]\\] entry.*md: the 2 compressed tables need"):
        load_experiment(write(tmp_path, single), root=tmp_path)
    with pytest.raises(ValueError, match="dense-torch: no size to set from a budget"):
        load_experiment(write(tmp_path, f'[grid]\nvariant = ["dense"]\n{DATA}budget = [0.5]\n'), root=tmp_path)
    with pytest.raises(ValueError, match="budget is a fraction"):
        RunPoint(impl="hash", data="uniform", batch_size=8, budget=1.5)


OWN = ('name = "own"\n[synth]\nname = "own-data"\npreset = "uniform"\nsamples = 300\nteacher = "vector"\n'
       'options = { num_tables = 2, rows = 400, dim = 4 }\n'
       '[defaults]\nepochs = 1\neval_every = 2\n'
       '[grid]\nimpl = ["dense-torch"]\ndata = ["$DATA"]\nbatch_size = [64]\n')
SPEC = {"name": "own-data", "preset": "uniform", "samples": 300, "teacher": "vector",
        "options": {"num_tables": 2, "rows": 400, "dim": 4}}


def test_an_experiments_own_dataset_is_refused_until_written_then_read(tmp_path):
    path = tmp_path / "own.toml"
    path.write_text(OWN)
    with pytest.raises(ValueError, match="is not written yet: `dlrmbench sweep .*` writes it first"):
        load_experiment(path, root=tmp_path)
    assert parse(path).specs[0].fields["data"] == "$DATA"  # parsed without its data: written or not
    out = write_synth(SPEC, tmp_path)
    assert out == synth_folder({"name": "own-data"}, tmp_path) and out.is_relative_to(tmp_path.resolve() / "datasets"
                                                                                        / "synth")
    (point,) = load_experiment(path, root=tmp_path).points
    assert point.data == str(out) and point.epochs == 1
    path.write_text(OWN.replace('samples = 300', 'samples = 300\nsize = 3'))
    with pytest.raises(ValueError, match=r"\[synth\] has unknown keys \['size'\]"):
        load_experiment(path, root=tmp_path)
    path.write_text(OWN.replace('name = "own-data"', 'name = "../own-data"'))  # never a folder outside datasets/synth
    with pytest.raises(ValueError, match=r"\[synth\] name .*must name one folder"):
        load_experiment(path, root=tmp_path)


def test_a_profile_for_data_of_yours_drops_the_own_dataset_and_needs_data(tmp_path):
    path = tmp_path / "own.toml"
    path.write_text(OWN + '[profiles.real]\nresults = "own_real"\nsynth = false\n')
    write_synth(SPEC, tmp_path)  # written, yet the profile never falls back to it
    with pytest.raises(ValueError, match="give --data DIR"):
        load_experiment(path, root=tmp_path, profile="real")
    mine = write_synth({**SPEC, "name": "mine"}, tmp_path)
    exp = load_experiment(path, root=tmp_path, profile="real", data=str(mine))
    assert [p.data for p in exp.points] == [str(mine)] and exp.out_dir.parent.name == "own_real"
    path.write_text(OWN + '[profiles.real]\nsynth = true\n')
    with pytest.raises(ValueError, match=r"\[profiles.real\] synth can only be false"):
        load_experiment(path, root=tmp_path, profile="real")


def test_a_dataset_gives_the_same_ids_wherever_the_checkout_is(tmp_path):
    from reproduce.harness import point as config

    ids, slugs = [], []
    for clone in ("a", "b"):
        root = (tmp_path / clone).resolve()
        root.mkdir()
        (root / "own.toml").write_text(OWN)
        write_synth(SPEC, root)
        (point,) = load_experiment(root / "own.toml", root=root).points
        ids.append(point.point_id)
        slugs.append(config.dataset_name(point.data))
    assert ids[0] == ids[1] and slugs[0] == slugs[1] == "own-data"
