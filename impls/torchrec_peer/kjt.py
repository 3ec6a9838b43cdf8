"""Adapters between SparseFeatures (table-major jagged ids) and TorchRec's KeyedJaggedTensor (one key per
feature; here one feature per table, keyed by the table name). Both are key-major, so the ids are shared."""
from __future__ import annotations

from typing import Sequence

from impls.api import SparseFeatures, TableSpec


def _torchrec():
    try:
        from torchrec import KeyedJaggedTensor
    except ImportError as exc:
        raise ImportError("torchrec is not installed: `make install` installs torchrec==1.8.0 (CPU); on a CUDA "
                          "machine install a torchrec and fbgemm-gpu matching its torch") from exc
    return KeyedJaggedTensor


def to_kjt(features: SparseFeatures, tables: Sequence[TableSpec]):
    KeyedJaggedTensor = _torchrec()
    if features.num_tables != len(tables):
        raise ValueError(f"batch has {features.num_tables} tables, {len(tables)} named")
    return KeyedJaggedTensor(keys=[t.name for t in tables], values=features.values,
                             lengths=features.offsets.diff(), stride=features.batch_size)


def from_kjt(kjt, tables: Sequence[TableSpec] | None = None) -> SparseFeatures:
    """The SparseFeatures of a KJT, its keys in ``tables``' order when given (each key a table)."""
    if tables is not None:
        names = [t.name for t in tables]
        if list(kjt.keys()) != names:
            missing = sorted(set(names) - set(kjt.keys()))
            if missing:
                raise ValueError(f"KJT has no key(s) {missing}")
            kjt = kjt.permute([list(kjt.keys()).index(n) for n in names])
    B = kjt.stride()
    import torch

    lengths = kjt.lengths()
    offsets = torch.zeros(lengths.numel() + 1, dtype=torch.int64, device=lengths.device)
    torch.cumsum(lengths, 0, out=offsets[1:])
    return SparseFeatures(kjt.values().to(torch.int64), offsets, B)
