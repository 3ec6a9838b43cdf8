"""``torchrec``: TorchRec's DistributedModelParallel over an EmbeddingBagCollection in the same harness, as a peer of
the clusters in impls/embark (pytorch/torchrec's sharding types and planner). ``sharding`` is one TorchRec sharding
type for every table (table_wise, column_wise, data_parallel on CPU; row_wise and table_row_wise on GPU, never run
here), placed by TorchRec's own planner under that constraint, or ``planner``: TorchRec's EmbeddingShardingPlanner
(its estimators, proposers and partitioner) chooses each table's type among those the device supports, on the same
topology; the record keeps the chosen plan (plan_info); the optimizer is fused into backward
(TorchRec's apply_optimizer_in_backward: SGD or Adagrad) for sharded tables; data-parallel tables get plain
gradients from TorchRec (it leaves them to the user's dense optimizer), which ``optimizer_step`` sums over the ranks
in one all-reduce and applies. Tables start from dense-torch's weights (table_seed), so a run equals the
single-device model. TorchRec's collectives are its own: bytes are not counted by Comm (the record's comm bytes are
absent for this implementation)."""
from __future__ import annotations

from typing import Any, ClassVar, Sequence

import torch
from torch import Tensor

from impls.api import EmbeddingOptim, MemoryReport, ShardedCollection, SparseFeatures, TableSpec, register
from impls.core.init import dense_table_init
from impls.sharding.comm import Comm
from impls.sharding.gather import Block, assemble_table
from impls.ebc.kjt import to_kjt, torchrec as _torchrec

CPU_SHARDINGS = ("table_wise", "column_wise", "data_parallel")
GPU_SHARDINGS = ("row_wise", "table_row_wise")


