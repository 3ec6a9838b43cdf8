"""How a TorchRec model's features meet the suite's tables: EmbeddingBagConfigs read into TableSpecs and the
features each table serves (``table_features``), and a KeyedJaggedTensor laid out as the SparseFeatures a collection
of those tables takes, and its pooled output read back per feature (``FeatureLayout``).

Two layouts, both exact for any system (they use nothing but the interface):

- bags (unweighted): batch K*B, K the most features any table serves; feature j of a table holds bags
  [j*B, (j+1)*B) of its table, and a table with fewer features has empty bags there. With one feature per table
  (the common case) this is the KJT itself, table-major.
- lookups (weighted: per-sample weights): every lookup its own bag of one id, so the collection returns each
  looked-up row [n, D]; each is scaled by its weight and summed into its bag. It costs an [n, D] output (n: the
  largest table's lookups) in place of [B, D], but gives every system weights, whatever its kernels pool."""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import torch
from torch import Tensor

from impls.api import SparseFeatures, TableSpec
from impls.ebc.kjt import FeaturePart, offsets_of


@dataclasses.dataclass(frozen=True)
class TableFeatures:
    """One table of a module: its TableSpec, the KJT features it pools (in order) and the output key of each
    (TorchRec's embedding names: the feature's name, or "feature@table" where two tables read one feature)."""

    spec: TableSpec
    features: tuple[str, ...]
    keys: tuple[str, ...]


def _pooling(config: Any) -> str:
    kind = getattr(config.pooling, "name", str(config.pooling)).lower()
    if kind not in ("sum", "mean"):
        raise ValueError(f"table {config.name!r}: pooling {kind.upper()} is not a pooled embedding bag; these systems "
                         f"pool by SUM or MEAN")
    return kind


def table_features(configs: Sequence[Any]) -> list[TableFeatures]:
    """The TableFeatures of EmbeddingBagConfigs (validated: names, dims, pooling, data type, features)."""
    configs = list(configs)
    if not configs:
        raise ValueError("at least one EmbeddingBagConfig is required")
    for c in configs:
        for attr in ("name", "num_embeddings", "embedding_dim", "feature_names", "pooling"):
            if not hasattr(c, attr):
                raise TypeError(f"expected torchrec EmbeddingBagConfig, got {type(c).__name__} (no {attr!r})")
        dtype = getattr(getattr(c, "data_type", None), "name", "FP32")
        if dtype != "FP32":
            raise ValueError(f"table {c.name!r}: data_type {dtype}; the suite's systems hold fp32 tables")
    names = [c.name for c in configs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"duplicate table names: {dup}")
    features = [tuple(c.feature_names) or (c.name,) for c in configs]
    for c, fs in zip(configs, features):
        if len(set(fs)) != len(fs):
            raise ValueError(f"table {c.name!r} names a feature twice: {list(fs)}")
    count: dict[str, int] = {}
    for fs in features:
        for f in fs:
            count[f] = count.get(f, 0) + 1
    return [TableFeatures(TableSpec(c.name, int(c.num_embeddings), int(c.embedding_dim), _pooling(c)), fs,
                          tuple(f if count[f] == 1 else f"{f}@{c.name}" for f in fs))
            for c, fs in zip(configs, features)]


class FeatureLayout:
    """The layout of one collection's tables (``tables``: TableFeatures, the collection's table order)."""

    def __init__(self, tables: Sequence[TableFeatures], weighted: bool) -> None:
        self.tables = list(tables)
        self.weighted = weighted
        self.width = max(len(t.features) for t in self.tables)  # K
        self.cols = [0]
        for t in self.tables:
            self.cols.append(self.cols[-1] + t.spec.dim)
        if weighted:
            mean = [t.spec.name for t in self.tables if t.spec.pooling == "mean"]
            if mean:
                raise ValueError(f"table(s) {mean}: MEAN pooling with per-sample weights is not defined (torch's "
                                 f"embedding_bag refuses it too); use SUM or an unweighted module")

    @property
    def specs(self) -> list[TableSpec]:
        """The collection's tables; in the lookups layout every bag holds one id, so the tables sum."""
        if not self.weighted:
            return [t.spec for t in self.tables]
        return [dataclasses.replace(t.spec, pooling="sum") for t in self.tables]

    def features(self, parts: dict[str, FeaturePart], batch_size: int) -> tuple[SparseFeatures, Any]:
        """The collection's batch, and what ``pooled`` reads its output with."""
        return self._lookups(parts, batch_size) if self.weighted else self._bags(parts, batch_size)

    def _bags(self, parts: dict[str, FeaturePart], B: int) -> tuple[SparseFeatures, Any]:
        dev = next(iter(parts.values())).values.device
        values, lengths = [], []
        for t in self.tables:
            for j in range(self.width):
                if j < len(t.features):
                    p = parts[t.features[j]]
                    values.append(p.values)
                    lengths.append(p.lengths)
                else:
                    lengths.append(torch.zeros(B, dtype=torch.int64, device=dev))
        return SparseFeatures(torch.cat(values), offsets_of(torch.cat(lengths)), self.width * B), B

    def _lookups(self, parts: dict[str, FeaturePart], B: int) -> tuple[SparseFeatures, Any]:
        dev = next(iter(parts.values())).values.device
        per_table = []  # (ids, weights, slot of each lookup among the table's K_t * B feature bags)
        for t in self.tables:
            ids, weights, slots = [], [], []
            for j, f in enumerate(t.features):
                p = parts[f]
                ids.append(p.values)
                weights.append(p.weights)
                slots.append(torch.repeat_interleave(torch.arange(B, device=dev), p.lengths) + j * B)
            per_table.append((torch.cat(ids), torch.cat(weights), torch.cat(slots)))
        n = max(1, max(ids.numel() for ids, _, _ in per_table))
        lengths = [torch.cat([torch.ones(ids.numel(), dtype=torch.int64, device=dev),
                              torch.zeros(n - ids.numel(), dtype=torch.int64, device=dev)]) for ids, _, _ in per_table]
        values = torch.cat([ids for ids, _, _ in per_table])
        return SparseFeatures(values, offsets_of(torch.cat(lengths)), n), (B, per_table)

    def pooled(self, out: Tensor, how: Any) -> list[list[Tensor]]:
        """Per table, the [B, D] of each of its features, from the collection's output ``out``."""
        blocks = []
        if not self.weighted:
            B = how
            for k, t in enumerate(self.tables):
                cols = out[:, self.cols[k]:self.cols[k + 1]]
                blocks.append([cols[j * B:(j + 1) * B] for j in range(len(t.features))])
            return blocks
        B, per_table = how
        for k, (t, (ids, weights, slots)) in enumerate(zip(self.tables, per_table)):
            rows = out[:ids.numel(), self.cols[k]:self.cols[k + 1]] * weights.to(out.dtype).unsqueeze(1)
            bags = out.new_zeros(len(t.features) * B, t.spec.dim).index_add(0, slots, rows)
            blocks.append([bags[j * B:(j + 1) * B] for j in range(len(t.features))])
        return blocks
