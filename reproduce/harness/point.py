"""A run point: one measured configuration, as plain values. Its checks are on the values alone (ranges, choices,
finite numbers, a consistent world): nothing here opens a file, asks the registry or imports a system, so a worker, a
report or an old record reads a point without touching a dataset. What needs the world outside - the data exists,
the implementation takes these options - is options.check_point, run where points are made (resolve, `run`).

A point's id is a pure function of its measured configuration (``point_id``): no file is read; the display label is
not part of it, nor is any path or machine-local root: a dataset is named by its preset name or its folder's name; a
calibration profile (an input whose bytes the run's fingerprint digests) not at all. A record's file name and its
place in a result set come from it."""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import PurePosixPath
from typing import Any

OPTIMIZERS = ("sgd", "adagrad")


@dataclass(frozen=True)
class RunPoint:
    # what runs, on what (label: the display name in tables and figures, default the impl; not part of the id)
    impl: str
    data: str
    batch_size: int  # per rank: the global batch is batch_size * world_size
    label: str = ""
    # 1: the A/A control's second copy of a point (harness/evidence.py): the same configuration under its own id and label,
    # run beside it in every round, so that the ratio of the two is the set's resolving power
    twin: int = 0
    data_options: dict[str, Any] = field(default_factory=dict)
    impl_options: dict[str, Any] = field(default_factory=dict)
    # the fraction of the dense tables' bytes the point's system was sized to (a compression experiment's axis: its
    # options came from impls.compress.budget.options_for_budget); 0: sized by its own options
    budget: float = 0.0
    seed: int = 0  # data stream, initial weights, hashes
    device: str = "cpu"
    threads: int | None = None
    check_bounds: bool = True
    # the model: embedding-only or the DLRM around the tables (bottom MLP, interaction, top MLP)
    mode: str = "dlrm"
    interaction: str = "dot"
    bottom: list[int] = field(default_factory=lambda: [512, 256])
    top: list[int] = field(default_factory=lambda: [512, 256])
    # training: the tables' and the MLPs' optimizers; epochs > 0 (`dlrmbench train`): passes over the whole training
    # split of a dataset on disk, the whole held-out split scored every eval_every steps and at the end; early_stop:
    # evaluations without a lower eval log loss before stopping (0: never); eval_batches: held-out batches for AUC /
    # log loss after a benchmark's timed steps (dlrm mode), eval_every: also after every N steps (an AUC-vs-step curve)
    optimizer: str = "sgd"
    lr: float = 0.01
    mlp_optimizer: str = "sgd"
    mlp_lr: float = 0.1
    epochs: int = 0
    shuffle: bool = True
    early_stop: int = 0
    eval_batches: int = 0
    eval_every: int = 0
    # timing: `warmup` steps, or with warmup_max > warmup until the step time settles (training.settled); timed
    # steps: `iters`, or with time_budget_s > 0 as many as fill it at the settled step time (at most max_iters),
    # cycling num_batches distinct batches generated before timing
    iters: int = 10
    warmup: int = 3
    num_batches: int = 4
    warmup_max: int = 0
    time_budget_s: float = 0.0
    max_iters: int = 200
    # distribution: world_size processes (GPUs, or gloo processes on a CPU machine) launched by torchrun;
    # gpus_per_node: L, ranks per node (0: world_size / nnodes), emulates nodes on one machine; rdzv_endpoint:
    # HOST:PORT of torchrun's rendezvous (multi-node); dist_timeout_s: every collective (a dead peer ends the run)
    world_size: int = 1
    gpus_per_node: int = 0
    nnodes: int = 1
    rdzv_endpoint: str = ""
    dist_timeout_s: float = 300.0

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
        from impls.model.choices import MODES

        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if int(self.eval_every) < 0 or (int(self.eval_every) and not int(self.eval_batches) and not self.epochs):
            raise ValueError(f"eval_every needs eval_batches > 0 (got eval_every={self.eval_every}, "
                             f"eval_batches={self.eval_batches})")
        if self.threads is not None and int(self.threads) <= 0:
            raise ValueError(f"threads must be > 0, got {self.threads}")
        check_world(self.world_size, self.gpus_per_node, self.nnodes, self.rdzv_endpoint, self.dist_timeout_s)
        if self.world_size > 1 and self.eval_every and not self.epochs:
            raise ValueError("eval_every is single-process only (the final evaluation works distributed)")

    @property
    def ranks_per_node(self) -> int:
        return self.gpus_per_node or self.world_size // self.nnodes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunPoint":
        return from_known_fields(cls, d, "unknown run-point keys")

    @property
    def point_id(self) -> str:
        """The point's id (``point_id``)."""
        return point_id(self.to_dict())