@register
class TorchRecCollection(ShardedCollection):
    """TorchRec's DistributedModelParallel over an EmbeddingBagCollection, raced as a peer (over ranks only)."""

    option_keys: ClassVar[frozenset[str]] = frozenset({"sharding"})
    name = "torchrec"
    supports_external_update = False  # apply_optimizer_in_backward: sharded tables leave no gradient
    comm_counted = False  # TorchRec's own collectives (only the data-parallel all-reduce goes through Comm)

    def __init__(self, tables: Sequence[TableSpec], optim: EmbeddingOptim, ctx: Any | None = None, *,
                 device: str | torch.device = "cpu", check_bounds: bool = True, seed: int = 0,
                 sharding: str = "table_wise", comm: Comm | None = None) -> None:
        super().__init__(tables, optim, ctx, check_bounds=check_bounds, seed=seed)
        if ctx is None:
            raise ValueError("torchrec runs DistributedModelParallel: run it with --world-size >= 2")
        _torchrec()
        from torchrec import EmbeddingBagCollection, EmbeddingBagConfig, PoolingType
        from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
        from torchrec.distributed.model_parallel import DistributedModelParallel
        from torchrec.distributed.planner import EmbeddingShardingPlanner, Topology
        from torchrec.distributed.planner.types import ParameterConstraints
        from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward

        from torchrec.distributed import comm_ops

        # TorchRec divides the AlltoAll'd gradients by the world size (its losses are per-rank means averaged by
        # DDP); dlrmbench's rank losses are shares of the global mean whose gradients add up, so no division
        comm_ops.set_gradient_division(False)
        dev = torch.device(device)
        allowed = CPU_SHARDINGS + (GPU_SHARDINGS if dev.type == "cuda" else ())
        if sharding not in allowed + ("planner",):
            raise ValueError(f"torchrec sharding {sharding!r} is not available on {dev.type}; choose one of "
                             f"{allowed + ('planner',)}")
        configs = [EmbeddingBagConfig(name=t.name, embedding_dim=t.dim, num_embeddings=t.num_embeddings,
                                      feature_names=[t.name],
                                      pooling=PoolingType.MEAN if t.pooling == "mean" else PoolingType.SUM)
                   for t in self.tables]
        ebc = EmbeddingBagCollection(tables=configs, device=torch.device("meta"))
        if optim.kind == "sgd":
            apply_optimizer_in_backward(torch.optim.SGD, ebc.parameters(), {"lr": optim.lr})
        else:
            # fbgemm's fused exact Adagrad starts its accumulator at zero and takes no other start value
            # (TorchRec would forward initial_accumulator_value to fbgemm, which refuses it)
            if optim.initial_accumulator != 0:
                raise ValueError("torchrec's fused Adagrad (fbgemm) starts the accumulator at 0; got "
                                 f"initial_accumulator={optim.initial_accumulator}")
            apply_optimizer_in_backward(torch.optim.Adagrad, ebc.parameters(), {"lr": optim.lr, "eps": optim.eps})
        types = list(allowed) if sharding == "planner" else [sharding]
        constraints = {t.name: ParameterConstraints(sharding_types=types) for t in self.tables}
        topology = Topology(world_size=ctx.world_size, compute_device=dev.type,
                            local_world_size=ctx.local_world_size)
        # checked batches have every id validated before TorchRec sees them (bounds_check), so its TBEs skip
        # their own check, as dense-fbgemm's do; unchecked ones keep fbgemm's
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import BoundsCheckMode

        mode = BoundsCheckMode.NONE if check_bounds else BoundsCheckMode.WARNING
        sharder = EmbeddingBagCollectionSharder(fused_params={"bounds_check_mode": mode})
        planner = EmbeddingShardingPlanner(topology=topology, constraints=constraints)
        self.plan = planner.collective_plan(ebc, [sharder], ctx.group or torch.distributed.GroupMember.WORLD)
        self.model = DistributedModelParallel(ebc, device=dev, plan=self.plan, sharders=[sharder])
        self.sharding = sharding
        self._plan_info = {"sharding": sharding, "tables": plan_summary(self.plan)}
        self.comm = comm or Comm(ctx)
        self._dp_state: dict[int, Tensor | None] = {}
        self._load_initial(seed)

    def plan_info(self) -> dict[str, Any]:
        return self._plan_info

    @torch.no_grad()
    def _load_initial(self, seed: int) -> None:
        """Every local shard (or replica) from the rows and columns of dense-torch's initial table."""
        for name, t in self._weights():
            spec = self.tables[self.table_index(name)]
            for (r, c), tensor in self._local_shards(t):
                tensor.copy_(dense_table_init(spec, seed, rows=slice(r, r + tensor.shape[0]),
                                              cols=slice(c, c + tensor.shape[1])))

    def _weights(self):
        for key, t in self.model.state_dict().items():
            if key.endswith(".weight"):
                yield key.split(".")[-2], t

    @staticmethod
    def _local_shards(t):
        if hasattr(t, "local_shards"):
            return [(tuple(s.metadata.shard_offsets), s.tensor) for s in t.local_shards()]
        return [((0, 0), t)]

    @torch.no_grad()
    def optimizer_step(self) -> None:
        params = [p for p in self.model.parameters() if p.grad is not None]
        if not params:
            return
        for p, g in zip(params, self.comm.all_reduce_coalesced([p.grad for p in params], "torchrec.dp")):
            if id(p) not in self._dp_state:
                self._dp_state[id(p)] = self.optim.init_state(p.data)
            self.optim.apply_dense(p.data, self._dp_state[id(p)], g)
            p.grad = None

    def forward(self, features: SparseFeatures) -> Tensor:
        features = self.checked(features)
        out = self.model(to_kjt(features, self.tables))
        out = out.wait() if hasattr(out, "wait") else out
        if list(out.keys()) == [t.name for t in self.tables]:
            return out.values()
        parts = out.to_dict()  # a sharded collection returns its keys grouped by sharding: back to table order
        return torch.cat([parts[t.name] for t in self.tables], dim=1)

    def gather_table(self, table: str) -> Tensor:
        """The whole table from every rank's shards (a collective: every rank calls it)."""
        spec = self.tables[self.table_index(table)]
        shards = self._local_shards(dict(self._weights())[table])
        return assemble_table(self.comm, spec, [Block(r, 1, c, w) for (r, c), w in shards])

    def materialize(self, table: str) -> Tensor:
        raise KeyError(f"table {table!r} is sharded by TorchRec; use gather_table on every rank")

    def memory_report(self) -> MemoryReport:
        params = sum(w.numel() * w.element_size() for _, t in self._weights() for _, w in self._local_shards(t))
        return MemoryReport(params=params, optimizer_state=params if self.optim.kind == "adagrad" else 0)


def plan_summary(plan) -> dict[str, dict[str, Any]]:
    """Per table: TorchRec's sharding type and the ranks of its shards (from its ShardingPlan)."""
    out = {}
    for module_plan in plan.plan.values():
        for name, ps in module_plan.items():
            ranks = sorted({r for r in (ps.ranks or [])}) if getattr(ps, "ranks", None) else []
            out[name] = {"type": str(ps.sharding_type), "ranks": ranks}
    return out
