"""What TT-Rec, EL-Rec and EcoRec share: TT tables (cores, gradients, optimizer state), the choice of
which tables are TT (the rest stay dense, as the papers do), mean pooling, the autograd glue, the
fused or external core update, and the reports. A system subclass supplies only its work schedule:
``lookup_forward`` and ``lookup_backward`` for one table over the native TT stage ops."""
from __future__ import annotations

import abc
import dataclasses
from typing import Any, ClassVar, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from impls.api import (EmbeddingCollection, EmbeddingOptim, GradientTensor, MemoryReport, SparseFeatures, TableSpec,
                       WorkReport, table_seed)
from impls.core import ops, tt
from impls.core.counters import TTWork
from impls.core.init import dense_table_init
from impls.core.pooling import mean_pool
from impls.core.tt import DEFAULT_RANK
from impls.core.tt_batch import Workspace
from impls.table_options import value_for

TT_MIN_ROWS = 10_000  # tables with fewer rows stay dense unless tt_tables / tt_min_rows say otherwise
# what becomes of a TT table whose cores at the asked ranks would take more bytes than its dense table:
# shrink: its ranks are capped at the highest rank whose cores fit in the dense bytes (it stays a plain table when
#         even rank 1 does not fit); refuse: ValueError with the numbers; allow: built as asked (a paper's setup that
#         compresses every table, small ones too, as the EL-Rec and EcoRec artifacts do)
TT_OVERSIZE = ("shrink", "refuse", "allow")


class TTTable(nn.Module):
    """One TT-compressed table: d cores, their gradient buffers and optimizer state."""

    def __init__(self, shape: tt.TTShape, weight_dist: str, seed: int, device: torch.device) -> None:
        super().__init__()
        self.shape = shape
        gen = torch.Generator().manual_seed(seed)
        self.cores = nn.ParameterList(nn.Parameter(c.to(device)) for c in tt.init_cores(shape, weight_dist, gen))
        self.grads = [torch.zeros_like(c) for c in self.cores]
        self.state: list[Tensor | None] = [None] * shape.d
        self.optim: EmbeddingOptim | None = None  # the cores' (TTCollection.core_optim)
        self.workspace = Workspace()

    def buffer(self, name: str, rows: int, cols: int) -> Tensor:
        return self.workspace.get(name, rows, cols, self.cores[0].device)

    # The two halves every schedule is built from; schedules differ in what they pass as prefixes and
    # items (occurrences, unique ids, prefix groups) and in how they pool and aggregate around them. Their
    # indices derive from a batch validated at the step's boundary (checked): the ops skip their range checks.
    def stages_forward(self, prefix_ids: Tensor, item_group: Tensor, item_last: Tensor, work: TTWork):
        """Stage 1 for ``prefix_ids``, stage 2 for the items (fused: no prefix buffer): rows [n, D] in a
        workspace buffer."""
        s, cores = self.shape, self.core_tensors()
        emb = ops.tt_stages(cores, s, prefix_ids, item_group, item_last, work,
                            out=self.buffer("emb", item_group.numel(), s.dim), check_indices=False)
        work.live(emb)
        return emb

    def stages_backward(self, prefix_ids: Tensor, item_group: Tensor, item_last: Tensor, d_items: Tensor,
                        work: TTWork, *extra_live: Tensor) -> None:
        """Recompute the prefixes and walk both stages back into ``grads`` (item_group non-decreasing)."""
        ops.tt_stages_backward(self.core_tensors(), self.shape, prefix_ids, item_group, item_last, d_items, self.grads,
                               work, check_indices=False)
        work.live(d_items, *extra_live)

    def core_tensors(self) -> list[Tensor]:
        return [c.detach() for c in self.cores]  # detach, not .data: a traced graph (export) reads the parameters

    @property
    def param_bytes(self) -> int:
        return sum(c.numel() * c.element_size() for c in self.cores)