def point_defaults() -> dict[str, Any]:
    """Every RunPoint field that has a default, at it: the one place a point's defaults are stated (a point given
    without some fields - an experiment's, a command line's - takes them)."""
    out: dict[str, Any] = {}
    for f in fields(RunPoint):
        if f.default is not MISSING:
            out[f.name] = f.default
        elif f.default_factory is not MISSING:
            out[f.name] = f.default_factory()
    return out


def from_known_fields(cls, d: dict[str, Any], what: str):
    """``cls(**d)`` for a dataclass, a key that is none of its fields refused by name (``what``: the error's head)."""
    unknown = sorted(set(d) - {f.name for f in fields(cls)})
    if unknown:
        raise ValueError(f"{what}: {unknown}")
    return cls(**d)


def check_training(p: "RunPoint") -> None:
    """The training and model fields of a point."""
    from impls.model.choices import INTERACTIONS, MLP_OPTIMIZERS

    if not p.mlp_lr > 0:
        raise ValueError(f"mlp_lr must be > 0, got {p.mlp_lr}")
    if p.mlp_optimizer not in MLP_OPTIMIZERS:
        raise ValueError(f"mlp_optimizer must be one of {list(MLP_OPTIMIZERS)}, got {p.mlp_optimizer!r}")
    if p.interaction not in INTERACTIONS:
        raise ValueError(f"interaction must be one of {INTERACTIONS}, got {p.interaction!r}")
    for name, sizes in (("bottom", p.bottom), ("top", p.top)):
        if not isinstance(sizes, (list, tuple)) or not all(isinstance(x, int) and x > 0 for x in sizes):
            raise ValueError(f"{name} MLP layer sizes must be a list of positive integers, got {sizes!r}")
    if int(p.epochs) < 0 or int(p.early_stop) < 0:
        raise ValueError(f"epochs and early_stop must be >= 0, got {p.epochs}, {p.early_stop}")
    if p.early_stop and not p.epochs:  # a training run evaluates every eval_every steps, else after every epoch
        raise ValueError("early_stop needs a training run (epochs > 0)")
    if p.epochs and p.mode != "dlrm":
        raise ValueError("a training run (epochs > 0) needs mode='dlrm'")


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


# ---- the id of a point

# not measured configuration: how the point is shown, and where this machine keeps an input
NOT_MEASURED = ("label",)
NOT_MEASURED_OPTIONS = ("calibration",)
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def measured(point: dict[str, Any]) -> dict[str, Any]:
    """The part of a point that its id hashes: every field of the point, its missing ones at RunPoint's defaults
    (an id states the whole point), minus how it is shown (NOT_MEASURED) and where this machine keeps an input."""
    d = {k: v for k, v in RunPoint.from_dict(point).to_dict().items() if k not in NOT_MEASURED}
    d["impl_options"] = {k: v for k, v in (d.get("impl_options") or {}).items() if k not in NOT_MEASURED_OPTIONS}
    d["data"] = dataset_name(str(d["data"]))
    data_options = dict(d.get("data_options") or {})
    if data_options.get("reorder"):
        data_options["reorder"] = dataset_name(str(data_options["reorder"]))
    d["data_options"] = data_options
    return d


def point_id(point: dict[str, Any]) -> str:
    """``<impl>__<dataset>__b<batch>[__w<world>]__<hash of the measured configuration>``."""
    d = measured(point)
    digest = hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()[:10]
    tail = f"__w{d['world_size']}" if d["world_size"] > 1 else ""
    return f"{slug(str(d['impl']))}__{slug(d['data'])}__b{d['batch_size']}{tail}__{digest}"


def dataset_name(data: str) -> str:
    """A preset's (or a plain) name as it is; a dataset on disk by its folder's (or file's) name, wherever it lies:
    the same dataset gets the same id in any checkout on any machine (the sweep refuses to take another folder of
    the same name for it: sweep.is_done)."""
    if _PLAIN.fullmatch(data) and ".." not in data:
        return data
    return PurePosixPath(os.path.normpath(data)).name or "data"


def slug(name: str) -> str:
    """``name`` made one file-name-safe word (no path separator, no ``..``): a record id never holds a path."""
    if _PLAIN.fullmatch(name) and ".." not in name:
        return name
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-")[:60] or "data"
