"""The work of one embedding step, counted without running a kernel: per TT table the system's own stage plan
(``stage_plan`` beside its schedule, impls/core/stage_plan.py) over the table's index statistics, counted as the ops
count their calls (a TTWork), and the memory the step holds (the collection's own memory_report, said before it
is built).

``step_work(system, tables, options, indices)``: ``indices`` maps a table's index to its IndexStats, counted on a
batch (SampledIndex: equal to the run's work_report, exactly) or expected under an id law (index_law.ExpectedIndex:
the expectation); every table is looked up ``nnz`` times (dense ones too: the work report counts every lookup)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

from impls.api import MemoryReport, TableSpec
from impls.core.counters import TTWork
from impls.core.stage_plan import IndexStats

TT_KEYS = ("ranks", "p", "q", "cores", "tt_tables", "tt_min_rows", "tt_oversize")
NOT_SCHEDULE = TT_KEYS + ("core_lr_scale", "weight_dist", "fused")


def system_class(system: str):
    from impls.registry import get_impl

    cls = get_impl(system)
    if not hasattr(cls, "stage_plan"):
        raise ValueError(f"the work model counts the TT systems' schedules (ttrec, elrec, ecorec); {system!r} states "
                         f"no stage plan")
    return cls


def tt_shapes(system: str, tables: Sequence[TableSpec], options: Mapping[str, Any]) -> dict:
    """The TT shape of every table the system compresses (by index): its own plan_shapes."""
    return system_class(system).plan_shapes(tables, **{k: options[k] for k in TT_KEYS if k in options})


def schedule_options(options: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k not in NOT_SCHEDULE}


def step_work(system: str, tables: Sequence[TableSpec], options: Mapping[str, Any],
              index_of: Callable[[int, Any], IndexStats], nnz: Sequence[float]) -> TTWork:
    """The TTWork one step of ``system`` does on ``tables``: ``index_of(i, shape)`` gives TT table i's IndexStats
    (its ids grouped by ``shape.last_radix``), ``nnz[i]`` table i's lookups."""
    cls = system_class(system)
    shapes = tt_shapes(system, tables, options)
    sched = schedule_options(options)
    work = TTWork()
    work.nnz = sum(nnz)
    for i, shape in shapes.items():
        cls.stage_plan(shape, index_of(i, shape), **sched).count(work, shape)
    return work


def memory(system: str, tables: Sequence[TableSpec], options: Mapping[str, Any], work: TTWork,
           optimizer: str = "sgd") -> MemoryReport:
    """The MemoryReport a step of ``system`` whose work is ``work`` (step_work) gives, said before it is built:
    params from the system's own table_param_bytes, Adagrad's state as large as the parameters, intermediates the
    TT cores' dense gradient buffers plus the step's peak live buffers."""
    cls = system_class(system)
    shapes = tt_shapes(system, tables, options)
    params = sum(cls.table_param_bytes(tables, options))
    core = sum(s.num_params * 4 for s in shapes.values())
    return MemoryReport(params=params, optimizer_state=params if optimizer == "adagrad" else 0,
                        peak_intermediates=core + work.peak_intermediate_bytes)


@dataclass
class StepModel:
    """A step's expected work under a synthetic spec's id law: the TTWork, the bytes its stages move, the stage
    calls it launches and the tables it holds."""

    work: TTWork
    traffic: Any
    calls: int
    tt_tables: int
    memory: MemoryReport


@lru_cache(maxsize=None)
def _table_step(system: str, spec, index: int, batch_size: int, options: tuple, optimizer: str) -> "StepModel":
    import dataclasses

    return expected_step(system, dataclasses.replace(spec, tables=(spec.tables[index],)), batch_size, dict(options),
                         optimizer)


def table_step(system: str, spec, index: int, batch_size: int, options: Mapping[str, Any],
               optimizer: str = "sgd") -> "StepModel":
    """The expected step of table ``index`` of ``spec`` alone (a step's work adds over its tables), cached: a
    workload's tables repeat (its strata, its groups), and a world of ranks asks for each table once per rank."""
    return _table_step(system, spec, index, batch_size, tuple(sorted((k, _frozen(v)) for k, v in options.items())),
                       optimizer)


def _frozen(v):
    return tuple(v) if isinstance(v, list) else v


def expected_step(system: str, spec, batch_size: int, options: Mapping[str, Any],
                  optimizer: str = "sgd") -> StepModel:
    """The expected step of ``system`` on ``batch_size`` samples of the synthetic ``spec`` (SyntheticSpec): every
    table's lookups batch x its mean bag, its index statistics under the spec's law (index_law.ExpectedIndex)."""
    from impls.data.synthetic import mean_bag
    from impls.work.index_law import ExpectedIndex
    from impls.work.traffic import Traffic

    tables = list(spec.tables)
    nnz = [batch_size * mean_bag(t.hotness, spec.bag_sizes) for t in tables]
    cls = system_class(system)
    shapes = tt_shapes(system, tables, options)
    sched = schedule_options(options)
    work, traffic, calls = TTWork(), Traffic(), 0
    work.nnz = sum(nnz)
    for i, shape in shapes.items():
        index = ExpectedIndex(tables[i].num_embeddings, nnz[i], spec.alpha, spec.locality, shape.last_radix)
        plan = cls.stage_plan(shape, index, **sched)
        plan.count(work, shape)
        traffic.add_plan(plan, shape, nnz[i], dedups=plan.unique > 0)
        calls += len(plan.calls)
    return StepModel(work, traffic, calls, len(shapes), memory(system, tables, options, work, optimizer))