@dataclasses.dataclass(frozen=True)
class TTBatch:
    """A step's lookups through the TT cores, table-major, as the native steps over all tables read them: TT table k
    of the step is table ``tables[k]`` of ``values`` / ``offsets`` [num_tables * B + 1] (SparseFeatures' layout)."""

    values: Tensor
    offsets: Tensor
    tables: list[int]

    @classmethod
    def of(cls, features: SparseFeatures, tables: Sequence[int]) -> "TTBatch":
        """The batch's own ids: TT table k is the batch's table tables[k] (no copy)."""
        return cls(features.values, features.offsets, [int(t) for t in tables])

    @classmethod
    def joined(cls, lookups: Sequence[tuple[int, Tensor, Tensor]]) -> "TTBatch":
        """Lookups that are not the batch's own (a cache's misses; at least one table's), joined into one
        table-major batch of their own."""
        values = torch.cat([v for _, v, _ in lookups])
        starts = torch.tensor([0] + [v.numel() for _, v, _ in lookups], device=values.device).cumsum(0)
        offsets = torch.cat([o[:-1] + starts[k] for k, (_, _, o) in enumerate(lookups)] + [starts[-1:]])
        return cls(values, offsets, list(range(len(lookups))))


class TTStep(torch.autograd.Function):
    """Every TT table's pooled lookup of one step, as one autograd node: forward runs the system's schedule over every
    table (TTCollection.step_forward), backward walks them back into their core gradients (step_backward) and, fused,
    updates every table's cores at once, so a step has one forward and one backward call however many TT tables it
    has. ``lookups``: (table index, values, offsets) per TT table in the step; ``batch``: the same lookups table-major
    (TTBatch); ``cores``: every core of those tables, in that order (autograd's inputs)."""

    @staticmethod
    def forward(ctx, coll, lookups, batch_size, batch, *cores):
        outs, saved = coll.step_forward(lookups, batch_size, batch, coll.step_work())
        ctx.coll, ctx.indices, ctx.saved = coll, [index for index, _, _ in lookups], saved
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grad_outs):
        coll = ctx.coll
        tables = [coll.tt[str(index)] for index in ctx.indices]
        torch._foreach_zero_([g for t in tables for g in t.grads])
        coll.step_backward(tables, ctx.saved, [g.contiguous() for g in grad_outs], coll.step_work())
        ctx.saved = None
        if coll.fused:
            coll.apply_updates(tables)
            return (None, None, None, None, *[None] * sum(t.shape.d for t in tables))
        return (None, None, None, None, *[g.clone() for t in tables for g in t.grads])


