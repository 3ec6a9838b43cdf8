"""The one interface every embedding implementation in dlrmbench implements, in one import: the values it speaks
in (types.py: TableSpec, SparseFeatures, EmbeddingOptim, MemoryReport, WorkReport, GradientTensor), the collection
itself (interface.py: EmbeddingCollection, ShardedCollection, the options a system declares) and the registry
(registry.py: register, registered_names, get_impl)."""
from __future__ import annotations

from impls.interface import BUILD_ARGS, HARNESS_KEYS, EmbeddingCollection, ShardedCollection
from impls.registry import get_impl, register, registered_names
from impls.types import (POOLINGS, EmbeddingOptim, GradientTensor, MemoryReport, SparseFeatures, TableSpec,
                         WorkReport, check_tables, column_offsets, table_seed)

__all__ = ["BUILD_ARGS", "HARNESS_KEYS", "EmbeddingCollection", "ShardedCollection", "get_impl", "register",
           "registered_names", "POOLINGS", "EmbeddingOptim", "GradientTensor", "MemoryReport", "SparseFeatures",
           "TableSpec", "WorkReport", "check_tables", "column_offsets", "table_seed"]
