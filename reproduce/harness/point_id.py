"""The id of a run point: a pure function of its measured configuration. No file is read and nothing is imported;
the display label is not part of it, nor is any path or machine-local root: a dataset is named by its preset name or
its folder's name; a calibration profile (an input whose bytes the run's fingerprint digests) not at all. A record's
file name and its place in a result set come from it."""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import PurePosixPath
from typing import Any

# not measured configuration: how the point is shown, and where this machine keeps an input
NOT_MEASURED = ("label",)
NOT_MEASURED_OPTIONS = ("calibration",)
# impl options whose default changed, at their former defaults: until 2026-12-05 an id left them out where a point
# stated them, so a point stating one shared its id with the point leaving it out (another configuration). Every
# option a point states is in its id now; ``former_ids`` gives the ids records were written under before, so that
# such a record is adopted (renamed), never taken for another point's
_FORMER_IMPL_DEFAULTS = {"tt_min_rows": 0, "tt_oversize": "allow"}
# fields added after the first records: at their defaults they are left out, so earlier records keep their ids
_LATER_DEFAULTS = {"warmup_max": 0, "time_budget_s": 0.0, "max_iters": 200,
                   "world_size": 1, "gpus_per_node": 0, "nnodes": 1, "rdzv_endpoint": "", "dist_timeout_s": 300.0,
                   "epochs": 0, "shuffle": True, "early_stop": 0, "mlp_optimizer": "sgd", "mlp_lr": 0.1,
                   "bottom": [512, 256], "top": [512, 256], "interaction": "dot", "budget": 0.0, "twin": 0}
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def measured(point: dict[str, Any], former: bool = False) -> dict[str, Any]:
    """The part of a point (its dict) that its id hashes (``former``: as ids hashed it before every stated option was
    part of them)."""
    d = {k: v for k, v in point.items() if k not in NOT_MEASURED}
    for k, v in _LATER_DEFAULTS.items():
        if d.get(k) == v:
            d.pop(k)
    opts = {k: v for k, v in (d.get("impl_options") or {}).items() if k not in NOT_MEASURED_OPTIONS}
    for k, v in _FORMER_IMPL_DEFAULTS.items() if former else ():
        if opts.get(k) == v:
            opts.pop(k)
    d["impl_options"] = opts
    d["data"] = dataset_name(str(d["data"]))
    data_options = dict(d.get("data_options") or {})
    if data_options.get("reorder"):
        data_options["reorder"] = dataset_name(str(data_options["reorder"]))
    d["data_options"] = data_options
    return d


def point_id(point: dict[str, Any], former: bool = False) -> str:
    """``<impl>__<dataset>__b<batch>[__w<world>]__<hash of the measured configuration>`` (``former``: the id this
    point had before every stated option was part of ids)."""
    digest = hashlib.sha1(json.dumps(measured(point, former), sort_keys=True).encode()).hexdigest()[:10]
    world = int(point.get("world_size", 1))
    tail = f"__w{world}" if world > 1 else ""
    return f"{slug(str(point['impl']))}__{slug(dataset_name(str(point['data'])))}__b{point['batch_size']}{tail}__{digest}"


def former_ids(point: dict[str, Any]) -> set[str]:
    """The ids records of this point were written under before (none when its id did not change)."""
    return {point_id(point, former=True)} - {point_id(point)}


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
