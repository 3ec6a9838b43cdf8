"""SystemEBC: any embedding system of the suite as a drop-in for TorchRec's EmbeddingBagCollection. Built from
EmbeddingBagConfigs, it takes a KeyedJaggedTensor (several features per table, per-sample weights, SUM or MEAN
pooling) and returns a KeyedTensor keyed as EmbeddingBagCollection keys its output, so it drops into
torchrec.models.dlrm.DLRM and DLRM_DCN as they are.

Optimizer ownership follows TorchRec's fused embedding optimizers: the optimizer is declared per table at
construction, and the update of every table runs inside backward (the system's own fused update, or its
``optimizer_step`` queued to run when the backward pass ends). There is no step to forget, every parameter is marked
for ``in_backward_optimizer_filter``, and after backward no parameter of the module holds a gradient, so a dense
optimizer handed ``model.parameters()`` cannot step a table a second time. ``fused_optimizer`` is the KeyedOptimizer
view of the state; tables a system keeps uncompressed are in ``kept_dense()`` and train with the declared
optimizer."""
from __future__ import annotations

from typing import Any, ClassVar, Sequence

import torch
from torch import Tensor, nn

from impls.api import EmbeddingCollection, EmbeddingOptim, get_impl
from impls.ebc.kjt import feature_parts, torchrec
from impls.ebc.layout import FeatureLayout, TableFeatures, table_features
from impls.ebc.optimizers import embedding_optims, fused_optimizer


class _InBackward:
    """The marker on every parameter of a SystemEBC (``param._in_backward_optimizers``): its update runs inside
    backward, so TorchRec's ``in_backward_optimizer_filter`` leaves it out of the dense parameters."""

    def __repr__(self) -> str:
        return "SystemEBC's in-backward embedding update"


IN_BACKWARD = _InBackward()


def _mark(p: nn.Parameter) -> None:
    p._in_backward_optimizers, p._optimizer_classes, p._optimizer_kwargs = [IN_BACKWARD], [None], [{}]


def system_class(system: Any) -> type[EmbeddingCollection]:
    """The collection class of ``system``: a registry name, or an EmbeddingCollection subclass (an outside system
    written from docs/adding-a-system.md, registered or not)."""
    if isinstance(system, str):
        return get_impl(system)
    if isinstance(system, type) and issubclass(system, EmbeddingCollection):
        return system
    raise TypeError(f"system must be a registry name (e.g. 'ecorec') or an EmbeddingCollection subclass, got "
                    f"{system!r}")


