"""dense-fbgemm: fbgemm's table-batched embedding (TBE) with the optimizer fused into backward
(EXACT_SGD / EXACT_ADAGRAD), on CPU (host tables) or CUDA (device tables). ``weights_precision="fp16"`` stores and
trains the tables in half precision (fbgemm's FP16 TBE: float32 output, the fused update rounding stochastically
into the fp16 rows, optimizer state in float32); BF16 raises in the pinned CPU build's forward, so it is refused
here."""
from __future__ import annotations

import torch
from torch import Tensor, nn

from typing import Any, ClassVar, Sequence

from impls.api import EmbeddingOptim, MemoryReport, SparseFeatures, TableSpec, WorkReport, register
from impls.dense.base import DenseCollection
from impls.core.init import dense_table_init

try:
    from fbgemm_gpu.split_embedding_configs import EmbOptimType, SparseType
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import (BoundsCheckMode, ComputeDevice,
                                                                      EmbeddingLocation, PoolingMode)
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import SplitTableBatchedEmbeddingBagsCodegen
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"dense-fbgemm needs fbgemm_gpu ({exc}); `make install` installs fbgemm-gpu-cpu==1.8.0 on a CPU torch"
    ) from exc

_POOLING = {"sum": PoolingMode.SUM, "mean": PoolingMode.MEAN}
_OPTIM = {"sgd": EmbOptimType.EXACT_SGD, "adagrad": EmbOptimType.EXACT_ADAGRAD}
PRECISIONS = {"fp32": (SparseType.FP32, 4), "fp16": (SparseType.FP16, 2)}  # -> fbgemm's type, bytes per weight


def _precision(value: str) -> tuple[Any, int]:
    if value not in PRECISIONS:
        raise ValueError(f"dense-fbgemm: weights_precision must be one of {sorted(PRECISIONS)} (bf16 and int8 do not "
                         f"train on the pinned fbgemm CPU build), got {value!r}")
    return PRECISIONS[value]


@register
class DenseFbgemm(DenseCollection):
    """fbgemm's table-batched embedding bags with the update fused into backward (exact SGD / Adagrad); fp32 or fp16
    tables (``weights_precision``). As a TorchRec module: dlrmbench.systems.FbgemmEBC."""

    option_keys: ClassVar[frozenset[str]] = frozenset({"weights_precision"})
    name = "dense-fbgemm"
    supports_external_update = False  # the TBE applies SGD / Adagrad in its backward

    def __init__(self, tables: Sequence[TableSpec], optim: EmbeddingOptim, ctx: Any | None = None, *,
                 weights_precision: str = "fp32", **kwargs: Any) -> None:
        self.precision, self.weight_bytes = _precision(weights_precision)
        super().__init__(tables, optim, ctx, **kwargs)

    @classmethod
    def table_param_bytes(cls, tables: Sequence[TableSpec], options: dict[str, Any]) -> list[int]:
        per = _precision(options.get("weights_precision", "fp32"))[1]
        return [t.num_embeddings * t.dim * per for t in tables]

    def build(self, device: torch.device) -> None:
        optim, seed = self.optim, self.seed
        if device.type == "cuda":
            location, compute = EmbeddingLocation.DEVICE, ComputeDevice.CUDA
        elif device.type == "cpu":
            location, compute = EmbeddingLocation.HOST, ComputeDevice.CPU
        else:
            raise ValueError(f"dense-fbgemm runs on cpu or cuda, not {device}")
        # One TBE per pooling mode (a TBE has a single pooling mode); `groups` keeps table order.
        self.groups: list[list[int]] = []
        self.tbes = nn.ModuleList()
        for pooling, mode in _POOLING.items():
            idx = [i for i, t in enumerate(self.tables) if t.pooling == pooling]
            if not idx:
                continue
            tbe = SplitTableBatchedEmbeddingBagsCodegen(
                embedding_specs=[(self.tables[i].num_embeddings, self.tables[i].dim, location, compute) for i in idx],
                optimizer=_OPTIM[optim.kind],
                learning_rate=optim.lr,
                eps=optim.eps,
                pooling_mode=mode,
                weights_precision=self.precision,
                output_dtype=SparseType.FP32,
                device=device,
                # checked batches have every id validated already (bounds_check); unchecked ones get fbgemm's
                bounds_check_mode=BoundsCheckMode.NONE if self.check_bounds else BoundsCheckMode.WARNING,
            )
            with torch.no_grad():
                for w, i in zip(tbe.split_embedding_weights(), idx):
                    if w.is_cpu and w.dtype == torch.float32:
                        dense_table_init(self.tables[i], seed, out=w)
                    else:  # a device table, or fp16 weights: drawn in fp32, then rounded into place
                        w.copy_(dense_table_init(self.tables[i], seed))
                if optim.kind == "adagrad":
                    for states in tbe.split_optimizer_states():
                        states[0].fill_(optim.initial_accumulator)
            self.groups.append(idx)
            self.tbes.append(tbe)
        order = [i for g in self.groups for i in g]
        starts = [0]
        for t in self.tables:
            starts.append(starts[-1] + t.dim)
        # Output columns are produced group by group; `_columns` puts them back in table order.
        produced = torch.cat([torch.arange(starts[i], starts[i + 1]) for i in order])
        self._columns = None if order == list(range(len(self.tables))) else torch.argsort(produced).to(device)

    def forward(self, features: SparseFeatures) -> Tensor:
        features = self.checked(features)
        outs = []
        for idx, tbe in zip(self.groups, self.tbes):
            f = features if len(self.groups) == 1 else features.select_tables(idx)
            if self.check_bounds or f is not features:
                outs.append(tbe(f.values, f.offsets))
            else:  # unchecked: fbgemm's own bounds check sets bad ids to row 0 in place; never in the caller's tensors
                outs.append(tbe(f.values.clone(), f.offsets.clone()))
        out = outs[0] if len(outs) == 1 else torch.cat(outs, dim=1)
        if self._columns is not None:
            out = out.index_select(1, self._columns)
        self._last_intermediates = 2 * out.numel() * out.element_size()  # output + its gradient
        per_table = features.offsets[:: features.batch_size].diff().cpu()  # lookups per table, one copy
        rows_bytes = sum(int(n) * t.dim * self.weight_bytes for n, t in zip(per_table, self.tables))
        self._work = WorkReport(nnz=features.nnz, extra={"rows_read_bytes": rows_bytes})
        return out

    def materialize(self, table: str) -> Tensor:
        i = self.table_index(table)
        for idx, tbe in zip(self.groups, self.tbes):
            if i in idx:
                return tbe.split_embedding_weights()[idx.index(i)].detach().float()
        raise AssertionError("unreachable: every table belongs to a group")

    def memory_report(self) -> MemoryReport:
        """The TBEs' own tensors: weights at their precision, the optimizer's state as fbgemm keeps it."""
        params = sum(w.numel() * w.element_size() for tbe in self.tbes for w in tbe.split_embedding_weights())
        state = sum(s.numel() * s.element_size() for tbe in self.tbes if self.optim.kind == "adagrad"
                    for states in tbe.split_optimizer_states() for s in states)
        return MemoryReport(params=params, optimizer_state=state, peak_intermediates=self._last_intermediates)
