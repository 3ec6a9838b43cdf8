"""The package layering, read from the source with ast (every import, at module level or inside a function):

- the interface (impls.api, impls.table_options), the op core (impls.core) and the data layer (impls.data) import
  no system, no sharding and no model;
- the sharding layer (impls.sharding) imports no system package and no model: it knows a system only through the
  interface;
- a system package imports no other system package (EMBark reaches the dense baseline through the registry);
- nothing under impls imports the harness (reproduce);
- in reproduce, the harness never imports the analysis, and neither imports the pipeline (reproduce.pipeline composes
  sweep -> summarize -> plot, and the other end-to-end steps);
- in reproduce, the command line (reproduce.cli) is imported by nothing but ``python -m reproduce``: the harness,
  the analysis and the pipeline work without it;
- an experiment parses and a point is named without the world outside: experiment.py imports no
  implementation, data or registry module (nothing under impls) and no harness module that resolves; point.py only
  the model's choices (impls.model);
- only the run and sweep paths resolve: the analysis (plot, report, figures) never imports resolve.py or options.py;
- the prepared layout has one owner: nothing but layout.py writes or reads meta.json (the readers and writers of the
  data layer import layout.py);
- neither module graph (impls, reproduce) has a cycle (no late import hides one)."""
from pathlib import Path

import pytest

from reproduce.harness import code

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = ("ttrec", "elrec", "ecorec", "embark", "dense", "torchrec_peer")
BOTTOM = ("impls.api", "impls.types", "impls.interface", "impls.registry", "impls.table_options", "impls.core", "impls.data")


def module_name(path: Path) -> str:
    return code.module_name(path, ROOT)


def imports_of(path: Path) -> set[str]:
    return code.imports_of(path, ROOT)


def graph(package: str) -> dict[str, set[str]]:
    return code.graph(package, ROOT)


def under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def violations(g, sources, forbidden):
    return sorted((m, i) for m, deps in g.items() for i in deps
                  if any(under(m, s) for s in sources) and any(under(i, f) for f in forbidden))


SYSTEM_PKGS = tuple(f"impls.{s}" for s in SYSTEMS)


def test_bottom_layers_import_no_system_sharding_or_model():
    g = graph("impls")
    assert not violations(g, BOTTOM, SYSTEM_PKGS + ("impls.sharding", "impls.model"))


def test_sharding_imports_no_system():
    g = graph("impls")
    assert not violations(g, ("impls.sharding",), SYSTEM_PKGS + ("impls.model",))


@pytest.mark.parametrize("system", SYSTEMS)
def test_a_system_imports_no_other_system(system):
    g = graph("impls")
    others = tuple(p for p in SYSTEM_PKGS if p != f"impls.{system}")
    assert not violations(g, (f"impls.{system}",), others)


def test_impls_never_imports_the_harness():
    bad = sorted((module_name(p), i) for p in (ROOT / "impls").rglob("*.py") for i in imports_of(p)
                 if under(i, "reproduce"))
    assert not bad


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m):
        state[m] = 1
        path.append(m)
        for d in sorted(g[m]):
            if state.get(d) == 1:
                return path[path.index(d):] + [d]
            if d not in state:
                found = visit(d)
                if found:
                    return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(g):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_the_harness_never_imports_the_analysis():
    g = graph("reproduce")
    assert not violations(g, ("reproduce.harness",), ("reproduce.analysis",))


def test_only_the_command_line_imports_the_pipeline():
    g = graph("reproduce")
    assert not violations(g, ("reproduce.harness", "reproduce.analysis"), ("reproduce.pipeline",))


def test_parsing_and_naming_a_point_need_no_implementation_and_no_data():
    g = graph("reproduce")
    resolving = ("reproduce.harness.resolve", "reproduce.harness.options", "reproduce.harness.calibration",
                 "reproduce.harness.datasets", "reproduce.harness.worker")
    deps = imports_of(code.modules(ROOT)["reproduce.harness.experiment"])
    assert not [d for d in deps if under(d, "impls")], deps
    for module in ("reproduce.harness.experiment", "reproduce.harness.point"):
        assert not violations(g, (module,), resolving), module
    point = imports_of(code.modules(ROOT)["reproduce.harness.point"])
    assert {d for d in point if under(d, "impls")} <= {"impls.model.choices", "impls.model.choices.INTERACTIONS",
                                                       "impls.model.choices.MLP_OPTIMIZERS",
                                                       "impls.model.choices.MODES"}, point


def test_the_analysis_never_resolves_an_experiment():
    g = graph("reproduce")
    assert not violations(g, ("reproduce.analysis",), ("reproduce.harness.resolve", "reproduce.harness.options"))


def test_the_prepared_layout_has_one_owner():
    names = {"meta.json", "dense.npy", "sparse.npy", "labels.npy", "lengths.npy", "row_offsets.npy", "values.bin",
             "rows.npy"}
    owners = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "impls").rglob("*.py")
                    if any(f'"{n}"' in p.read_text() for n in names))
    assert owners == ["impls/data/layout.py"], owners


def test_only_the_entry_point_imports_the_cli():
    g = graph("reproduce")
    assert not violations(g, ("reproduce.harness", "reproduce.analysis", "reproduce.pipeline"), ("reproduce.cli",))


@pytest.mark.parametrize("package", ["impls", "reproduce"])
def test_module_graph_has_no_cycle(package):
    g = graph(package)
    # a package's __init__ importing its own modules is not a dependency of those modules on the package
    g = {m: {d for d in deps if not under(m, d)} for m, deps in g.items()}
    assert find_cycle(g) is None, find_cycle(g)


def test_the_checks_see_a_violation():
    g = {"impls.sharding.x": {"impls.ttrec.collection"}, "impls.ttrec.collection": {"impls.sharding.x"}}
    assert violations(g, ("impls.sharding",), SYSTEM_PKGS) == [("impls.sharding.x", "impls.ttrec.collection")]
    assert find_cycle(g) == ["impls.sharding.x", "impls.ttrec.collection", "impls.sharding.x"]
