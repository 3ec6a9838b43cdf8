"""An experiment TOML parsed into plain point specs: its grids (``[grid]``, each ``[[grids]]``) expanded over
``[defaults]``, its ``[[points]]``, its variants, its profile applied. Parsing reads the TOML and nothing else: no
dataset is opened or written, no implementation imported, no calibration profile looked for, so `plot`, `report`, a
dry run or a test can read an experiment whose data does not exist. resolve.py turns the specs into run points (the
one step that touches data, budgets and calibration profiles; `run` and `sweep` only)."""
from __future__ import annotations

import itertools
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reproduce.harness.evidence import Rounds, parse_headline, select_control, twin_label

DEFAULT_PROFILE = "cpu"
DEFAULT_REPEATS = 3  # independent processes per point, interleaved across points (A B C C B A)
DATA_PLACEHOLDER = "$DATA"  # a grid's or point's data that `sweep --data DIR` names (a user's own dataset)
# a grid's `variant` or `impl` entry that `sweep --impl NAME|SPEC` fills with each system given (an outside system
# raced beside ours on the grid's other axes, labelled by its name); without --impl it stands for nothing
IMPL_PLACEHOLDER = "$IMPL"
# max_rows / rows: data options; variant: a name from [variants.NAME] (impl, label, impl_options, ... of one
# system setup)
# seed: the run's seed (data stream, initial weights, hashes); budget: a fraction of the dense tables' bytes that sizes
# each system (options_for_budget; a point that cannot fit it is set aside as infeasible, with the reason)
GRID_KEYS = ("impl", "data", "batch_size", "mode", "optimizer", "world_size", "gpus_per_node", "max_rows", "rows",
             "variant", "seed", "budget")
PROFILE_KEYS = {"grid", "defaults", "grids", "points", "description", "results", "repeats", "impl_options",
                "data_options", "synth", "control", "headline", "rounds"}
FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


@dataclass(frozen=True)
class PointSpec:
    """One point as the experiment states it: its fields (RunPoint's) with ``data`` possibly ``$DATA``,
    ``impl_options`` the experiment's whole options table (plain keys and per-implementation tables, routed when
    resolved) and ``own_options`` the point's or its variant's own; ``where`` names it in errors."""

    fields: dict[str, Any]
    own_options: dict[str, Any]
    where: str
    in_grid: bool = True  # a grid point that cannot fit its budget is set aside; a [[points]] entry is an error

    @property
    def impl(self) -> str:
        return str(self.fields.get("impl", ""))

    @property
    def budget(self) -> float:
        return float(self.fields.get("budget") or 0.0)

    def matches(self, point: dict[str, Any]) -> bool:
        """Whether a point (a record's) is one this spec resolves to: every field the spec states has the point's
        value, except what resolution fills in (``$DATA``, the options a budget sizes, a calibration profile)."""
        for k, v in self.fields.items():
            if k in ("impl_options", "data_options"):
                continue
            if k == "data" and v == DATA_PLACEHOLDER:
                continue
            if k == "nnodes" and v == "auto":
                continue
            if point.get(k, v) != v and not (isinstance(v, (list, tuple)) and list(point.get(k)) == list(v)):
                return False
        if point.get("data_options", {}) != self.fields.get("data_options", {}):
            return False
        opts = point.get("impl_options", {})
        stated = {**{k: v for k, v in self.fields.get("impl_options", {}).items() if not isinstance(v, dict)},
                  **(self.fields.get("impl_options", {}).get(self.impl) or {}), **self.own_options}
        # a plain key reaches only the systems that take it: those it reached must carry its value
        return all(opts[k] == v for k, v in stated.items() if k in opts)


