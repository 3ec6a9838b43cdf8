"""Hierarchical RB (HugeCTR's HierModelParallelEmbedding; EMBark's hierarchical reduction-based cluster): the RB tables
of a node are row-sharded over its L GPUs, and their partial sums travel in two steps.

Forward: (1) intra-node: GPU (n, l) sends local peer l' its partial sums for the samples of every source with
local rank l', and l' sums the L partials; (2) rails: GPU (n, l') sends GPU (n', l') the node-reduced rows of
that source, b * D_n elements per node pair, where a flat exchange would send L times as much across nodes.
Backward mirrors it: rails first, then every local peer gets the gradient rows of the sources it serves.

``layout[n]``: the (table, column shard, width) of node n's RB shards in the order its GPUs hold them (every
GPU of a node holds the same sequence, each a different row shard)."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from impls.sharding.comm import Comm


def _rows_of(sizes: Sequence[int], L: int, lr: int) -> Tensor:
    """Rows (in source order) of the global batch that belong to sources with local rank ``lr``."""
    starts = [sum(sizes[:s]) for s in range(len(sizes))]
    return torch.cat([torch.arange(starts[s], starts[s] + sizes[s]) for s in range(lr, len(sizes), L)])


def forward(comm: Comm, partial: Tensor, sizes: Sequence[int], widths: Sequence[int], dtype) -> list[Tensor]:
    """``partial``: this GPU's [B_global, D_n] partial sums (rows by source). Returns, per node n', the
    [b_me, D_n'] rows of this rank's samples reduced over n''s GPUs (``widths[n']`` = D_n')."""
    ctx = comm.ctx
    L, N, me_l = ctx.local_world_size, ctx.num_nodes, ctx.local_rank
    D = partial.shape[1]
    rows = [_rows_of(sizes, L, lr) for lr in range(L)]
    send = torch.cat([partial[r].reshape(-1) for r in rows]).to(dtype)
    mine = rows[me_l].numel()
    recv = torch.empty(L * mine * D, dtype=dtype)
    comm.all_to_all(recv, send, [mine * D] * L, [r.numel() * D for r in rows], "embark.fwd.intra", group=ctx.intra)
    reduced = recv.to(torch.float32).view(L, mine, D).sum(0)  # the node's sums for the sources I serve
    # rails: source (n', me_l) gets its rows; I get mine from every node
    src_sizes = [sizes[n * L + me_l] for n in range(N)]
    b_me = sizes[ctx.rank]
    send = reduced.reshape(-1).to(dtype)
    recv = torch.empty(b_me * sum(widths), dtype=dtype)
    comm.all_to_all(recv, send, [b_me * w for w in widths], [s * D for s in src_sizes], "embark.fwd.rail",
                    group=ctx.rails)
    return [blk.to(torch.float32).view(b_me, w) for blk, w in zip(torch.split(recv, [b_me * w for w in widths]),
                                                                   widths)]


def backward(comm: Comm, grads: Sequence[Tensor], sizes: Sequence[int], width: int, dtype) -> Tensor:
    """``grads[n']``: this rank's [b_me, D_n'] output gradient for node n''s RB columns. Returns this GPU's
    [B_global, D_n] gradient of its partial sums (rows by source)."""
    ctx = comm.ctx
    L, N, me_l = ctx.local_world_size, ctx.num_nodes, ctx.local_rank
    src_sizes = [sizes[n * L + me_l] for n in range(N)]
    send = torch.cat([g.reshape(-1) for g in grads]).to(dtype)
    recv = torch.empty(sum(src_sizes) * width, dtype=dtype)
    comm.all_to_all(recv, send, [s * width for s in src_sizes], [g.numel() for g in grads], "embark.bwd.rail",
                    group=ctx.rails)
    # every local peer needs the gradient rows of the sources I serve (the same block to each)
    rows = [_rows_of(sizes, L, lr) for lr in range(L)]
    send = recv.repeat(L)
    out = torch.empty(sum(r.numel() for r in rows) * width, dtype=dtype)
    comm.all_to_all(out, send, [r.numel() * width for r in rows], [recv.numel()] * L, "embark.bwd.intra",
                    group=ctx.intra)
    grad = torch.empty(sum(sizes), width)
    for r, blk in zip(rows, torch.split(out.to(torch.float32), [r.numel() * width for r in rows])):
        grad[r] = blk.view(-1, width)
    return grad
