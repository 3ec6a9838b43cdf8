"""Run points (one measured configuration) and experiments (a grid of points from a TOML file)."""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import re
import tomllib
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, TypeVar

from impls.data.sources import check_source
from impls.model.train import MODES

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]  # the checkout: a dataset inside it is named relative to it (portable)

OPTIMIZERS = ("sgd", "adagrad")
DEFAULT_PROFILE = "cpu"
DEFAULT_REPEATS = 3  # independent processes per point, interleaved across points (A B C C B A)


@dataclass(frozen=True)
class RunPoint:
    impl: str
    data: str
    batch_size: int
    iters: int = 10
    warmup: int = 3
    mode: str = "dlrm"
    optimizer: str = "sgd"
    lr: float = 0.01
    seed: int = 0
    threads: int | None = None
    device: str = "cpu"
    check_bounds: bool = True
    num_batches: int = 4  # distinct batches, generated before timing and cycled
    # warm-up: `warmup` steps, or with warmup_max > warmup until the step time settles (training.settled); timed
    # steps: `iters`, or with time_budget_s > 0 as many as fill it at the settled step time (at most max_iters)
    warmup_max: int = 0
    time_budget_s: float = 0.0
    max_iters: int = 200
    eval_batches: int = 0  # held-out batches for AUC / log loss after the timed steps (dlrm mode)
    eval_every: int = 0  # also evaluate after every N steps (warm-up included): an AUC-vs-step curve
    label: str = ""  # display name in tables and figures (default: impl), e.g. "ttrec normal-init"
    data_options: dict[str, Any] = field(default_factory=dict)
    impl_options: dict[str, Any] = field(default_factory=dict)
    # distributed: world_size processes (GPUs, or gloo processes on a CPU machine) launched by torchrun; each
    # rank steps on batch_size samples (the global batch is batch_size * world_size)
    world_size: int = 1
    gpus_per_node: int = 0  # L, ranks per node (0: world_size / nnodes); emulates nodes on one machine
    nnodes: int = 1
    rdzv_endpoint: str = ""  # HOST:PORT of torchrun's rendezvous (multi-node)
    dist_timeout_s: float = 300.0  # every collective; a dead peer ends the run within it
    # training (epochs > 0: `dlrmbench train`): passes over the whole training split of a dataset on disk, the
    # whole held-out split scored every eval_every steps and at the end; early_stop: evaluations without a lower
    # eval log loss before stopping (0: never)
    epochs: int = 0
    shuffle: bool = True
    early_stop: int = 0
    # the dense side of the DLRM (dlrm mode)
    mlp_optimizer: str = "sgd"
    mlp_lr: float = 0.1
    bottom: list[int] = field(default_factory=lambda: [512, 256])
    top: list[int] = field(default_factory=lambda: [512, 256])
    interaction: str = "dot"
    # the fraction of the dense tables' bytes the point's system was sized to (a compression experiment's axis: its
    # options came from impls.compress.budget.options_for_budget); 0: sized by its own options
    budget: float = 0.0

    def __post_init__(self) -> None:
        for name in ("bottom", "top"):  # lists, as a record's JSON reads them back (the id depends on it)
            if isinstance(getattr(self, name), tuple):
                object.__setattr__(self, name, list(getattr(self, name)))
        for name, value in (("lr", self.lr), ("mlp_lr", self.mlp_lr), ("dist_timeout_s", self.dist_timeout_s),
                            ("time_budget_s", self.time_budget_s),
                            *(("data_options." + k, v) for k, v in self.data_options.items()),
                            *(("impl_options." + k, v) for k, v in self.impl_options.items())):
            check_finite(name, value)
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        check_training(self)
        if int(self.batch_size) <= 0:
            raise ValueError(f"batch size must be > 0, got {self.batch_size}")
        if int(self.iters) <= 0:
            raise ValueError(f"iters must be > 0, got {self.iters}")
        if int(self.warmup) < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")
        if float(self.time_budget_s) < 0 or int(self.warmup_max) < 0:
            raise ValueError(f"time_budget_s and warmup_max must be >= 0, got {self.time_budget_s}, {self.warmup_max}")
        if self.time_budget_s and int(self.max_iters) < int(self.iters):
            raise ValueError(f"max_iters ({self.max_iters}) must be >= iters ({self.iters}) with a time budget")
        if not 0 <= float(self.budget) <= 1:
            raise ValueError(f"budget is a fraction of the dense tables' bytes in (0, 1] (0: none), got {self.budget}")
        if int(self.num_batches) <= 0:
            raise ValueError(f"num_batches must be > 0, got {self.num_batches}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        check_source(self.data, **self.data_options)
        if int(self.eval_every) < 0 or (int(self.eval_every) and not int(self.eval_batches) and not self.epochs):
            raise ValueError(f"eval_every needs eval_batches > 0 (got eval_every={self.eval_every}, "
                             f"eval_batches={self.eval_batches})")
        if self.threads is not None and int(self.threads) <= 0:
            raise ValueError(f"threads must be > 0, got {self.threads}")
        check_world(self.world_size, self.gpus_per_node, self.nnodes, self.rdzv_endpoint, self.dist_timeout_s)
        if self.world_size == 1:
            from impls.api import registered_names

            if self.impl in registered_names():
                from impls.api import get_impl

                try:
                    if get_impl(self.impl).distributed_only:
                        raise ValueError(f"{self.impl} runs over ranks only: give it a world size >= 2")
                except ImportError:
                    pass  # an optional dependency: the worker reports it
        if self.world_size > 1 and self.eval_every and not self.epochs:
            raise ValueError("eval_every is single-process only (the final evaluation works distributed)")
        check_impl_options(self.impl, self.impl_options, self.world_size)

    @property
    def ranks_per_node(self) -> int:
        return self.gpus_per_node or self.world_size // self.nnodes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunPoint":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown run-point keys: {unknown}")
        return cls(**d)

    @property
    def point_id(self) -> str:
        """A stable id: readable head plus a hash of the full configuration (fields still at
        their defaults that were added later are left out, so earlier records keep their ids)."""
        d = self.to_dict()
        for k, v in _LATER_DEFAULTS.items():
            if d.get(k) == v:
                d.pop(k)
        opts = d["impl_options"] = dict(d["impl_options"])
        for k, v in _FORMER_IMPL_DEFAULTS.items():  # stated explicitly now, implied in records written before
            if opts.get(k) == v:
                opts.pop(k)
        d["data"] = portable(d["data"])
        digest = hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()[:10]
        world = f"__w{self.world_size}" if self.world_size > 1 else ""
        return f"{name_slug(self.impl)}__{name_slug(self.data)}__b{self.batch_size}{world}__{digest}"


def check_training(p: "RunPoint") -> None:
    """The training and model fields of a point."""
    from impls.model.dlrm import INTERACTIONS
    from impls.model.train import MLP_OPTIMIZERS

    if not p.mlp_lr > 0:
        raise ValueError(f"mlp_lr must be > 0, got {p.mlp_lr}")
    if p.mlp_optimizer not in MLP_OPTIMIZERS:
        raise ValueError(f"mlp_optimizer must be one of {sorted(MLP_OPTIMIZERS)}, got {p.mlp_optimizer!r}")
    if p.interaction not in INTERACTIONS:
        raise ValueError(f"interaction must be one of {INTERACTIONS}, got {p.interaction!r}")
    for name, sizes in (("bottom", p.bottom), ("top", p.top)):
        if not isinstance(sizes, (list, tuple)) or not all(isinstance(x, int) and x > 0 for x in sizes):
            raise ValueError(f"{name} MLP layer sizes must be a list of positive integers, got {sizes!r}")
    if int(p.epochs) < 0 or int(p.early_stop) < 0:
        raise ValueError(f"epochs and early_stop must be >= 0, got {p.epochs}, {p.early_stop}")
    if p.early_stop and not (p.epochs and p.eval_every):
        raise ValueError("early_stop needs a training run (epochs > 0) that evaluates (eval_every > 0)")
    if p.epochs:
        if p.mode != "dlrm":
            raise ValueError("a training run (epochs > 0) needs mode='dlrm'")
        if not Path(p.data).is_dir():
            raise ValueError(f"a training run reads a dataset on disk; {p.data!r} is not a folder (prepare one with "
                             f"`dlrmbench data prepare`, or write a preset's stream with `dlrmbench data synth`)")


def check_finite(name: str, value: Any) -> None:
    """Every number in ``value`` (nested in lists and tables too) is finite: NaN or inf is refused by name."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    if isinstance(value, dict):
        for k, v in value.items():
            check_finite(f"{name}.{k}", v)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_finite(f"{name}[{i}]", v)


_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def portable(name: str) -> str:
    """A dataset folder inside the project (an experiment's own, datasets/...) by its path relative to the project,
    so that its runs' ids do not depend on where the checkout is; any other name as it is."""
    if _PLAIN.fullmatch(name) and ".." not in name:
        return name
    return _in_project(name) or name


def _in_project(name: str) -> str | None:
    try:
        return Path(name).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return None


def name_slug(name: str) -> str:
    """``name`` itself when it is a plain name (a preset, an impl); otherwise (a path such as ``../data/my log``)
    its last part made file-name safe plus a hash of the resolved path (of the path within the project for a
    folder inside it: ``portable``), so that a record id never holds a path separator or ``..`` and two folders of
    the same name get different ids."""
    if _PLAIN.fullmatch(name) and ".." not in name:
        return name
    tail = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(name).name).strip(".-")[:40] or "data"
    where = _in_project(name) or str(Path(name).resolve())
    return f"{tail}-{hashlib.sha1(where.encode()).hexdigest()[:8]}"


# impl options whose default changed: a point that now states the former default has the id of the records
# written under it (e.g. sc24's every-table-TT runs, measured before tables under 10,000 rows became dense)
_FORMER_IMPL_DEFAULTS = {"tt_min_rows": 0}
_LATER_DEFAULTS = {"warmup_max": 0, "time_budget_s": 0.0, "max_iters": 200,
                   "world_size": 1, "gpus_per_node": 0, "nnodes": 1, "rdzv_endpoint": "", "dist_timeout_s": 300.0,
                   "epochs": 0, "shuffle": True, "early_stop": 0, "mlp_optimizer": "sgd", "mlp_lr": 0.1,
                   "bottom": [512, 256], "top": [512, 256], "interaction": "dot", "budget": 0.0}


def check_world(world_size: int, gpus_per_node: int, nnodes: int, rdzv_endpoint: str, timeout_s: float) -> None:
    """The distributed fields of a point, checked before anything is launched."""
    if int(world_size) < 1:
        raise ValueError(f"world size must be >= 1, got {world_size}")
    if int(nnodes) < 1 or world_size % nnodes:
        raise ValueError(f"world size {world_size} is not a whole number of ranks on each of {nnodes} nodes")
    L = gpus_per_node or world_size // nnodes
    if L < 1 or world_size % L:
        raise ValueError(f"world size {world_size} is not a whole number of nodes of {L} ranks (--gpus-per-node)")
    if nnodes > 1 and not rdzv_endpoint:
        raise ValueError("a multi-node run needs --rdzv-endpoint HOST:PORT")
    if nnodes == 1 and rdzv_endpoint:
        raise ValueError(f"--rdzv-endpoint {rdzv_endpoint} is for multi-node runs; with one node (--nnodes 1) "
                         f"torchrun runs standalone: drop it or set --nnodes")
    if rdzv_endpoint:
        host, sep, port = rdzv_endpoint.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"rendezvous endpoint {rdzv_endpoint!r} is not HOST:PORT")
    if not timeout_s > 0:
        raise ValueError(f"dist timeout must be > 0 s, got {timeout_s}")


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    points: tuple[RunPoint, ...]
    out_dir: Path
    figures_dir: Path
    plots: tuple[str, ...]
    profile: str = DEFAULT_PROFILE
    point_timeout_s: float | None = None  # the per-point time limit (`sweep --timeout` overrides it)
    machine: str = ""  # the result set: out_dir = results/<stem>/<machine>
    repeats: int = DEFAULT_REPEATS
    data: str | None = None  # the dataset folder given for $DATA (an experiment on the user's own data)
    infeasible: tuple[Infeasible, ...] = ()  # grid points whose system cannot fit their budget, set aside

    def on(self, machine: str) -> "Experiment":
        """The same experiment read from (or written to) another machine's result set."""
        from reproduce.harness.machine import check_slug

        return dataclasses.replace(self, machine=check_slug(machine), out_dir=self.out_dir.parent / machine,
                                   figures_dir=self.figures_dir.parent / machine)

    def tasks(self) -> list[tuple[RunPoint, int]]:
        """Every (point, repeat) in the order a sweep runs them: rounds of every point (``interleaved``)."""
        return interleaved(self.points, self.repeats)