class SystemEBC(nn.Module):
    """An EmbeddingBagCollection whose tables are held and trained by one of the suite's systems.

    Args:
        tables: torchrec ``EmbeddingBagConfig`` per table (name, num_embeddings, embedding_dim, feature_names,
            pooling SUM or MEAN; fp32). A table may serve several features.
        system: the system's registry name ("ecorec", "elrec", "ttrec", "dense-torch", "qr", ...) or its
            EmbeddingCollection class (an outside system gets this interface without writing it); the per-system
            subclasses (EcoRecEBC, ...) fix it.
        optimizer: the embedding optimizer, applied inside backward: an ``EmbeddingOptim``, or ``(torch.optim.SGD,
            {"lr": 0.1})`` / ``(torch.optim.Adagrad, {...})`` as ``apply_optimizer_in_backward`` takes it, or a
            {table name: one of those} naming every table (tables that share an optimizer share one collection).
        is_weighted: the batches carry per-sample weights (every feature); pooled as sum(weight * row).
        device, seed, check_bounds: as the system takes them (check_bounds: every id checked against its table).
        ctx, comm, stats: over ranks, a distributed context, its communicator and (on rank 0) a sample batch (a
            KJT) for a sharding planner. A system that shards itself (EMBark's clusters, ``distributed_only``) builds
            through its ``build_distributed``; any other is sharded by the suite (impls/sharding: its
            ``dist_defaults``, e.g. table-wise, or options ``sharding=`` / ``placement=``). Each rank feeds its own
            part of the batch.
        options: the system's own options (TT ranks, micro-batches, ...; see ``dlrmbench run --help``).
    """

    system: ClassVar[str | None] = None

    def __init__(self, tables: Sequence[Any], system: Any = None, optimizer: Any = EmbeddingOptim(), *,
                 is_weighted: bool = False, device: str | torch.device | None = None, seed: int = 0,
                 check_bounds: bool = True, ctx: Any = None, comm: Any = None, stats: Any = None,
                 **options: Any) -> None:
        super().__init__()
        torchrec()  # a clear ImportError before anything is built
        if self.system is not None and system not in (None, self.system):
            raise TypeError(f"{type(self).__name__} is system {self.system!r}, not {system!r}")
        cls = system_class(self.system or system)
        name = cls.name
        self._configs = list(tables)
        self._tables = table_features(self._configs)
        self._weighted = bool(is_weighted)
        optims = embedding_optims(optimizer, [t.spec.name for t in self._tables])
        groups: dict[EmbeddingOptim, list[TableFeatures]] = {}
        for t in self._tables:
            groups.setdefault(optims[t.spec.name], []).append(t)
        if cls.distributed_only and ctx is None:
            raise ValueError(f"{name} shards its tables over ranks: pass ctx= (impls.sharding.context.DistContext) "
                             f"and comm= to build it (a world of one rank will do)")
        if ctx is not None and comm is None:
            raise ValueError("ctx= without comm=: a module over ranks talks through impls.sharding.comm.Comm(ctx)")
        self.collections = nn.ModuleList()
        self.layouts: list[FeatureLayout] = []
        self.optims: list[EmbeddingOptim] = []
        for optim, members in groups.items():
            layout = FeatureLayout(members, self._weighted)
            names = [t.spec.name for t in members]
            opts = cls.options_for_tables(options, names) if len(groups) > 1 else dict(options)
            if device is not None:
                opts["device"] = device
            if ctx is not None:  # over ranks: the system's own sharding, or the suite's (impls/sharding)
                from impls.sharding.build import build_sharded

                sample = None if stats is None else layout.features(
                    feature_parts(stats, sorted({f for t in members for f in t.features}), self._weighted),
                    stats.stride())[0]
                opts.setdefault("device", ctx.device)
                coll = build_sharded(cls, layout.specs, optim, ctx, comm, stats=sample, check_bounds=check_bounds,
                                     seed=seed, **opts)
            else:
                coll = cls(layout.specs, optim, check_bounds=check_bounds, seed=seed, **opts)
            self.collections.append(coll)
            self.layouts.append(layout)
            self.optims.append(optim)
        self._keys = [k for t in self._tables for k in t.keys]
        self._dims = [t.spec.dim for t in self._tables for _ in t.features]
        self._features = sorted({f for t in self._tables for f in t.features})
        self._direct = len(self.collections) == 1 and self.layouts[0].width == 1 and not self._weighted
        self._step_queued = False
        self.mark_parameters()

    # --- TorchRec's EmbeddingBagCollection interface -----------------------------------------------------
    def embedding_bag_configs(self) -> list[Any]:
        """The EmbeddingBagConfigs the module was built from."""
        return self._configs

    def is_weighted(self) -> bool:
        """Whether batches carry per-sample weights."""
        return self._weighted

    @property
    def device(self) -> torch.device:
        p = next(self.parameters(), None)
        return p.device if p is not None else torch.device("cpu")

    def forward(self, features: Any) -> Any:
        """Pooled embeddings of a KeyedJaggedTensor: a KeyedTensor [B, sum of dims over features], keyed by feature
        (``feature@table`` where two tables read one feature), in table order and each table's feature order."""
        if self._weighted and torch.compiler.is_exporting():
            raise ValueError("a weighted SystemEBC does not export: it pools each id as its own bag, so its "
                             "collection's batch size is the batch's number of ids, which an exported graph cannot "
                             "leave open; export an unweighted module")
        self.refuse_foreign_updates()
        parts = feature_parts(features, self._features, self._weighted)
        B = features.stride()
        by_table: dict[str, list[Tensor]] = {}
        out = None
        for coll, layout in zip(self.collections, self.layouts):
            sf, how = layout.features(parts, B)
            out = coll(sf)
            self.update_after_backward(out)
            for t, blocks in zip(layout.tables, layout.pooled(out, how)):
                by_table[t.spec.name] = blocks
        values = out if self._direct else torch.cat([b for t in self._tables for b in by_table[t.spec.name]], dim=1)
        return torchrec().KeyedTensor(keys=self._keys, length_per_key=self._dims, values=values)

    # --- the update inside backward ----------------------------------------------------------------------
    def update_after_backward(self, out: Tensor) -> None:
        """Queue the collections' ``optimizer_step`` to run once at the end of the backward pass through ``out``."""
        if torch.is_grad_enabled() and out.requires_grad:
            out.register_hook(self._queue_update)

    def _queue_update(self, grad: Tensor) -> None:
        if not self._step_queued:
            self._step_queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._update)

    def _update(self) -> None:
        self._step_queued = False
        for coll in self.collections:
            coll.optimizer_step()

    def optimizer_step(self) -> None:
        """Refused: the embedding update already ran inside backward (there is no step to call or forget)."""
        raise RuntimeError(f"{type(self).__name__} applies its embedding update inside backward; there is no "
                           f"optimizer_step to call (step your dense optimizer over in_backward_optimizer_filter("
                           f"model.named_parameters()))")

    def mark_parameters(self) -> None:
        """Mark every parameter as updated in backward (TorchRec's ``_in_backward_optimizers``, with the optimizer
        class and kwargs lists torch keeps beside it)."""
        for p in self.parameters():
            _mark(p)

    def refuse_foreign_updates(self) -> None:
        """ValueError when another in-backward optimizer was put on one of the module's parameters (torch's
        apply_optimizer_in_backward): its table would be stepped twice per backward."""
        for name, p in self.named_parameters():
            opts = getattr(p, "_in_backward_optimizers", None)
            if opts is None:
                _mark(p)  # a parameter the system made since (a cache's rows)
            elif any(o is not IN_BACKWARD for o in opts):
                raise ValueError(f"parameter {name!r} has another in-backward optimizer ({opts}): its table is "
                                 f"updated by {type(self).__name__} inside backward already, and would be stepped "
                                 f"twice; declare the optimizer with optimizer= at construction instead")

    def __deepcopy__(self, memo: dict) -> "SystemEBC":
        cls = type(self)
        copy = cls.__new__(cls)
        memo[id(self)] = copy
        import copy as _copy

        for k, v in self.__dict__.items():
            copy.__dict__[k] = _copy.deepcopy(v, memo)
        copy._step_queued = False
        copy.mark_parameters()
        return copy

    # --- state and reports -------------------------------------------------------------------------------
    @property
    def fused_optimizer(self):
        """The embedding optimizer's state as a torchrec KeyedOptimizer (FusedOptimizer: ``step`` does nothing,
        the update ran in backward); keyed by this module's parameter names."""
        named = dict(self.named_parameters())
        state: dict[nn.Parameter, dict[str, Tensor]] = {}
        groups = {}
        for k, (coll, optim) in enumerate(zip(self.collections, self.optims)):
            state.update(coll.optimizer_state())
            groups[",".join(t.spec.name for t in self.layouts[k].tables)] = (optim, list(coll.parameters()))
        return fused_optimizer(named, state, groups)

    def kept_dense(self) -> dict[str, str]:
        """The tables the system keeps uncompressed, each with why (they train with the declared optimizer)."""
        out: dict[str, str] = {}
        for coll in self.collections:
            out.update(coll.kept_dense())
        return out

    def collection_of(self, table: str) -> EmbeddingCollection:
        """The collection that holds ``table``."""
        for coll, layout in zip(self.collections, self.layouts):
            if any(t.spec.name == table for t in layout.tables):
                return coll
        raise KeyError(f"no table named {table!r}; tables: {[t.spec.name for t in self._tables]}")

    def materialize(self, table: str) -> Tensor:
        """The dense [num_embeddings, dim] table ``table`` represents (an oracle: copy it into an
        EmbeddingBagCollection to compare)."""
        return self.collection_of(table).materialize(table)


