"""Between SparseFeatures (table-major jagged ids) and TorchRec's KeyedJaggedTensor / KeyedTensor: the one place the
suite converts them. ``to_kjt`` / ``from_kjt`` map one key per table (the TorchRec peer's batches); a KJT with several
features per table, or weights, goes through layout.py's FeatureLayout, which reads a KJT with ``feature_parts``."""
from __future__ import annotations

from typing import NamedTuple, Sequence

import torch
from torch import Tensor

from impls.api import SparseFeatures, TableSpec


def torchrec():
    """The torchrec package, or an ImportError that says how to install it."""
    try:
        import torchrec as tr
    except ImportError as exc:
        raise ImportError("torchrec is not installed: `make install` installs torchrec==1.8.0 (CPU); on a CUDA "
                          "machine install a torchrec and fbgemm-gpu matching its torch") from exc
    return tr


def offsets_of(lengths: Tensor) -> Tensor:
    """[n + 1] int64 offsets of bag ``lengths`` [n] (0 first): the SparseFeatures layout of a KJT's lengths, and of
    any batch built from lengths (reproduce/conformance)."""
    offsets = torch.zeros(lengths.numel() + 1, dtype=torch.int64, device=lengths.device)
    torch.cumsum(lengths, 0, out=offsets[1:])
    return offsets


def to_kjt(features: SparseFeatures, tables: Sequence[TableSpec]):
    """The KJT of a batch, one key per table (the table's name). Key-major like SparseFeatures: the ids are shared."""
    if features.num_tables != len(tables):
        raise ValueError(f"batch has {features.num_tables} tables, {len(tables)} named")
    return torchrec().KeyedJaggedTensor(keys=[t.name for t in tables], values=features.values,
                                        lengths=features.offsets.diff(), stride=features.batch_size)


def from_kjt(kjt, tables: Sequence[TableSpec] | None = None) -> SparseFeatures:
    """The SparseFeatures of a KJT, its keys in ``tables``' order when given (each key a table). A weighted KJT is
    refused: SparseFeatures has no weights (layout.py's FeatureLayout pools them)."""
    if kjt.weights_or_none() is not None:
        raise ValueError("the KJT is weighted: SparseFeatures holds no per-sample weights; build the module with "
                         "is_weighted=True (impls/ebc: SystemEBC), which pools them")
    if tables is not None:
        names = [t.name for t in tables]
        if list(kjt.keys()) != names:
            missing = sorted(set(names) - set(kjt.keys()))
            if missing:
                raise ValueError(f"KJT has no key(s) {missing}")
            kjt = kjt.permute([list(kjt.keys()).index(n) for n in names])
    return SparseFeatures(kjt.values().to(torch.int64), offsets_of(kjt.lengths()), kjt.stride())


class FeaturePart(NamedTuple):
    """One feature of a KJT: its ids [n], bag lengths [B] and per-sample weights [n] (None: unweighted)."""

    values: Tensor
    lengths: Tensor
    weights: Tensor | None


def feature_parts(kjt, keys: Sequence[str], weighted: bool) -> dict[str, FeaturePart]:
    """The parts of the KJT's features ``keys`` (one host read of its per-key lengths). ValueError naming what is
    missing or malformed: a key, the weights, a per-key batch size."""
    have = list(kjt.keys())
    missing = [k for k in keys if k not in have]
    if missing:
        raise ValueError(f"the KeyedJaggedTensor has no feature(s) {missing}; it has {have}")
    if kjt.variable_stride_per_key():
        raise ValueError("the KeyedJaggedTensor has a batch size per feature (variable stride): every feature of "
                         "a batch must have the same batch size here")
    weights = kjt.weights_or_none()
    if weighted and weights is None:
        raise ValueError("the module is weighted (is_weighted=True) but the KeyedJaggedTensor has no weights")
    if not weighted and weights is not None:
        raise ValueError("the KeyedJaggedTensor has per-sample weights but the module is not weighted: build it "
                         "with is_weighted=True to pool them (they would be dropped)")
    B, values, lengths = kjt.stride(), kjt.values(), kjt.lengths()
    if values.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"the KeyedJaggedTensor's values are {values.dtype}: ids must be int32 or int64")
    if lengths.numel() != B * len(have):
        raise ValueError(f"the KeyedJaggedTensor has {lengths.numel()} lengths for {len(have)} features x batch {B}")
    at = kjt.offset_per_key()
    out = {}
    for k in keys:
        f = have.index(k)
        out[k] = FeaturePart(values[at[f]:at[f + 1]].to(torch.int64), lengths[f * B:(f + 1) * B].to(torch.int64),
                             None if weights is None else weights[at[f]:at[f + 1]])
    return out