@dataclass(frozen=True)
class Experiment:
    """An experiment file with its profile applied: its name, result folder, figures, repeats and point specs."""

    path: Path
    name: str
    description: str
    profile: str
    results: str  # the result set's folder under results/ (and figures/)
    plots: tuple[str, ...]
    specs: tuple[PointSpec, ...]
    repeats: int = DEFAULT_REPEATS
    point_timeout_s: float | None = None
    synth: dict[str, Any] | None = None  # the [synth] dataset its $DATA points train on without --data
    reads_data: bool = False  # some point reads $DATA
    impl_options: dict[str, Any] = field(default_factory=dict)  # the experiment's options table, as written
    models: tuple[str, ...] = ()  # what runs after its sweep (`dlrmbench model NAME`: analysis/models.py)
    report: tuple[str, ...] = ()  # the report's tables drawn from its result set (analysis/set_blocks.py SET_BLOCKS)
    reference: tuple[str, ...] = ()  # the profiles whose result sets are committed reference sets
    # the evidence (evidence.py): the A/A control's label (its twin runs beside it), the headline ratios, and the
    # rounds that resolve them
    control: str | None = None
    headline: tuple[tuple[str, str], ...] = ()
    rounds: Rounds = field(default_factory=Rounds)

    def results_dir(self, root: str | Path) -> Path:
        """results/<its folder>: one result set per machine inside."""
        return Path(root) / "results" / self.results

    def out_dir(self, root: str | Path, machine: str) -> Path:
        return self.results_dir(root) / machine

    def figures_dir(self, root: str | Path, machine: str) -> Path:
        return Path(root) / "figures" / self.results / machine

    @property
    def impls(self) -> list[str]:
        """The implementations in the order the experiment names them (the first is the baseline of speedups)."""
        return list(dict.fromkeys(s.impl for s in self.specs))


def folder_name(value: object, what: str) -> str:
    """``value`` when it can name one folder under results/ and figures/ (letters, digits, '.', '-', '_'; no path
    separator, no leading dot): an experiment's name or results folder never writes outside ``--root``."""
    if not isinstance(value, str) or not FOLDER_NAME.fullmatch(value):
        raise ValueError(f"{what} = {value!r} must name one folder: letters, digits, '.', '-' or '_', starting with a "
                         f"letter or digit (at most 100)")
    return value


def read_toml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"experiment file not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: invalid TOML: {exc}") from None


def apply_profile(doc: dict[str, Any], profile: str | None, path: Path) -> tuple[dict[str, Any], str]:
    """Overlay ``[profiles.NAME]`` on the experiment: its ``grid`` and ``defaults`` keys replace those of the
    experiment, its ``grids`` / ``points`` / ``results`` / ``impl_options`` / ``data_options`` (when given) replace
    the experiment's; ``synth = false`` drops the experiment's own dataset (a profile for data of yours: it then
    needs --data). Without ``profile`` an experiment with profiles runs its ``cpu`` one; an experiment without a
    ``cpu`` profile is its own (the file as written), whether or not ``cpu`` is named."""
    profiles = doc.get("profiles", {})
    name = profile or DEFAULT_PROFILE
    if name not in profiles:
        if name == DEFAULT_PROFILE:
            return doc, DEFAULT_PROFILE  # no cpu profile: the file as written is the cpu profile
        raise ValueError(f"{path}: no profile {name!r}; it has {sorted(profiles) or 'none'}")
    over = profiles[name]
    bad = sorted(set(over) - PROFILE_KEYS)
    if bad:
        raise ValueError(f"{path}: [profiles.{name}] has unknown keys {bad}")
    if over.get("synth", False) is not False:
        raise ValueError(f"{path}: [profiles.{name}] synth can only be false (the profile trains on --data only)")
    out = dict(doc)
    out["grid"] = {**doc.get("grid", {}), **over.get("grid", {})}
    out["defaults"] = {**doc.get("defaults", {}), **over.get("defaults", {})}
    for k in ("grids", "points", "description", "results", "repeats", "impl_options", "data_options", "control",
              "headline", "rounds"):
        if k in over:
            out[k] = over[k]
    if "synth" in over:
        out.pop("synth", None)
    return out, name


def reads_data(doc: dict[str, Any]) -> bool:
    """Whether a grid or point of the (profiled) experiment reads ``$DATA``."""
    grids = [doc.get("grid", {}), *doc.get("grids", [])]
    return (any(DATA_PLACEHOLDER in g.get("data", []) for g in grids)
            or any(p.get("data") == DATA_PLACEHOLDER for p in doc.get("points", [])))


