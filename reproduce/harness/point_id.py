"""The id of a run point: a pure function of its configuration (no file is read, nothing imported). A record's
file name and its place in a result set come from it."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # the checkout: a dataset inside it is named relative to it (portable)


def point_id(point: dict[str, Any]) -> str:
    """A stable id of a point (its dict): readable head plus a hash of the full configuration (fields still at
    their defaults that were added later are left out, so earlier records keep their ids)."""
    d = dict(point)
    for k, v in _LATER_DEFAULTS.items():
        if d.get(k) == v:
            d.pop(k)
    opts = d["impl_options"] = dict(d.get("impl_options", {}))
    for k, v in _FORMER_IMPL_DEFAULTS.items():  # stated explicitly now, implied in records written before
        if opts.get(k) == v:
            opts.pop(k)
    d["data"] = portable(d["data"])
    digest = hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()[:10]
    world = int(point.get("world_size", 1))
    tail = f"__w{world}" if world > 1 else ""
    return f"{name_slug(point['impl'])}__{name_slug(point['data'])}__b{point['batch_size']}{tail}__{digest}"


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