def ebc_class(system: str, class_name: str, what: str) -> type[SystemEBC]:
    """A SystemEBC subclass fixed to one system (``what``: the system in a few words, for its docstring)."""
    doc = (f"An EmbeddingBagCollection held and trained by {what} (the suite's {system!r}).\n\n"
           f"SystemEBC with system={system!r}: the same arguments but ``system``; see SystemEBC.")
    return type(class_name, (SystemEBC,), {"system": system, "__doc__": doc, "__module__": __name__})


TTRecEBC = ebc_class("ttrec", "TTRecEBC", "TT-Rec (tensor-train tables, hot-row cache)")
ELRecEBC = ebc_class("elrec", "ELRecEBC", "EL-Rec (tensor-train tables, prefix reuse, per-id gradients)")
EcoRecEBC = ebc_class("ecorec", "EcoRecEBC", "EcoRec (tensor-train tables, C-M / M-C pattern)")
EMBarkEBC = ebc_class("embark", "EMBarkEBC", "EMBark's embedding clusters (over ranks: ctx, comm, stats)")
DenseTorchEBC = ebc_class("dense-torch", "DenseTorchEBC", "plain tables (nn.EmbeddingBag, exact optimizers)")
FbgemmEBC = ebc_class("dense-fbgemm", "FbgemmEBC", "fbgemm's table-batched embedding bags")
HashEBC = ebc_class("hash", "HashEBC", "the hashing trick (tables of fewer rows)")
QREBC = ebc_class("qr", "QREBC", "the quotient-remainder trick")
MDEBC = ebc_class("md", "MDEBC", "mixed-dimension tables")