def interleaved(items: list[T], repeats: int) -> list[tuple[T, int]]:
    """Every (item, repeat) in rounds: repeat 0 of every item, then repeat 1, ... so that a slow drift of a shared
    machine hits every item alike; odd rounds run in reverse order (A B C C B A A B C), so that no item always runs
    first in its round (right after a round's noise probe, or after the slowest run) or always follows the same
    neighbour: over an even number of repeats every item's mean place in its rounds is the same."""
    return [(item, r) for r in range(repeats) for item in (items if r % 2 == 0 else items[::-1])]


# max_rows / rows: data options; variant: a name from [variants.NAME] (impl, label, impl_options, ... of one
# system setup)
# seed: the run's seed (data stream, initial weights, hashes); budget: a fraction of the dense tables' bytes that sizes
# each system (options_for_budget; a point that cannot fit it is set aside as infeasible, with the reason)
GRID_KEYS = ("impl", "data", "batch_size", "mode", "optimizer", "world_size", "gpus_per_node", "max_rows", "rows",
             "variant", "seed", "budget")


def options_for(impl: str, impl_options: dict[str, Any], world_size: int = 1) -> dict[str, Any]:
    """The options one implementation gets: a plain key goes to every implementation that takes it in this kind of
    run (``check_shared_options`` refuses one that no implementation of the run takes), a table named after an
    implementation (``[impl_options.ecorec]``, or ``ecorec.micro_batches`` on the CLI) only to it."""
    from impls.api import registered_names

    names = set(registered_names())
    shared = {k: v for k, v in impl_options.items() if k not in names and _takes(impl, k, world_size)}
    own = impl_options.get(impl, {})
    if not isinstance(own, dict):
        raise ValueError(f"impl_options.{impl} must be a table of options, got {own!r}")
    return {**shared, **own}