def _grid_specs(grid: dict[str, Any], where: str, base: dict[str, Any], variants: dict[str, Any],
                impls: tuple[str, ...] = ()) -> list[PointSpec]:
    bad = sorted(set(grid) - set(GRID_KEYS))
    if bad:
        raise ValueError(f"{where}: unknown grid keys {bad}; allowed: {GRID_KEYS}")
    for k in ("data", "batch_size"):
        if k not in grid:
            raise ValueError(f"{where} needs a list for {k!r}")
    if "impl" not in grid and "variant" not in grid:
        raise ValueError(f"{where} needs a list for 'impl' (or 'variant')")
    for k, v in grid.items():
        if not isinstance(v, list):
            raise ValueError(f"{where}: {k} must be a list, got {v!r}")
    unknown = sorted(set(grid.get("variant", [])) - set(variants) - {IMPL_PLACEHOLDER})
    if unknown:
        raise ValueError(f"{where}: variant(s) {unknown} have no [variants.NAME] table")
    outside = {f"{IMPL_PLACEHOLDER}{name}": {"impl": name, "label": name} for name in impls}  # the slot's variants
    fill = {"variant": list(outside), "impl": list(impls)}
    grid = {k: [x for v in vals for x in (fill.get(k, [v]) if v == IMPL_PLACEHOLDER else [v])]
            for k, vals in grid.items()}
    if any(not vals for vals in grid.values()):  # only the slot, and no system given for it
        return []
    keys = list(grid)
    specs = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        fields = {**base, **dict(zip(keys, combo))}
        own: dict[str, Any] = {}
        if "variant" in fields:
            v = dict({**variants, **outside}[fields.pop("variant")])
            own = dict(v.pop("impl_options", {}))
            fields.update(v)
        data_options = dict(base["data_options"])
        if "max_rows" in fields:  # the table-size axis: a cap on every table (0 = the preset's sizes)
            cap = fields.pop("max_rows")
            data_options.update({"max_rows": cap} if cap else {})
        if "rows" in fields:  # the row count of presets that take one (sc24-f4, uniform)
            data_options["rows"] = fields.pop("rows")
        fields["data_options"] = data_options
        specs.append(PointSpec(fields, own, f"{where}: bad point {dict(zip(keys, combo))}"))
    return specs


def has_slot(doc: dict[str, Any]) -> bool:
    """Whether a grid of the (profiled) experiment has the ``$IMPL`` slot that `sweep --impl` fills."""
    return any(IMPL_PLACEHOLDER in g.get(k, []) for g in [doc.get("grid") or {}, *doc.get("grids", [])]
               for k in ("variant", "impl"))


def parse(path: str | Path, profile: str | None = None, doc: dict[str, Any] | None = None,
          impls: tuple[str, ...] = ()) -> Experiment:
    """The experiment at ``path`` (``doc``: its parsed TOML, when read already) with ``profile`` applied (default
    cpu): ``[grid]`` and each ``[[grids]]`` (lists) expanded over ``[defaults]``, ``[data_options]`` on every point,
    ``[impl_options]`` kept whole for resolve to route, ``[[points]]`` added (their own ``impl_options`` overlay the
    routed ones). A profile other than cpu writes to results/NAME_PROFILE unless it names its ``results`` folder.
    ``impls``: the systems (registry names) that fill the grids' ``$IMPL`` slot; an experiment without one refuses
    them."""
    from reproduce.harness.synth_data import synth_table

    path = Path(path)
    doc, profile = apply_profile(read_toml(path) if doc is None else doc, profile, path)
    name = folder_name(doc.get("name") or path.stem, f"{path}: name")
    variants = doc.get("variants", {})
    base = dict(doc.get("defaults", {}))
    base["data_options"] = dict(doc.get("data_options", {}))
    base["impl_options"] = dict(doc.get("impl_options", {}))
    if impls and not has_slot(doc):
        raise ValueError(f"{path}: no grid has a {IMPL_PLACEHOLDER!r} slot in its variant or impl list, so "
                         f"{', '.join(impls)} would not be raced; add one (see compression.toml)")
    specs = _grid_specs(doc["grid"], f"{path}: [grid]", base, variants, impls) if doc.get("grid") else []
    for i, grid in enumerate(doc.get("grids", [])):  # [[grids]]: further grids over the same defaults
        specs += _grid_specs(grid, f"{path}: [[grids]] #{i + 1}", base, variants, impls)
    for extra in doc.get("points", []):  # [[points]]: single points beside the grid (e.g. option variants)
        fields = {**base, **{k: v for k, v in extra.items() if k != "impl_options"}}
        fields["data_options"] = {**base["data_options"], **extra.get("data_options", {})}
        specs.append(PointSpec(fields, dict(extra.get("impl_options", {})), f"{path}: bad [[points]] entry {extra}",
                               in_grid=False))
    control = None
    if doc.get("control") is not None:  # the A/A control: its twin right after it (adjacent in every round)
        i = select_control(specs, doc["control"], str(path))
        orig = specs[i]
        control = orig.fields.get("label") or orig.impl
        specs.insert(i + 1, PointSpec({**orig.fields, "label": twin_label(control), "twin": 1}, orig.own_options,
                                      orig.where + " (its A/A twin)", orig.in_grid))
    synth = synth_table(doc, path) if reads_data(doc) else None
    if synth is not None:
        folder_name(synth["name"], f"{path}: [synth] name")
    results = folder_name(doc.get("results") or (name if profile == DEFAULT_PROFILE else f"{name}_{profile}"),
                          f"{path}: results")
    repeats = int(doc.get("repeats", DEFAULT_REPEATS))
    if repeats < 1:
        raise ValueError(f"{path}: repeats must be >= 1, got {repeats}")
    lists = {}
    for key in ("plots", "models", "report", "reference"):
        value = doc.get(key, [])
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise ValueError(f"{path}: {key} must be a list of names, got {value!r}")
        lists[key] = tuple(value)
    unknown = sorted(set(lists["reference"]) - {DEFAULT_PROFILE, *doc.get("profiles", {})})
    if unknown:
        raise ValueError(f"{path}: reference names profiles it does not have: {unknown}")
    return Experiment(path=path, name=name, description=doc.get("description", ""), profile=profile, results=results,
                      specs=tuple(specs), repeats=repeats, point_timeout_s=doc.get("point_timeout_s"), synth=synth,
                      reads_data=reads_data(doc), impl_options=base["impl_options"], control=control,
                      headline=parse_headline(doc.get("headline"), str(path)),
                      rounds=Rounds.parse(doc.get("rounds"), str(path)), **lists)


