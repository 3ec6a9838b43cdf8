"""Assembling EMBark's planner: the cost model of a world, the calibrated search over a profile, and the plan a
strategy makes on them. The collection (over real ranks) and `dlrmbench plan` (a modeled machine) both plan through
here, so a plan is made one way."""
from __future__ import annotations

import time
from typing import Any, Sequence

from impls.api import TableSpec
from impls.core.tt import DEFAULT_RANK
from impls.embark.cost import HARDWARE, CostModel
from impls.embark.shards import Plan

COSTS = ("calibrated", "hugectr")


def cost_model(hw: str, world_size: int, gpus_per_node: int | None, global_batch: int, *, adagrad: bool = False,
               fp16: bool = False, storage: str = "dense", tt_ranks: int = DEFAULT_RANK, rho: float | None = None,
               mem_cap_gib: float | None = None, hierarchical: bool = False) -> CostModel:
    """HugeCTR's cost model of ``world_size`` GPUs, ``gpus_per_node`` a node (default: the hardware's), on the
    hardware spec ``hw`` (cost.HARDWARE): 8 bytes per element with Adagrad (weights + accumulator), 2-byte payloads with fp16,
    TT storage priced as TT cores of rank ``tt_ranks``."""
    if hw not in HARDWARE:
        raise ValueError(f"unknown hardware {hw!r}; known: {', '.join(HARDWARE)}")
    spec = HARDWARE[hw]
    return CostModel(spec, world_size, gpus_per_node or spec.gpus_per_node, global_batch,
                     optimizer_bytes=8 if adagrad else 4, elem_bytes=2 if fp16 else 4,
                     storage="tt" if storage == "tt" else "dense", tt_ranks=int(tt_ranks),
                     rho=None if rho is None else float(rho),
                     mem_cap=None if mem_cap_gib is None else float(mem_cap_gib) * 2**30, hierarchical=hierarchical)


def search_for(tables: Sequence[TableSpec], model: CostModel, calibration: str, storage: str, loads: Any = None):
    """The calibrated search over every candidate plan of ``tables`` on ``model``'s world, scored by the profile at
    ``calibration`` (`dlrmbench calibrate`), with the tables' ``loads`` (calibrated.table_loads of a sampled batch;
    default: modeled from the tables)."""
    from impls.embark.calibrated import Profile, table_loads
    from impls.embark.search import Search

    if loads is None:
        loads = table_loads(tables, model.batch_size, model.world_size)
    return Search(tables, loads, Profile.load(calibration), model, storage, model.elem_bytes)


def plan_for(tables: Sequence[TableSpec], model: CostModel, strategy: str = "embark", cost: str = "calibrated",
             *, column_wise: bool = False, search=None) -> tuple[Plan, float]:
    """The plan ``strategy`` makes and the seconds it took: EMBark's with ``cost`` calibrated is the search's best
    candidate (``search``: search_for's, required); otherwise HugeCTR's greedy on its cost model (a baseline
    strategy as it is)."""
    if cost not in COSTS:
        raise ValueError(f"unknown cost {cost!r}; choose one of {', '.join(COSTS)}")
    if cost == "calibrated" and strategy == "embark":
        from impls.embark.search import calibrated_plan

        if search is None:
            raise ValueError("the calibrated plan needs a search over a calibration profile (search_for)")
        t0 = time.perf_counter()
        plan = calibrated_plan(tables, search)
        return plan, time.perf_counter() - t0
    from impls.embark.planner import make_plan

    return make_plan(tables, model, strategy, column_wise=column_wise)