def _takes(impl: str, key: str, world_size: int) -> bool:
    from impls.api import get_impl
    from impls.sharding.build import accepted_options

    try:
        cls = get_impl(impl)
    except (ImportError, ValueError):
        return True  # an unknown name is check_impl's error; a missing optional dependency the worker's
    return key in accepted_options(cls, world_size > 1)


def check_shared_options(impl_options: dict[str, Any], points: Iterable["RunPoint"], where: str) -> None:
    """Every plain option reached at least one point (some implementation of the run takes it); one that none
    takes is refused, with each implementation's reason (a typo's close match, a run setting, ranks only)."""
    from impls.api import registered_names

    points = list(points)
    plain = {k: v for k, v in impl_options.items() if k not in registered_names()}
    unused = {k: v for k, v in plain.items() if not any(k in p.impl_options for p in points)}
    if not unused:
        return
    reasons = []
    for impl, ws in dict.fromkeys((p.impl, p.world_size) for p in points):
        try:
            check_impl_options(impl, unused, ws)
        except UnknownOptions as exc:
            reasons.append(str(exc))
    if len(reasons) == 1:
        raise UnknownOptions(f"{where}: {reasons[0]}")
    raise UnknownOptions(f"{where}: no implementation of this run takes option(s) {sorted(unused)}: "
                         + "; ".join(reasons))