def default_slot(path: str | Path) -> tuple[str, ...]:
    """The systems an experiment's ``$IMPL`` slot races when `--impl` names none (its ``impl_slot`` list); a file
    spec relative to the project (``examples/lowrank.py:Class``) is found there from any working folder."""
    slot = read_toml(path).get("impl_slot", [])
    if not isinstance(slot, list) or not all(isinstance(x, str) for x in slot):
        raise ValueError(f"{path}: impl_slot must be a list of system names or specs, got {slot!r}")
    project = experiments_folder().parents[1]
    out = []
    for spec in slot:
        file, sep, cls = spec.rpartition(":")
        if sep and file.endswith(".py") and not Path(file).exists() and (project / file).is_file():
            spec = f"{project / file}:{cls}"
        out.append(spec)
    return tuple(out)


def experiments_folder() -> Path:
    """The folder of the project's experiments (one TOML each): the one list of them."""
    return Path(__file__).resolve().parents[1] / "experiments"


def experiment_names() -> list[str]:
    """Every experiment of the project: the TOMLs of the experiments folder (the one list of them)."""
    return sorted(p.stem for p in experiments_folder().glob("*.toml"))


def experiment_name(text: str) -> str:
    """The experiment ``text`` names: a file's stem, with '-' and '_' alike (`make reproduce-sc24-table1` names
    sc24_table1); ValueError naming the experiments otherwise."""
    names = experiment_names()
    match = [n for n in names if n.replace("_", "-") == text.replace("_", "-")]
    if not match:
        raise ValueError(f"no experiment {text!r}; the experiments: {', '.join(names)}")
    return text if text in match else match[0]


def experiment(name: str, profile: str | None = None) -> Experiment:
    """The project's experiment ``name`` (a file of the experiments folder: ``experiment_name``) with ``profile``
    applied."""
    return parse(experiments_folder() / f"{experiment_name(name)}.toml", profile)


def needs_your_data(exp: Experiment) -> bool:
    """Whether the (profiled) experiment trains only on a dataset of yours (``synth = false``: it needs --data)."""
    return exp.reads_data and exp.synth is None


def profiles_to_reproduce(name: str, with_data: bool = False) -> list[str]:
    """The profiles `dlrmbench reproduce NAME` runs when no --profile is given: its reference profiles (the committed
    sets it regenerates) that train on the experiment's own data; ``with_data`` (--data given): its profiles that
    train on yours. Its default profile when there are none."""
    doc = read_toml(experiments_folder() / f"{experiment_name(name)}.toml")
    listed = list(doc.get("profiles", {})) if with_data else list(doc.get("reference", []))
    chosen = [p for p in listed if needs_your_data(experiment(name, p)) == with_data]
    return chosen or [DEFAULT_PROFILE]


def reference_sets() -> list[str]:
    """The result sets (results/<name>) of every experiment's reference profiles: the committed reference sets."""
    out = []
    for name in experiment_names():
        for profile in experiment(name).reference:
            out.append(experiment(name, profile).results)
    return out


def report_blocks() -> list[tuple[str, str]]:
    """(block, result set) of every table an experiment's ``report`` names (drawn from its cpu profile's set)."""
    return [(block, exp.results) for exp in (experiment(n) for n in experiment_names()) for block in exp.report]
