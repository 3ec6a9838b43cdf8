"""Meta's public embedding-lookup traces (facebookresearch/dlrm_datasets): ``indices, offsets, lengths =
torch.load(gzip.open(f))`` in the fbgemm TBE layout for T tables x B samples, table-major (table t's bags
are offsets[t*B : (t+1)*B + 1]); lengths (1-D [T*B] or 2-D [T, B]) repeats the bag sizes as a check.
The format of facebookresearch/dlrm_datasets. A source selects tables and slices the file's batch into smaller batches;
the traces carry no dense features or labels, so batches get zeros for both (throughput runs only)."""
from __future__ import annotations

import gzip
import pickle
import re
from pathlib import Path
from typing import Sequence

import torch
from torch import Tensor

from impls.api import SparseFeatures, TableSpec
from impls.data.batch import Batch

_NAME = re.compile(r"_t(\d+)_bs(\d+)")


def load_trace(path: str | Path, num_tables: int | None = None) -> tuple[Tensor, Tensor, int, int]:
    """(indices, offsets, T, B) of a trace file (.pt or .pt.gz), checked for consistency."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            obj = torch.load(f, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # torch's message would suggest weights_only=False: never for a data file
        raise ValueError(f"{path.name}: not a trace file (a torch-saved (indices, offsets, lengths) tuple of integer "
                         f"tensors); it holds something else, which is not loaded") from None
    except (EOFError, OSError, RuntimeError) as exc:
        raise ValueError(f"{path.name}: cannot read the trace ({type(exc).__name__}: {exc})") from None
    if not (isinstance(obj, (tuple, list)) and len(obj) == 3):
        raise ValueError(f"{path.name}: expected (indices, offsets, lengths), got {type(obj).__name__}")
    parts = [torch.as_tensor(x) for x in obj]
    for name, x in zip(("indices", "offsets", "lengths"), parts):
        if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
            raise ValueError(f"{path.name}: {name} are {x.dtype}; a trace holds integer ids and offsets (a float id "
                             f"would be truncated silently)")
    indices, offsets, lengths = (x.to(torch.int64) for x in parts)
    if lengths.dim() == 2:
        T, B = lengths.shape
    else:
        m = _NAME.search(path.name)
        T = num_tables or (int(m.group(1)) if m else None)
        if T is None:
            raise ValueError(f"{path.name}: 1-D lengths and no table count (pass num_tables or name it *_t<T>_bs<B>*)")
        if lengths.numel() % T:
            raise ValueError(f"{path.name}: {lengths.numel()} bag lengths do not split into {T} tables")
        B = lengths.numel() // T
    steps = offsets[1:] - offsets[:-1]
    if offsets.numel() == T * B + 1 and (steps < 0).any():
        bad = int((steps < 0).nonzero()[0])
        raise ValueError(f"{path.name}: offsets decrease at table {bad // B}, bag {bad % B} "
                         f"({int(offsets[bad])} -> {int(offsets[bad + 1])}); they must not decrease")
    if offsets.numel() != T * B + 1 or int(offsets[0]) != 0 or int(offsets[-1]) != indices.numel():
        raise ValueError(f"{path.name}: offsets have {offsets.numel()} entries from {int(offsets[0])} to "
                         f"{int(offsets[-1])}; expected {T * B + 1} from 0 to {indices.numel()}")
    if not torch.equal(offsets[1:] - offsets[:-1], lengths.reshape(-1)):
        bad = int((offsets[1:] - offsets[:-1] != lengths.reshape(-1)).nonzero()[0])
        raise ValueError(f"{path.name}: lengths disagree with offsets at table {bad // B}, bag {bad % B}")
    if indices.numel() and int(indices.min()) < 0:
        raise ValueError(f"{path.name}: negative index at position {int((indices < 0).nonzero()[0])}")
    return indices, offsets, T, B


class MetaTraceSource:
    """Batches of a trace: ``tables`` (indices into the file's tables, default all) and sub-batches of size
    B cut from the file's batch (batch i covers samples [i*B, (i+1)*B) modulo the file's batch)."""

    def __init__(self, path: str | Path, tables: Sequence[int] | None = None, dim: int = 32, num_dense: int = 13,
                 num_tables: int | None = None) -> None:
        indices, offsets, T, B = load_trace(path, num_tables)
        sel = list(range(T)) if tables is None else [int(t) for t in tables]
        bad = [t for t in sel if not 0 <= t < T]
        if bad:
            raise ValueError(f"table(s) {bad} not in the trace's {T} tables")
        self.native_batch, self.num_dense = B, num_dense
        self._bags = []  # per selected table: (values, offsets rebased) over the native batch
        specs = []
        for t in sel:
            off = offsets[t * B : (t + 1) * B + 1]
            vals = indices[int(off[0]) : int(off[-1])]
            self._bags.append((vals, off - off[0]))
            rows = int(vals.max()) + 1 if vals.numel() else 1
            specs.append(TableSpec(f"t{t}", rows, dim, hotness=vals.numel() / B))
        self.tables = tuple(specs)

    def batch(self, index: int, batch_size: int) -> Batch:
        if not 0 < batch_size <= self.native_batch:
            raise ValueError(f"batch size must be in 1..{self.native_batch} (the trace's batch), got {batch_size}")
        lo = (index * batch_size) % self.native_batch
        samples = (torch.arange(batch_size) + lo) % self.native_batch
        values, lengths = [], []
        for vals, off in self._bags:
            starts, ends = off[samples], off[samples + 1]
            lens = ends - starts
            pos = torch.repeat_interleave(starts - torch.cumsum(lens, 0) + lens, lens) + torch.arange(int(lens.sum()))
            values.append(vals[pos])
            lengths.append(lens)
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(torch.cat(lengths), 0)])
        sparse = SparseFeatures(torch.cat(values), offsets, batch_size)
        return Batch(torch.zeros(batch_size, self.num_dense), sparse, torch.zeros(batch_size))

    def batches(self, count: int, batch_size: int, start: int = 0) -> list[Batch]:
        return [self.batch(start + k, batch_size) for k in range(count)]
