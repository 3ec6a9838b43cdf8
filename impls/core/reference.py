"""Pure-torch oracles for every native op, on the device of their inputs. Used by tests only, never as a fallback
for timing."""
from __future__ import annotations

import torch
from torch import Tensor


def bounds_check_ref(values: Tensor, offsets: Tensor, table_rows: Tensor, batch_size: int) -> Tensor:
    """Same result as dlrmbench::bounds_check, by direct vectorized torch."""
    T = table_rows.numel()
    nbags = T * batch_size
    nnz = values.numel()

    def out(code, bag, pos, val):
        t, b = (bag // batch_size, bag % batch_size) if bag >= 0 else (-1, -1)
        return torch.tensor([code, t, b, pos, val], dtype=torch.int64, device=values.device)

    if int(offsets[0]) != 0:
        return out(1, 0 if nbags else -1, 0, int(offsets[0]))
    dec = (offsets[1:] < offsets[:-1]).nonzero()
    if dec.numel():
        i = int(dec[0])
        return out(2, i, i + 1, int(offsets[i + 1]))
    if int(offsets[-1]) != nnz:
        return out(3, nbags - 1, nbags, int(offsets[-1]))
    ok = torch.tensor([0, -1, -1, -1, 0], dtype=torch.int64, device=values.device)
    if nnz == 0:
        return ok
    lengths = offsets[1:] - offsets[:-1]
    bag_of = torch.repeat_interleave(torch.arange(nbags, device=values.device), lengths)
    limit = table_rows[bag_of // batch_size]
    bad = ((values < 0) | (values >= limit)).nonzero()
    if bad.numel():
        p = int(bad[0])
        v = int(values[p])
        return out(4 if v < 0 else 5, int(bag_of[p]), p, v)
    return ok


def jagged_unique_ref(values: Tensor, offsets: Tensor, num_tables: int, batch_size: int):
    """Same result as dlrmbench::jagged_unique: per table, a stable sort then unique_consecutive."""
    uniques, counts, positions = [], [], []
    inverse = torch.empty_like(values)
    table_offsets = [0]
    for t in range(num_tables):
        lo, hi = int(offsets[t * batch_size]), int(offsets[(t + 1) * batch_size])
        seg = values[lo:hi]
        sorted_vals, order = torch.sort(seg, stable=True)
        u, inv, c = torch.unique_consecutive(sorted_vals, return_inverse=True, return_counts=True)
        inverse[lo + order] = inv + table_offsets[-1]
        uniques.append(u)
        counts.append(c)
        positions.append(order + lo)
        table_offsets.append(table_offsets[-1] + u.numel())
    cat = lambda xs: torch.cat(xs) if xs else values.new_empty(0)  # noqa: E731
    return (
        cat(uniques),
        torch.tensor(table_offsets, dtype=torch.int64, device=values.device),
        inverse,
        cat(counts),
        cat(positions),
    )


# --- TT stages ---------------------------------------------------------------------------------------


def tt_prefix_ref(cores, shape, prefix_ids: Tensor) -> Tensor:
    """Prefix products of the first d-1 cores, by batched matmul over gathered slices."""
    from impls.core.tt import decode

    digits = decode(prefix_ids, shape.p[:-1])
    n = prefix_ids.numel()
    acc = cores[0][digits[0]].view(n, shape.q[0], shape.r[1])
    for t in range(1, shape.d - 1):
        g = cores[t][digits[t]].view(n, shape.r[t], shape.q[t] * shape.r[t + 1])
        acc = torch.bmm(acc, g).view(n, acc.shape[1] * shape.q[t], shape.r[t + 1])
    return acc.reshape(n, shape.prefix_width)


def tt_last_ref(prefix: Tensor, cores, shape, item_group: Tensor, item_last: Tensor) -> Tensor:
    n = item_group.numel()
    p = prefix[item_group].view(n, shape.prefix_width // shape.r[-2], shape.r[-2])
    g = cores[-1][item_last].view(n, shape.r[-2], shape.q[-1])
    return torch.bmm(p, g).reshape(n, shape.dim)


def tt_last_backward_ref(prefix, cores, shape, item_group, item_last, grad_items):
    """(grad_prefix, grad_last_core) by autograd through tt_last_ref."""
    p = prefix.detach().requires_grad_(True)
    last = cores[-1].detach().requires_grad_(True)
    out = tt_last_ref(p, [*cores[:-1], last], shape, item_group, item_last)
    gp, gl = torch.autograd.grad(out, (p, last), grad_items)
    return gp, gl


def tt_prefix_backward_ref(cores, shape, prefix_ids, grad_prefix):
    """Gradients of cores 0..d-2 by autograd through tt_prefix_ref."""
    leaves = [c.detach().requires_grad_(True) for c in cores[:-1]]
    out = tt_prefix_ref([*leaves, cores[-1]], shape, prefix_ids)
    return list(torch.autograd.grad(out, leaves, grad_prefix, allow_unused=True))


def gather_pool_ref(src: Tensor, index: Tensor, segment_offsets: Tensor, out: Tensor) -> Tensor:
    lengths = segment_offsets[1:] - segment_offsets[:-1]
    seg = torch.repeat_interleave(torch.arange(lengths.numel(), device=index.device), lengths)
    return out.index_add(0, seg, src[index])


def scatter_add_rows_ref(src: Tensor, src_index: Tensor, dst_index: Tensor, out: Tensor) -> Tensor:
    return out.index_add(0, dst_index, src[src_index])


_M32 = 0xFFFFFFFF


def _mul32(h: Tensor, c: int) -> Tensor:
    """(h * c) mod 2^32 for int64 h < 2^32, without int64 overflow (two 16-bit halves of c)."""
    return (h * (c & 0xFFFF) + (((h * (c >> 16)) & 0xFFFF) << 16)) & _M32


def _fmix32(h: Tensor) -> Tensor:
    h = h ^ (h >> 16)
    h = _mul32(h, 0x85EBCA6B)
    h = h ^ (h >> 13)
    h = _mul32(h, 0xC2B2AE35)
    return h ^ (h >> 16)


def counter_uniform_ref(seed: int, rows: Tensor, cols: Tensor, low: float, high: float) -> Tensor:
    """counter_uniform's draws for int64 row ids [n] x column ids [c] (cpu/counter_uniform.cpp's hash)."""
    s = seed % (1 << 64)
    s0, s1 = s & _M32, s >> 32
    a = _fmix32((rows & _M32) ^ s0)
    row_hash = _fmix32((rows >> 32) ^ s1 ^ a)
    h = _fmix32(_mul32(cols & _M32, 0x9E3779B1).unsqueeze(0) ^ row_hash.unsqueeze(1))
    lo = torch.tensor(low, dtype=torch.float32).double()
    span = torch.tensor(high, dtype=torch.float32).double() - lo
    return (lo + span * ((h >> 8).double() * 2.0**-24)).float()


def route_keys_ref(values: Tensor, offsets: Tensor, batch_size: int, table_r: Tensor, table_c: Tensor,
                   table_base: Tensor, shard_of: Tensor, num_shards: int, count_shards: int):
    """route_keys: entries expanded per column group, then one stable sort by shard."""
    T, B = table_r.numel(), batch_size
    lengths = offsets.diff()
    dev = values.device
    table = torch.repeat_interleave(torch.arange(T, device=dev), lengths.view(T, B).sum(1))
    sample = torch.repeat_interleave(torch.arange(T * B, device=dev) % B, lengths)
    keep = table_r[table] > 0
    v, table, sample = values[keep], table[keep], sample[keep]
    c = table_c[table]
    copy = torch.repeat_interleave(torch.arange(v.numel(), device=dev), c)
    k = torch.arange(copy.numel(), device=dev) - torch.repeat_interleave(torch.cumsum(c, 0) - c, c)
    v, table, sample = v[copy], table[copy], sample[copy]
    r = table_r[table]
    shard = shard_of[table_base[table] + k * r + v % r]
    order = torch.argsort(shard, stable=True)
    shard_counts = torch.bincount(shard, minlength=num_shards)
    counted = shard < count_shards
    sample_counts = torch.bincount(shard[counted] * B + sample[counted], minlength=count_shards * B)
    return (v // r)[order], sample[order], shard_counts, sample_counts.view(count_shards, B)


def transpose_segments_ref(values: Tensor, lengths: Tensor) -> Tensor:
    """transpose_segments: the segments cut out one by one and concatenated in (s, g) order."""
    G, S = lengths.shape
    parts = torch.split(values, lengths.reshape(-1).tolist())
    return torch.cat([parts[g * S + s] for s in range(S) for g in range(G)]) if parts else values.clone()