def _read(path: Path) -> dict[str, Any]:
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
    needs --data). Without ``profile`` an
    experiment with profiles runs its ``cpu`` one; an experiment without a ``cpu`` profile is its own (the file as
    written), whether or not ``cpu`` is named."""
    profiles = doc.get("profiles", {})
    name = profile or DEFAULT_PROFILE
    if name not in profiles:
        if name == DEFAULT_PROFILE:
            return doc, DEFAULT_PROFILE  # no cpu profile: the file as written is the cpu profile
        raise ValueError(f"{path}: no profile {name!r}; it has {sorted(profiles) or 'none'}")
    over = profiles[name]
    bad = sorted(set(over) - {"grid", "defaults", "grids", "points", "description", "results", "repeats",
                              "impl_options", "data_options", "synth"})
    if bad:
        raise ValueError(f"{path}: [profiles.{name}] has unknown keys {bad}")
    if over.get("synth", False) is not False:
        raise ValueError(f"{path}: [profiles.{name}] synth can only be false (the profile trains on --data only)")
    out = dict(doc)
    out["grid"] = {**doc.get("grid", {}), **over.get("grid", {})}
    out["defaults"] = {**doc.get("defaults", {}), **over.get("defaults", {})}
    for k in ("grids", "points", "description", "results", "repeats", "impl_options", "data_options"):
        if k in over:
            out[k] = over[k]
    if "synth" in over:
        out.pop("synth", None)
    return out, name


DATA_PLACEHOLDER = "$DATA"  # a grid's or point's data that `sweep --data DIR` names (a user's own dataset)


def reads_data(doc: dict[str, Any]) -> bool:
    """Whether a grid or point of the (profiled) experiment reads ``$DATA``."""
    grids = [doc.get("grid", {}), *doc.get("grids", [])]
    return (any(DATA_PLACEHOLDER in g.get("data", []) for g in grids)
            or any(p.get("data") == DATA_PLACEHOLDER for p in doc.get("points", [])))


def read_profiled(path: Path, profile: str | None) -> tuple[dict[str, Any], str]:
    """The experiment file with its profile applied (``apply_profile``), and the profile's name."""
    return apply_profile(_read(path), profile, path)


