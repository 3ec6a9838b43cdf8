"""The id exchange of table-wise sharding (TorchRec's KJTAllToAll, EcoRec's input dist): every rank sends each
owner the lookups of that owner's tables in its local batch, and each owner receives its tables over the
global batch, samples ordered by source rank.

Three all_to_all calls: a header per peer (batch size, id count), then the bag lengths, then the ids, all
int64. Bytes sent per peer r by a rank with local batch b: 16 + 8 * T_r * b + 8 * nnz_r."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from impls.api import SparseFeatures
from impls.sharding.comm import Comm


@dataclass
class Routed:
    """An owner's tables over the global batch (rows: source 0's samples, then source 1's, ...)."""

    features: SparseFeatures
    batch_sizes: list[int]  # samples per source rank


def _interleave(values: Tensor, seg: Tensor) -> Tensor:
    """``values`` holds segments in (source, table) order with sizes ``seg`` [S, T]; return them in
    (table, source) order."""
    S, T = seg.shape
    flat = seg.reshape(-1)
    starts = torch.cumsum(flat, 0) - flat  # start of segment (s, t) in the received order
    order = torch.arange(S * T, device=seg.device).view(S, T).t().reshape(-1)  # (t, s) -> s*T + t
    sizes, begin = flat[order], starts[order]
    total = int(sizes.sum())
    if total == 0:
        return values[:0]
    out_starts = torch.cumsum(sizes, 0) - sizes
    idx = torch.repeat_interleave(begin - out_starts, sizes) + torch.arange(total, device=values.device)
    return values[idx]


def exchange_ids(comm: Comm, features: SparseFeatures, owned: Sequence[Sequence[int]], phase: str = "fwd.ids",
                 group=None) -> Routed:
    """Send every owner its tables' lookups (``owned[r]``: table indices of rank r, in its order)."""
    G = len(owned)
    me = comm.ctx.rank if group is None else torch.distributed.get_rank(group)
    dev = features.values.device
    B = features.batch_size
    lengths = features.offsets.diff()
    send_len, send_val = [], []
    for r in range(G):
        sel = features.select_tables(owned[r]) if owned[r] else None
        send_len.append(lengths[:0] if sel is None else sel.offsets.diff())
        send_val.append(features.values[:0] if sel is None else sel.values)
    header = torch.tensor([[B, v.numel()] for v in send_val], dtype=torch.int64, device=dev).reshape(-1)
    got = torch.empty_like(header)
    comm.all_to_all(got, header, [2] * G, [2] * G, phase + ".header", group=group)
    got = got.view(G, 2).tolist()
    sizes = [b for b, _ in got]
    T_me = len(owned[me])
    recv_len = torch.empty(T_me * sum(sizes), dtype=torch.int64, device=dev)
    comm.all_to_all(recv_len, torch.cat(send_len), [T_me * b for b in sizes], [t.numel() for t in send_len],
                    phase + ".lengths", group=group)
    recv_val = torch.empty(sum(n for _, n in got), dtype=torch.int64, device=dev)
    comm.all_to_all(recv_val, torch.cat(send_val), [n for _, n in got], [v.numel() for v in send_val],
                    phase + ".values", group=group)
    # (source, table, sample) -> (table, source, sample)
    blocks = list(torch.split(recv_len, [T_me * b for b in sizes]))
    per_table = [torch.cat([blk.view(T_me, b)[t] for blk, b in zip(blocks, sizes)]) if T_me else recv_len
                 for t in range(T_me)]
    seg = torch.stack([blk.view(T_me, b).sum(1) for blk, b in zip(blocks, sizes)]) if T_me else None
    values = _interleave(recv_val, seg) if T_me else recv_val
    glob_len = torch.cat(per_table) if T_me else recv_len
    offsets = torch.zeros(glob_len.numel() + 1, dtype=torch.int64, device=dev)
    torch.cumsum(glob_len, 0, out=offsets[1:])
    return Routed(SparseFeatures(values, offsets, sum(sizes)), sizes)