class TTCollection(EmbeddingCollection):
    """Base of the TT systems. Options (each may be a value or a {table: value} mapping):

    ranks        inner TT ranks (int: all equal), default DEFAULT_RANK (32)
    p, q         row / column radices (default: suggest_tt_shapes)
    cores        number of cores d (systems fix or bound it)
    tt_tables    names of the TT tables; default all tables with at least ``tt_min_rows`` rows
    tt_min_rows  row threshold for TT when tt_tables is not given (default TT_MIN_ROWS = 10,000: at rank 32 a
                 TT table of 10,000 rows is 3.5x smaller than the dense one at D = 16, 7x at D = 64, while one
                 under ~2,000 rows is larger than its table, and TT-Rec compresses only the large tables;
                 0 makes every table TT)
    tt_oversize  a TT table whose cores would outweigh its dense table: "shrink" (default) caps its ranks to fit
                 the dense bytes, "refuse" raises, "allow" builds it as asked (TT_OVERSIZE)
    core_lr_scale  the cores' learning rate over the tables' (default None: 1/d, d the table's cores, under
                 Adagrad; 1 under SGD). A row is a product of d cores and every core steps, and under Adagrad each
                 element steps by about the rate whatever its gradient: the rows of a TT table move faster than a
                 dense row at the same rate. Chosen from results/tt-quality/<machine> (docs/studies/compression.md):
                 at the tables' rate TT's held-out AUC falls short of the dense model's at every rank, full rank
                 included; at a fifth to two fifths of the rate it comes closest, and the dense model's best moves
                 little with its own rate.
    weight_dist  core initializer (tt.WEIGHT_DISTS; default "dense-matched": rows start at the dense
                 initializer's scale)
    fused        apply the core update inside backward (default); False leaves dense core gradients
                 in ``.grad`` and ``optimizer_step`` applies them
    """
    option_keys: ClassVar[frozenset[str]] = frozenset({"core_lr_scale", "cores", "fused", "p", "q", "ranks", "tt_min_rows",
                                                     "tt_oversize", "tt_tables", "weight_dist"})  # and each system's configure options

    allowed_cores: ClassVar[tuple[int, ...]] = (3,)
    dim_multiple: ClassVar[int] = 1
    default_weight_dist: ClassVar[str] = "dense-matched"

    def __init__(
        self,
        tables: Sequence[TableSpec],
        optim: EmbeddingOptim,
        ctx: Any | None = None,
        *,
        device: str | torch.device = "cpu",
        check_bounds: bool = True,
        seed: int = 0,
        ranks: int | Sequence[int] | Mapping = DEFAULT_RANK,
        p: Sequence[int] | Mapping | None = None,
        q: Sequence[int] | Mapping | None = None,
        cores: int | Mapping = 3,
        tt_tables: Sequence[str] | None = None,
        tt_min_rows: int = TT_MIN_ROWS,
        tt_oversize: str = "shrink",
        weight_dist: str | None = None,
        fused: bool = True,
        core_lr_scale: float | None = None,
        **schedule_options: Any,
    ) -> None:
        super().__init__(tables, optim, ctx, check_bounds=check_bounds, seed=seed)
        self.configure(**schedule_options)  # system options are checked before any allocation
        device = torch.device(device)
        weight_dist = weight_dist or self.default_weight_dist
        if weight_dist not in tt.WEIGHT_DISTS:
            raise ValueError(f"unknown weight_dist {weight_dist!r}; choose one of {', '.join(tt.WEIGHT_DISTS)}")
        shapes, self.refitted = self.plan_tables(self.tables, ranks, p, q, cores, tt_tables, tt_min_rows, tt_oversize)
        self._tt_choice = (None if tt_tables is None else frozenset(tt_tables), int(tt_min_rows))
        if core_lr_scale is not None and not float(core_lr_scale) > 0:
            raise ValueError(f"core_lr_scale must be > 0, got {core_lr_scale}")
        self.core_lr_scale = core_lr_scale
        self.fused = bool(fused)
        self.tt = nn.ModuleDict()
        self.dense = nn.ParameterDict()
        self._dense_state: dict[str, Tensor | None] = {}
        for i, spec in enumerate(self.tables):
            if i in shapes:
                self.tt[str(i)] = TTTable(shapes[i], weight_dist, table_seed(seed, spec.name), device)
            else:
                w = nn.Parameter(dense_table_init(spec, seed).to(device))
                self.dense[str(i)] = w
                self._dense_state[str(i)] = optim.init_state(w.data)
        for t in self.tt.values():
            t.optim = self.core_optim(t.shape)
            t.state = [t.optim.init_state(c.data) for c in t.cores]
        self._step_work = TTWork()
        self._last_work = TTWork()

    def core_optim(self, shape: tt.TTShape) -> EmbeddingOptim:
        """The optimizer of a TT table's cores: the tables' at ``core_lr_scale`` times their rate."""
        scale = self.core_lr_scale if self.core_lr_scale is not None else (
            1.0 / shape.d if self.optim.kind == "adagrad" else 1.0)
        return dataclasses.replace(self.optim, lr=self.optim.lr * float(scale))

    # --- configuration ---------------------------------------------------------------------------
    def configure(self, **options: Any) -> None:
        """System options (chunk sizes, micro-batches); the base accepts none."""
        if options:
            raise TypeError(f"{self.name} got unknown option(s) {sorted(options)}")

    @classmethod
    def plan_shapes(cls, tables: Sequence[TableSpec], ranks=DEFAULT_RANK, p=None, q=None, cores=3,
                    tt_tables: Sequence[str] | None = None, tt_min_rows: int = TT_MIN_ROWS,
                    tt_oversize: str = "shrink") -> dict[int, tt.TTShape]:
        """The TT shape of every table that is TT (by index); the others stay dense. Allocates nothing."""
        return cls.plan_tables(tables, ranks, p, q, cores, tt_tables, tt_min_rows, tt_oversize)[0]

    @classmethod
    def plan_tables(cls, tables: Sequence[TableSpec], ranks=DEFAULT_RANK, p=None, q=None, cores=3,
                    tt_tables: Sequence[str] | None = None, tt_min_rows: int = TT_MIN_ROWS, tt_oversize: str = "shrink",
                    ) -> tuple[dict[int, tt.TTShape], dict[str, tuple[tuple[int, ...], tuple[int, ...] | None]]]:
        """plan_shapes, and the tables whose asked ranks would have made their cores outweigh the dense table under
        ``tt_oversize="shrink"``: name -> (asked ranks, fitted ranks, or None when the table stays plain)."""
        if tt_oversize not in TT_OVERSIZE:
            raise ValueError(f"tt_oversize must be one of {', '.join(TT_OVERSIZE)}, got {tt_oversize!r}")
        names = {t.name for t in tables}
        if tt_tables is not None:
            unknown = set(tt_tables) - names
            if unknown:
                raise ValueError(f"tt_tables names unknown table(s) {sorted(unknown)}; tables: {sorted(names)}")
        for opt, what in ((ranks, "ranks"), (p, "p"), (q, "q"), (cores, "cores")):
            value_for(opt, "", what, names)  # a mapping naming an unknown table fails here
        shapes: dict[int, tt.TTShape] = {}
        refitted: dict[str, tuple[tuple[int, ...], tuple[int, ...] | None]] = {}
        for i, spec in enumerate(tables):
            if not (spec.name in tt_tables if tt_tables is not None else spec.num_embeddings >= tt_min_rows):
                continue
            shape = cls._shape_for(spec, names, ranks, p, q, cores)
            if shape.num_params * 4 > spec.dense_bytes and tt_oversize != "allow":
                if tt_oversize == "refuse":
                    raise ValueError(
                        f"table {spec.name!r}: its TT cores at ranks {list(shape.ranks)} take {shape.num_params * 4:,} "
                        f"bytes, more than its dense table's {spec.dense_bytes:,} ({spec.num_embeddings:,} rows x "
                        f"{spec.dim}); lower ranks, raise tt_min_rows, or tt_oversize=shrink caps its rank")
                fitted = shape.fitted_to(spec.dense_bytes)
                refitted[spec.name] = (shape.ranks, fitted.ranks if fitted else None)
                if fitted is None:
                    continue  # even rank 1 outweighs the dense table: it stays plain
                shape = fitted
            shapes[i] = shape
        return shapes, refitted

    @classmethod
    def options_for_tables(cls, options: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
        out = super().options_for_tables(options, names)
        if out.get("tt_tables") is not None:
            keep = set(names)
            out["tt_tables"] = [t for t in out["tt_tables"] if t in keep]
        return out

    @classmethod
    def external_update_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        return {**super().external_update_options(options), "fused": False}  # core gradients wait in .grad

    def gradient_tensors(self) -> list[GradientTensor]:
        """The TT cores (dense gradients) and the uncompressed tables (row gradients)."""
        return [GradientTensor(c, False) for t in self.tt.values() for c in t.cores] + [
            GradientTensor(w, True) for w in self.dense.values()]

    @classmethod
    def table_param_bytes(cls, tables: Sequence[TableSpec], options: Mapping[str, Any]) -> list[int]:
        keys = ("ranks", "p", "q", "cores", "tt_tables", "tt_min_rows", "tt_oversize")
        shapes = cls.plan_shapes(tables, **{k: options[k] for k in keys if k in options})
        return [shapes[i].num_params * 4 if i in shapes else t.dense_bytes for i, t in enumerate(tables)]

    @classmethod
    def _shape_for(cls, spec, names, ranks, p, q, cores) -> tt.TTShape:
        d = value_for(cores, spec.name, "cores", names) or 3
        if d not in cls.allowed_cores:
            raise ValueError(f"{cls.name} supports {cls.allowed_cores} TT cores, table {spec.name!r} asks for {d}")
        if spec.dim % cls.dim_multiple:
            raise ValueError(
                f"{cls.name} needs TT table dims divisible by {cls.dim_multiple}; table {spec.name!r} has {spec.dim}"
            )
        r = value_for(ranks, spec.name, "ranks", names)
        try:
            return tt.TTShape.create(
                spec.num_embeddings,
                spec.dim,
                32 if r is None else r,
                p=value_for(p, spec.name, "p", names),
                q=value_for(q, spec.name, "q", names),
                d=d,
            )
        except ValueError as exc:
            raise ValueError(f"table {spec.name!r}: {exc}") from None

    # --- the system's schedule -------------------------------------------------------------------
    @abc.abstractmethod
    def lookup_forward(
        self, table: TTTable, values: Tensor, offsets: Tensor, batch_size: int, work: TTWork
    ) -> tuple[Tensor, Any]:
        """Sum-pooled [B, D] for one TT table, and what the backward needs."""

    @abc.abstractmethod
    def lookup_backward(self, table: TTTable, saved: Any, grad: Tensor, work: TTWork) -> None:
        """Add the core gradients of one TT table into ``table.grads``."""

    def step_forward(self, lookups: Sequence[tuple[int, Tensor, Tensor]], batch_size: int, batch: "TTBatch",
                     work: TTWork) -> tuple[list[Tensor], list[Any]]:
        """Sum-pooled [B, D] of every TT table of ``lookups`` and what step_backward needs: by default
        lookup_forward table by table; a system with a native step over all its tables overrides it and reads
        ``batch`` (the same lookups, table-major: one native call)."""
        outs, saved = [], []
        for index, values, offsets in lookups:
            out, s = self.lookup_forward(self.tt[str(index)], values, offsets, batch_size, work)
            outs.append(out)
            saved.append(s)
        return outs, saved

    def step_tables(self, lookups: Sequence[tuple[int, Tensor, Tensor]]) -> list[tuple[list[Tensor], tt.TTShape]]:
        """(cores, shape) of every TT table of ``lookups``, as the native steps over all tables take them."""
        return self.cores_and_shapes([self.tt[str(i)] for i, _, _ in lookups])

    @staticmethod
    def cores_and_shapes(tables: Sequence[TTTable]) -> list[tuple[list[Tensor], tt.TTShape]]:
        return [(t.core_tensors(), t.shape) for t in tables]

    def step_backward(self, tables: Sequence[TTTable], saved: Sequence[Any], grads: Sequence[Tensor],
                      work: TTWork) -> None:
        """Every table's core gradients into its ``grads`` (zeroed): by default lookup_backward table by table."""
        for table, s, grad in zip(tables, saved, grads):
            self.lookup_backward(table, s, grad, work)

    def tt_route(self, index: int, values: Tensor, offsets: Tensor, batch_size: int
                 ) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        """What of TT table ``index``'s lookup goes through its cores: (values, offsets) for the step's TT call, or
        None for both when nothing does, and a pooled [B, D] served elsewhere (e.g. a cache) to add, or None."""
        return values, offsets, None

    def tt_step(self, lookups: Sequence[tuple[int, Tensor, Tensor]], batch_size: int, batch: "TTBatch") -> list[Tensor]:
        """Sum-pooled [B, D] of every TT table of ``lookups`` ((index, values, offsets) each, at least one;
        ``batch``: the same lookups table-major), in one TTStep."""
        cores = [c for index, _, _ in lookups for c in self.tt[str(index)].cores]
        return list(TTStep.apply(self, tuple(lookups), batch_size, batch, *cores))

    def dense_lookup(self, index: int, values: Tensor, offsets: Tensor, pooling: str) -> Tensor:
        """Pooled [B, D] of uncompressed table ``index`` (sparse gradient into the table)."""
        return F.embedding_bag(values, self.dense[str(index)], offsets, mode=pooling, sparse=True,
                               include_last_offset=True)

    def step_work(self) -> TTWork | None:
        """Where this step's work is counted: None in a traced graph (export, compile), whose counts would read the
        batch's sizes to the host."""
        return None if torch.compiler.is_compiling() else self._step_work

    # --- the interface -----------------------------------------------------------------------------
    def forward(self, features: SparseFeatures) -> Tensor:
        features = self.checked(features)
        self._step_work = TTWork()
        B = features.batch_size
        outs: list[Tensor | None] = []
        lookups, served, on_cores = [], {}, []  # the TT tables' lookups through the cores, and what else pooled them
        rerouted = False  # whether a TT table's lookups through the cores are other than the batch's (a cache's misses)
        counted = self.step_work() is not None
        for i, (spec, (values, offsets)) in enumerate(zip(self.tables, features.tables())):
            if counted:
                self._step_work.nnz += values.numel()
            if str(i) in self.tt:
                v, o, elsewhere = self.tt_route(i, values, offsets, B)
                rerouted |= v is not values
                if v is not None:
                    lookups.append((i, v, o))
                    on_cores.append(i)
                served[i] = (elsewhere, offsets)
                outs.append(None)
            else:
                outs.append(self.dense_lookup(i, values, offsets, spec.pooling))
        through_cores = {}
        if lookups:
            batch = TTBatch.joined(lookups) if rerouted else TTBatch.of(features, on_cores)
            through_cores = dict(zip(on_cores, self.tt_step(lookups, B, batch)))
        for i, (elsewhere, offsets) in served.items():
            parts = [p for p in (elsewhere, through_cores.get(i)) if p is not None]
            out = parts[0] if len(parts) == 1 else parts[0] + parts[1]
            outs[i] = mean_pool(out, offsets) if self.tables[i].pooling == "mean" else out
        self._last_work = self._step_work
        if not self.check_bounds and features.device.type != "cpu":
            self.raise_unchecked_bad_ids(features.device)
        return torch.cat(outs, dim=1)

    def raise_unchecked_bad_ids(self, device: torch.device) -> None:
        """An unchecked batch (check_bounds=False) on a GPU: the kernels read zeros for a bad id and note it; read
        the note once per step (one host sync), before backward moves a core, and raise as the CPU kernels do."""
        try:
            ops.raise_index_error(device)
        except ValueError as exc:
            rows = {}
            for i, spec in enumerate(self.tables):
                if str(i) in self.tt:
                    rows.setdefault(spec.num_embeddings, []).append(spec.name)
            named = "; ".join(f"{', '.join(names)}: {n} rows" for n, names in sorted(rows.items()))
            raise ValueError(f"an id outside its table in this batch (TT tables {named}): {exc}") from None

    @torch.no_grad()
    def apply_update(self, table: TTTable) -> None:
        self.apply_updates([table])

    @torch.no_grad()
    def apply_updates(self, tables: Sequence[TTTable]) -> None:
        """Every core of ``tables`` stepped from its gradient buffer: one multi-tensor update per optimizer
        (tables whose cores share a rate share one)."""
        by_optim: dict[EmbeddingOptim, list[TTTable]] = {}
        for t in tables:
            by_optim.setdefault(t.optim, []).append(t)
        for optim, group in by_optim.items():
            optim.apply_dense_all([c.data for t in group for c in t.cores], [s for t in group for s in t.state],
                                  [g for t in group for g in t.grads])

    @torch.no_grad()
    def optimizer_step(self) -> None:
        for key, w in self.dense.items():
            if w.grad is None:
                continue
            g = w.grad.coalesce()
            self.optim.apply_rows(w.data, self._dense_state[key], g.indices()[0], g.values())
            w.grad = None
        if self.fused:
            return
        for table in self.tt.values():
            for k, core in enumerate(table.cores):
                if core.grad is not None:
                    table.optim.apply_dense(core.data, table.state[k], core.grad)
                    core.grad = None

    def get_extra_state(self) -> dict:
        """The optimizer state of the plain tables and of every TT table's cores (None under SGD): part of the
        state_dict a resumed run loads."""
        return {"dense": dict(self._dense_state), "cores": {k: list(t.state) for k, t in self.tt.items()}}

    def set_extra_state(self, state: dict) -> None:
        from impls.state import copy_state

        copy_state(self._dense_state, state.get("dense"), f"{self.name} tables")
        for k, t in self.tt.items():
            copy_state(t.state, state.get("cores", {}).get(k), f"{self.name} table {k} cores")

    def optimizer_state(self) -> dict[nn.Parameter, dict[str, Tensor]]:
        """Adagrad's sums of the plain tables and of every core (none under SGD)."""
        out: dict[nn.Parameter, dict[str, Tensor]] = {}
        for key, w in self.dense.items():
            if self._dense_state.get(key) is not None:
                out[w] = {"sum": self._dense_state[key]}
        for t in self.tt.values():
            out.update({c: {"sum": st} for c, st in zip(t.cores, t.state) if st is not None})
        return out

    def kept_dense(self) -> dict[str, str]:
        named, min_rows = self._tt_choice
        out = {}
        for i, spec in enumerate(self.tables):
            if str(i) in self.tt:
                continue
            if spec.name in self.refitted:
                out[spec.name] = (f"its TT cores outweigh its dense table even at rank 1 (asked ranks "
                                  f"{list(self.refitted[spec.name][0])}; tt_oversize=shrink)")
            elif named is not None:
                out[spec.name] = "not named in tt_tables"
            else:
                out[spec.name] = f"{spec.num_embeddings:,} rows, under tt_min_rows={min_rows:,}"
        return out

    def tt_shape(self, table: str) -> tt.TTShape | None:
        key = str(self.table_index(table))
        return self.tt[key].shape if key in self.tt else None

    def table_parameters(self, table: str) -> list[Tensor]:
        key = str(self.table_index(table))
        return self.tt[key].core_tensors() if key in self.tt else [self.dense[key].data]

    def materialize_from(self, table: str, params: Sequence[Tensor]) -> Tensor:
        shape = self.tt_shape(table)
        if shape is None:
            return params[0]
        return tt.rows_from_cores(params, shape, torch.arange(shape.num_embeddings, device=params[0].device))

    def materialize(self, table: str) -> Tensor:
        key = str(self.table_index(table))
        if key in self.tt:
            t = self.tt[key]
            return tt.materialize(t.core_tensors(), t.shape)
        return self.dense[key].detach()

    def memory_report(self) -> MemoryReport:
        params = sum(t.param_bytes for t in self.tt.values())
        params += sum(w.numel() * w.element_size() for w in self.dense.values())
        grads = sum(t.param_bytes for t in self.tt.values())  # dense core-gradient buffers
        return MemoryReport(
            params=params,
            optimizer_state=params if self.optim.kind == "adagrad" else 0,
            peak_intermediates=grads + self._last_work.peak_intermediate_bytes,
        )

    def work_report(self) -> WorkReport:
        rep = self._last_work.report()
        # which tables are TT, each with its dense bytes over its cores' (< 1: the cores are the larger), and how many
        # stayed plain tables (under tt_min_rows, or not in tt_tables)
        rep.extra["tt_tables"] = {self.tables[int(i)].name: self.tables[int(i)].dense_bytes / t.param_bytes
                                  for i, t in self.tt.items()}
        rep.extra["dense_tables"] = len(self.dense)
        # tables whose asked ranks would have outweighed the dense table: name -> [asked, fitted ranks or None: plain]
        rep.extra["tt_refitted"] = {name: [list(asked), list(got) if got else None]
                                    for name, (asked, got) in self.refitted.items()}
        return rep