def own_dataset(doc: dict[str, Any], path: Path) -> dict[str, Any] | None:
    """The experiment's ``[synth]`` table (synth_data.synth_table), its name one plain folder name under
    datasets/synth; None when it has none."""
    from reproduce.harness.synth_data import synth_table

    spec = synth_table(doc, path)
    if spec is not None:
        folder_name(spec["name"], f"{path}: [synth] name")
    return spec


def fill_data(doc: dict[str, Any], data: str | None, path: Path, root: str | Path = ".") -> dict[str, Any]:
    """``doc`` with every ``$DATA`` replaced by ``data`` (a dataset folder, made absolute), else by the dataset of its
    ``[synth]`` table (synth_data.py; written by `dlrmbench sweep`); an experiment that reads ``$DATA`` needs one of
    them, one that does not refuses ``data``."""
    if not reads_data(doc):
        if data is not None:
            raise ValueError(f"{path}: --data is for an experiment (profile) whose data is {DATA_PLACEHOLDER!r}; "
                             f"this one names its own")
        return doc
    if data is None:
        from reproduce.harness.synth_data import synth_data

        spec = own_dataset(doc, path)
        if spec is None:
            raise ValueError(f"{path}: this experiment trains on a dataset of yours: give --data DIR (a folder from "
                             f"`dlrmbench data prepare`)")
        data = synth_data(spec, root, path)
    data = str(Path(data).resolve())
    out = dict(doc)
    out["grid"] = {**doc.get("grid", {})}
    if DATA_PLACEHOLDER in out["grid"].get("data", []):
        out["grid"]["data"] = [data if d == DATA_PLACEHOLDER else d for d in out["grid"]["data"]]
    out["grids"] = [{**g, "data": [data if d == DATA_PLACEHOLDER else d for d in g.get("data", [])]}
                    if "data" in g else g for g in doc.get("grids", [])]
    out["points"] = [{**p, "data": data} if p.get("data") == DATA_PLACEHOLDER else p for p in doc.get("points", [])]
    return out


def _point(fields: dict[str, Any]) -> RunPoint:
    """The point of a grid combination or a [[points]] entry; ``nnodes = "auto"`` (a cluster profile) becomes as
    many nodes as the world size needs at ``gpus_per_node`` ranks each."""
    if fields.get("nnodes") == "auto":
        if not fields.get("gpus_per_node"):
            raise ValueError("nnodes = 'auto' needs gpus_per_node")
        nodes = max(1, int(fields.get("world_size", 1)) // int(fields["gpus_per_node"]))
        fields = {**fields, "nnodes": nodes, **({"rdzv_endpoint": ""} if nodes == 1 else {})}  # one node: standalone
    check_impl(fields.get("impl", ""))
    return RunPoint.from_dict(fields)


class UnknownOptions(ValueError):
    """An implementation option the implementation does not take."""


def check_impl_options(impl: str, options: dict[str, Any], world_size: int) -> None:
    """Every key of a point's impl_options is one the implementation takes in this kind of run (one device,
    or over ranks): a typo is refused before anything launches, naming the key, a close match and the keys
    the implementation does take."""
    import difflib

    from impls.api import HARNESS_KEYS, get_impl

    if not options:
        return
    try:
        cls = get_impl(impl)
    except (ImportError, ValueError):
        return  # an unknown name is check_impl's error; a missing optional dependency the worker's
    from impls.sharding.build import accepted_options

    known = accepted_options(cls, world_size > 1)
    bad = sorted(set(options) - known)
    if not bad:
        return
    notes = []
    other = accepted_options(cls, world_size == 1)
    for k in bad:
        close = difflib.get_close_matches(k, sorted(known), n=1)
        if k in HARNESS_KEYS:
            flag = {"check_bounds": "--no-check-bounds"}.get(k, "--" + k)
            notes.append(f"{k!r} is a run setting ({flag}), not an implementation option")
        elif close:
            notes.append(f"{k!r}: did you mean {close[0]!r}?")
        elif k in other:
            notes.append(f"{k!r} applies {'over ranks (world size >= 2)' if world_size == 1 else 'on one device'} only")
    where = f"over {world_size} ranks" if world_size > 1 else "on one device"
    raise UnknownOptions(f"{impl} takes no option(s) {bad} {where}" + (f" ({'; '.join(notes)})" if notes else "")
                     + f"; its options: {', '.join(sorted(known)) or 'none'}")


def check_scoped_options(impl_options: dict[str, Any], run_impls: Iterable[str], where: str) -> None:
    """Options scoped to one implementation ([impl_options.X], ``-o X.key=value``) need X in the run: options
    for a system that never runs are a mistake, not something to ignore."""
    from impls.api import registered_names

    running = set(run_impls)
    idle = sorted(k for k in impl_options if k in registered_names() and k not in running)
    if idle:
        raise ValueError(f"{where}: options for {idle}, which this run does not include (it runs "
                         f"{', '.join(sorted(running))})")


def check_impl(name: str) -> None:
    """An experiment names registered implementations only: a typo is an error before anything runs."""
    import difflib

    from impls.api import registered_names

    known = registered_names()
    if name not in known:
        close = difflib.get_close_matches(name, known, n=1)
        raise ValueError(f"unknown implementation {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                         + f"; known: {', '.join(known)}")


@dataclass(frozen=True)
class Infeasible:
    """A grid point set aside: its system cannot be sized to its budget (``reason`` says why, by the method's rule)."""

    impl: str
    label: str
    budget: float
    reason: str

    @property
    def name(self) -> str:
        return self.label or self.impl


def sized_to_budget(fields: dict[str, Any], data_options: dict[str, Any]) -> dict[str, Any]:
    """The impl options that size the point's system to ``fields['budget']`` of its data's dense table bytes
    (options_for_budget on the data's tables); ValueError, naming why, when it cannot fit."""
    from impls.api import get_impl
    from impls.compress.budget import options_for_budget
    from impls.data.sources import open_source

    tables = open_source(fields["data"], seed=int(fields.get("seed", 0)), **data_options).tables
    return options_for_budget(get_impl(fields["impl"]), tables, float(fields["budget"]), fields["impl_options"])


def _expand(grid: dict[str, Any], where: str, base: dict[str, Any], variants: dict[str, Any],
            infeasible: list[Infeasible] | None = None) -> list[RunPoint]:
    """The grid's points; a point whose system cannot fit its ``budget`` goes to ``infeasible`` (required then)."""
    bad = sorted(set(grid) - set(GRID_KEYS))
    if bad:
        raise ValueError(f"{where}: unknown grid keys {bad}; allowed: {GRID_KEYS}")
    for k in ("data", "batch_size"):
        if k not in grid:
            raise ValueError(f"{where} needs a list for {k!r}")
    if "impl" not in grid and "variant" not in grid:
        raise ValueError(f"{where} needs a list for 'impl' (or 'variant')")
    unknown = sorted(set(grid.get("variant", [])) - set(variants))
    if unknown:
        raise ValueError(f"{where}: variant(s) {unknown} have no [variants.NAME] table")
    keys = list(grid)
    points = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        try:
            fields = {**base, **dict(zip(keys, combo))}
            own: dict = {}
            if "variant" in fields:
                v = dict(variants[fields.pop("variant")])
                own = dict(v.pop("impl_options", {}))
                fields.update(v)
            data_options = dict(base["data_options"])
            if "max_rows" in fields:  # the table-size axis: a cap on every table (0 = the preset's sizes)
                cap = fields.pop("max_rows")
                data_options.update({"max_rows": cap} if cap else {})
            if "rows" in fields:  # the row count of presets that take one (sc24-f4, uniform)
                data_options["rows"] = fields.pop("rows")
            fields["data_options"] = data_options
            fields["impl_options"] = {**options_for(fields["impl"], base["impl_options"],
                                                    int(fields.get("world_size", 1))), **own}
            if fields.get("budget"):
                check_impl(fields["impl"])
                try:
                    fields["impl_options"].update(sized_to_budget(fields, data_options))
                except ValueError as exc:
                    if infeasible is None:
                        raise
                    infeasible.append(Infeasible(fields["impl"], fields.get("label", ""), float(fields["budget"]),
                                                 str(exc)))
                    continue
            points.append(_point(fields))
        except (TypeError, ValueError, KeyError) as exc:
            raise ValueError(f"{where}: bad point {dict(zip(keys, combo))}: {exc}") from None
    return points


FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def folder_name(value: object, what: str) -> str:
    """``value`` when it can name one folder under results/ and figures/ (letters, digits, '.', '-', '_'; no path
    separator, no leading dot): an experiment's name or results folder never writes outside ``--root``."""
    if not isinstance(value, str) or not FOLDER_NAME.fullmatch(value):
        raise ValueError(f"{what} = {value!r} must name one folder: letters, digits, '.', '-' or '_', starting with a "
                         f"letter or digit (at most 100)")
    return value


def load_experiment(path: str | Path, root: str | Path = ".", profile: str | None = None, machine: str | None = None,
                    repeats: int | None = None, data: str | None = None, expand: bool = True) -> Experiment:
    """Expand ``[grid]`` and each ``[[grids]]`` (lists) over ``[defaults]``; ``[data_options]`` apply to all
    points and ``[impl_options]`` as resolved by ``options_for``; ``[[points]]`` add single points (their own
    ``impl_options`` overlay the resolved ones). ``profile`` picks a ``[profiles.NAME]`` overlay (default cpu);
    a profile other than cpu writes to results/NAME_PROFILE unless it names its ``results`` folder. Records go to
    that folder's ``machine`` subfolder (default: this machine's slug); ``repeats`` (default: the experiment's or
    its profile's ``repeats``, else 3) processes measure each point; ``data`` fills the ``$DATA`` of an experiment
    that trains on the user's own dataset (else its ``[synth]`` one). With ``expand`` False: no points, only the
    experiment's name, folders and plots."""
    from reproduce.harness.machine import this_machine

    path = Path(path)
    doc, profile = read_profiled(path, profile)
    if not expand:  # its folders and figures only (no points: nothing checked or read beyond the file)
        doc = {**doc, "grid": {}, "grids": [], "points": [], "impl_options": {}}
    else:
        doc = fill_data(doc, data, path, root)
    name = doc.get("name") or path.stem
    variants = doc.get("variants", {})
    base = dict(doc.get("defaults", {}))
    base["data_options"] = dict(doc.get("data_options", {}))
    base["impl_options"] = dict(doc.get("impl_options", {}))
    infeasible: list[Infeasible] = []
    points = _expand(doc["grid"], f"{path}: [grid]", base, variants, infeasible) if doc.get("grid") else []
    for i, grid in enumerate(doc.get("grids", [])):  # [[grids]]: further grids over the same defaults
        points += _expand(grid, f"{path}: [[grids]] #{i + 1}", base, variants, infeasible)
    for extra in doc.get("points", []):  # [[points]]: single points beside the grid (e.g. option variants)
        try:
            fields = {**base, **{k: v for k, v in extra.items() if k != "impl_options"}}
            own = dict(extra.get("impl_options", {}))
            fields["impl_options"] = {**options_for(fields["impl"], base["impl_options"],
                                                    int(fields.get("world_size", 1))), **own}
            fields["data_options"] = {**base["data_options"], **extra.get("data_options", {})}
            if fields.get("budget"):  # a single point that cannot fit its budget is an error, not set aside
                check_impl(fields["impl"])
                fields["impl_options"].update(sized_to_budget(fields, fields["data_options"]))
            points.append(_point(fields))
        except (TypeError, ValueError, KeyError) as exc:
            raise ValueError(f"{path}: bad [[points]] entry {extra}: {exc}") from None
    if expand and not points:
        raise ValueError(f"{path}: no points to run" + (f": every one cannot fit its budget ({infeasible[0].reason})"
                                                         if infeasible else ": give a [grid], [[grids]] or [[points]]"))
    check_scoped_options(base["impl_options"], (p.impl for p in points), f"{path}: [impl_options]")
    check_shared_options(base["impl_options"], points, f"{path}: [impl_options]")
    machine = this_machine(machine)
    from reproduce.harness.calibration import with_profile

    points = [with_profile(p, root, machine) for p in points]
    root = Path(root)
    dupes = [pid for pid, n in Counter(p.point_id for p in points).items() if n > 1]
    if dupes:
        raise ValueError(f"{path}: points listed twice: {dupes[:3]}")
    name = folder_name(name, f"{path}: name")
    stem = folder_name(doc.get("results") or (name if profile == DEFAULT_PROFILE else f"{name}_{profile}"),
                       f"{path}: results")
    repeats = int(repeats if repeats is not None else doc.get("repeats", DEFAULT_REPEATS))
    if repeats < 1:
        raise ValueError(f"{path}: repeats must be >= 1, got {repeats}")
    return Experiment(
        name=name,
        description=doc.get("description", ""),
        points=tuple(points),
        out_dir=root / "results" / stem / machine,
        figures_dir=root / "figures" / stem / machine,
        plots=tuple(doc.get("plots", [])),
        point_timeout_s=doc.get("point_timeout_s"),
        profile=profile,
        machine=machine,
        repeats=repeats,
        data=str(Path(data).resolve()) if data is not None else None,
        infeasible=tuple(dict.fromkeys(infeasible)),  # one entry per (system, budget), whatever the other axes
    )
