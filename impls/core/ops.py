"""Typed wrappers over ``torch.ops.dlrmbench.*``, their fake (meta) kernels, and error formatting.

Importing this module loads the native library. Every op that takes indices into a tensor checks their range
unless told ``check_indices=False``: a schedule passes that for indices it derived from a batch validated at the
step's boundary (``EmbeddingCollection.checked``), so the CUDA kernels add no host syncs to the step. A missing library is an ImportError telling the user
to build it; it is never replaced by the pure-torch reference (that lives in reference.py, for tests).
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Iterator, NamedTuple, Sequence

import torch
from torch import Tensor

try:
    from impls.core import _C  # noqa: F401  (registers the ops)
except ImportError as exc:  # pragma: no cover - exercised only on a broken install
    raise ImportError(
        "the dlrmbench native library impls.core._C is not built or does not load "
        f"({exc}); run `make install` in the repository root to build it"
    ) from exc

_LIB = "dlrmbench"

BOUNDS_PROBLEMS = {
    1: "offsets[0] must be 0",
    2: "offsets decrease",
    3: "the last offset must equal the number of ids",
    4: "negative id",
    5: "id out of range",
}


@torch.compiler.assume_constant_result  # a fact of the build: torch.compile reads it once, at trace time
def has_kernel(op: str, device: torch.device) -> bool:
    """Whether ``op`` has a kernel for ``device`` in this build."""
    key = {"cpu": "CPU", "cuda": "CUDA"}.get(device.type)
    return key is not None and torch._C._dispatch_has_kernel_for_dispatch_key(f"{_LIB}::{op}", key)


def require_kernel(op: str, device: torch.device) -> None:
    """Raise NotImplementedError when ``op`` has no kernel for ``device`` in this build."""
    if not has_kernel(op, device):
        raise NotImplementedError(f"{_LIB}::{op} has no {device.type} kernel in this build")


def cpu_isas() -> list[str]:
    """The vector ISA builds of the CPU TT kernels in this library, the native one (what the compiler targeted:
    "avx512", "avx2" or "portable") first; an AVX-512 build carries an AVX2 build beside it."""
    return list(torch.ops.dlrmbench.cpu_isas())


def cpu_isa() -> str:
    """The ISA build the CPU TT kernels run now (records and benchmarks name it)."""
    return str(torch.ops.dlrmbench.cpu_isa())


@contextmanager
def use_cpu_isa(isa: str) -> Iterator[None]:
    """Run the CPU TT kernels of build ``isa`` (one of cpu_isas()) inside the block, process-wide; the build
    before it after. ValueError naming the builds for one this library lacks."""
    before = cpu_isa()
    torch.ops.dlrmbench.set_cpu_isa(isa)
    try:
        yield
    finally:
        torch.ops.dlrmbench.set_cpu_isa(before)


def raise_index_error(device: torch.device) -> None:
    """Raise the ValueError that an op run with ``check_indices=False`` on ``device`` left in the device's index-error
    record (csrc/index_errors.h: a GPU kernel meeting a bad index reads zeros and notes it), and clear the record.
    One host read on a GPU; nothing on the CPU, whose kernels raise at once."""
    torch.ops.dlrmbench.raise_index_error(torch.empty(0, device=device))


def bounds_check_raw(values: Tensor, offsets: Tensor, table_rows: Tensor, batch_size: int) -> Tensor:
    """The op itself: int64 [5] = (code, table, bag, position, value); code 0 means valid."""
    require_kernel("bounds_check", values.device)
    return torch.ops.dlrmbench.bounds_check(values, offsets, table_rows, batch_size)


def format_bounds_problem(problem: Sequence[int], tables: Sequence) -> str:
    """A message naming the table, bag and id (or offset) of a bounds_check problem."""
    code, t, b, pos, val = (int(x) for x in problem)
    what = BOUNDS_PROBLEMS[code]
    table = f"table {tables[t].name!r} (index {t})" if 0 <= t < len(tables) else "the batch"
    if code in (4, 5):
        return (
            f"{what}: {table}, bag {b}, id {val} at values[{pos}]; "
            f"valid ids are 0..{tables[t].num_embeddings - 1}"
        )
    return f"{what}: {table}, bag {b}, offsets[{pos}] = {val}"


def bounds_check(values: Tensor, offsets: Tensor, tables: Sequence, batch_size: int) -> None:
    """Raise ValueError naming table, bag and id of the first invalid entry of a batch."""
    rows = torch.tensor([t.num_embeddings for t in tables], dtype=torch.int64, device=values.device)
    problem = bounds_check_raw(values, offsets, rows, batch_size).tolist()
    if problem[0] != 0:
        raise ValueError(format_bounds_problem(problem, tables))


class Unique(NamedTuple):
    """Per-table sorted unique ids of a jagged batch (see jagged_unique)."""

    unique: Tensor  # [U] ids, table by table, ascending within a table
    table_offsets: Tensor  # [T+1] table t's unique ids are unique[table_offsets[t]:table_offsets[t+1]]
    inverse: Tensor  # [nnz] values[i] == unique[inverse[i]]
    counts: Tensor  # [U] occurrences of each unique id
    sorted_positions: Tensor  # [nnz] original positions in (table, id, position) order


def jagged_unique(values: Tensor, offsets: Tensor, num_tables: int, batch_size: int) -> Unique:
    require_kernel("jagged_unique", values.device)
    return Unique(*torch.ops.dlrmbench.jagged_unique(values, offsets, num_tables, batch_size))


@torch.library.register_fake(f"{_LIB}::bounds_check")
def _bounds_check_fake(values, offsets, table_rows, batch_size):
    return values.new_empty(5, dtype=torch.int64)


@torch.library.register_fake(f"{_LIB}::raise_index_error")
def _raise_index_error_fake(like):
    return None  # a fake tensor holds no error record (the kernel would read one); nothing to raise or return


@torch.library.register_fake(f"{_LIB}::jagged_unique")
def _jagged_unique_fake(values, offsets, num_tables, batch_size):
    u = torch.library.get_ctx().new_dynamic_size()
    nnz = values.shape[0]
    return (
        values.new_empty(u, dtype=torch.int64),
        values.new_empty(num_tables + 1, dtype=torch.int64),
        values.new_empty(nnz, dtype=torch.int64),
        values.new_empty(u, dtype=torch.int64),
        values.new_empty(nnz, dtype=torch.int64),
    )


# --- TT stages (schemas and layout in csrc/ops.cpp and csrc/tt_args.h) -------------------------------


def _tt_args(shape) -> tuple[list[int], list[int]]:
    return list(shape.q), list(shape.r)


def _num_rows(shape) -> int:
    """The table's rows the fused stages check items against (-1: a shape without them, digits only)."""
    return int(getattr(shape, "num_embeddings", -1))


def _out(out: Tensor | None, rows: int, cols: int, like: Tensor) -> Tensor:
    if out is None:
        return like.new_empty(rows, cols)
    return out[:rows]


def tt_prefix(
    cores: Sequence[Tensor], shape, prefix_ids: Tensor, work=None, phase: str = "fwd", out: Tensor | None = None,
    check_indices: bool = True,
) -> Tensor:
    """Stage 1: prefix products [G, shape.prefix_width] of the first d-1 cores for each prefix id
    (written into ``out[:G]`` when a workspace buffer is given)."""
    require_kernel("tt_prefix", prefix_ids.device)
    q, r = _tt_args(shape)
    out = _out(out, prefix_ids.numel(), shape.prefix_width, cores[0])
    torch.ops.dlrmbench.tt_prefix(list(cores), q, r, prefix_ids, out, check_indices)
    if work is not None:
        n = prefix_ids.numel()
        work.add(phase, "stage1", n * (shape.d - 2), n * shape.prefix_flops())
    return out


def tt_last(
    prefix: Tensor,
    cores: Sequence[Tensor],
    shape,
    item_group: Tensor,
    item_last: Tensor,
    work=None,
    out: Tensor | None = None,
    check_indices: bool = True,
) -> Tensor:
    """Stage 2: rows [n, D]; item i = prefix[item_group[i]] times the last core's slice item_last[i]."""
    require_kernel("tt_last", prefix.device)
    q, r = _tt_args(shape)
    out = _out(out, item_group.numel(), shape.dim, prefix)
    torch.ops.dlrmbench.tt_last(prefix, list(cores), q, r, item_group, item_last, out, check_indices)
    if work is not None:
        n = item_group.numel()
        work.add("fwd", "stage2", n, n * shape.last_flops())
    return out


def tt_last_backward(
    prefix: Tensor,
    cores: Sequence[Tensor],
    shape,
    item_group: Tensor,
    item_last: Tensor,
    grad_items: Tensor,
    grad_last_core: Tensor,
    work=None,
    out: Tensor | None = None,
    check_indices: bool = True,
) -> Tensor:
    """Backward of stage 2: adds into grad_last_core, returns the prefix gradient [G, width]
    (summed over each group's items; item_group must be non-decreasing)."""
    require_kernel("tt_last_backward", prefix.device)
    q, r = _tt_args(shape)
    out = _out(out, prefix.shape[0], shape.prefix_width, prefix)
    torch.ops.dlrmbench.tt_last_backward(
        prefix, list(cores), q, r, item_group, item_last, grad_items, grad_last_core, out, check_indices
    )
    if work is not None:
        n = item_group.numel()
        work.add("bwd", "stage2", 2 * n, 2 * n * shape.last_flops())
    return out


def tt_prefix_backward(
    cores: Sequence[Tensor], shape, prefix_ids: Tensor, grad_prefix: Tensor, grad_cores: Sequence[Tensor], work=None,
    check_indices: bool = True,
) -> None:
    """Backward of stage 1: adds into the gradients of cores 0..d-2."""
    require_kernel("tt_prefix_backward", prefix_ids.device)
    q, r = _tt_args(shape)
    torch.ops.dlrmbench.tt_prefix_backward(list(cores), q, r, prefix_ids, grad_prefix, list(grad_cores),
                                           check_indices)
    if work is not None:
        gemms, flops = shape.prefix_backward_cost()
        n = prefix_ids.numel()
        work.add("bwd", "stage1", n * gemms, n * flops)


def tt_stages(
    cores: Sequence[Tensor],
    shape,
    prefix_ids: Tensor,
    item_group: Tensor,
    item_last: Tensor,
    work=None,
    out: Tensor | None = None,
    check_indices: bool = True,
) -> Tensor:
    """Both stages in one pass: rows [n, D], item i = prefix(prefix_ids[item_group[i]]) times the last core's
    slice item_last[i]. Same products as tt_prefix then tt_last, without the [G, width] prefix buffer. An item
    whose row is not below the table's rows (``shape.num_embeddings``; the cores cover prod(p)) raises ValueError
    naming it (on a GPU only when ``check_indices``)."""
    require_kernel("tt_stages", prefix_ids.device)
    q, r = _tt_args(shape)
    out = _out(out, item_group.numel(), shape.dim, cores[0])
    torch.ops.dlrmbench.tt_stages(list(cores), q, r, prefix_ids, item_group, item_last, out, check_indices,
                                  _num_rows(shape))
    if work is not None:
        count_stages(work, shape, prefix_ids.numel(), item_group.numel())
    return out


def count_stages(work, shape, groups: int, items: int) -> None:
    """The GEMMs and FLOPs of tt_stages over ``groups`` prefixes and ``items`` items."""
    work.add("fwd", "stage1", groups * (shape.d - 2), groups * shape.prefix_flops())
    work.add("fwd", "stage2", items, items * shape.last_flops())


def count_stages_backward(work, shape, groups: int, items: int) -> None:
    """The GEMMs and FLOPs of tt_stages_backward over ``groups`` prefixes and ``items`` items: the prefixes
    recomputed, stage 2 walked back (two GEMMs per item), stage 1 walked back."""
    gemms, flops = shape.prefix_backward_cost()
    work.add("bwd", "stage1", groups * (shape.d - 2), groups * shape.prefix_flops())
    work.add("bwd", "stage2", 2 * items, 2 * items * shape.last_flops())
    work.add("bwd", "stage1", groups * gemms, groups * flops)


def tt_stages_backward(
    cores: Sequence[Tensor],
    shape,
    prefix_ids: Tensor,
    item_group: Tensor,
    item_last: Tensor,
    grad_items: Tensor,
    grad_cores: Sequence[Tensor],
    work=None,
    check_indices: bool = True,
) -> None:
    """Backward of tt_stages: recomputes the prefixes and adds into all d core gradients (item_group must be
    non-decreasing). Same products as tt_prefix, tt_last_backward and tt_prefix_backward; rows checked as in
    tt_stages."""
    require_kernel("tt_stages_backward", prefix_ids.device)
    q, r = _tt_args(shape)
    torch.ops.dlrmbench.tt_stages_backward(
        list(cores), q, r, prefix_ids, item_group, item_last, grad_items, list(grad_cores), check_indices,
        _num_rows(shape)
    )
    if work is not None:
        count_stages_backward(work, shape, prefix_ids.numel(), item_group.numel())


class EcoRecSaved(NamedTuple):
    """What ecorec_forward keeps for its backward (schema in csrc/ops.cpp)."""

    unique: Tensor  # [U] ascending
    count_offsets: Tensor  # [U+1] unique u's occurrences are sorted order [co[u], co[u+1])
    occ_bags: Tensor  # [nnz] the bag of each sorted occurrence
    chunk_bounds: Tensor  # [m+1] micro-batch k is unique[cb[k]:cb[k+1]]
    chunk_groups: Tensor  # [m] the prefix groups of each micro-batch

    @property
    def chunks(self) -> list[tuple[int, int]]:
        """(ids, prefix groups) of each micro-batch, read to the host."""
        cb = self.chunk_bounds.tolist()
        return [(hi - lo, g) for lo, hi, g in zip(cb, cb[1:], self.chunk_groups.tolist())]


def ecorec_forward(cores: Sequence[Tensor], shape, values: Tensor, offsets: Tensor, batch_size: int,
                   micro_batches: int, min_chunk: int, work=None) -> tuple[Tensor, EcoRecSaved]:
    """EcoRec's table step, forward, in one native call: the ids deduplicated, the unique ids cut into micro-batches,
    per micro-batch the prefix groups, both TT stages and the rows added into their bags. Sum-pooled [B, D] and what
    ecorec_backward needs. Ids must be in range (validated at the step's boundary; a row past the table's rows
    raises)."""
    require_kernel("ecorec_forward", values.device)
    q, r = _tt_args(shape)
    out, unique, co, occ_bags, bounds, groups = torch.ops.dlrmbench.ecorec_forward(
        list(cores), q, r, values, offsets, int(batch_size), int(micro_batches), int(min_chunk), _num_rows(shape))
    return out, _ecorec_saved(shape, unique, co, occ_bags, bounds, groups, work)


def _ecorec_saved(shape, unique, co, occ_bags, bounds, groups, work) -> EcoRecSaved:
    """One table's EcoRecSaved from what its forward returned, its work counted into ``work`` (nothing is read to the
    host without one)."""
    saved = EcoRecSaved(unique, co, occ_bags, bounds, groups)
    if work is not None:
        chunks = saved.chunks
        work.unique += unique.numel()
        work.micro_batches += len(chunks)
        widest = max((n for n, _ in chunks), default=0)
        for n, g in chunks:
            work.e1 += g
            count_stages(work, shape, g, n)
        work.live_bytes(widest * shape.dim * 4)  # the one chunk-sized row buffer
    return saved


def _tables_args(tables) -> tuple[list[Tensor], list[int], list[int], list[int], list[int]]:
    """cores, cores_per_table, q, r, num_rows of (cores, shape) per table, laid out as the *_tables ops take them."""
    cores = [c for cs, _ in tables for c in cs]
    return (cores, [s.d for _, s in tables], [x for _, s in tables for x in s.q], [x for _, s in tables for x in s.r],
            [_num_rows(s) for _, s in tables])


def ecorec_tables_forward(tables, values: Tensor, offsets: Tensor, table_ids: Sequence[int], batch_size: int,
                          micro_batches: int, min_chunk: int, work=None) -> tuple[list[Tensor], list[EcoRecSaved]]:
    """ecorec_forward for every TT table of a batch in one native call: ``tables`` (cores, shape) per TT table,
    TT table k reading the batch's table ``table_ids[k]`` of the table-major ``values`` / ``offsets`` [T*B+1]
    (SparseFeatures' layout). Each table's sum-pooled [B, D_k] and what ecorec_tables_backward needs."""
    require_kernel("ecorec_tables_forward", values.device)
    cores, per, q, r, rows = _tables_args(tables)
    outs, unique, co, occ_bags, bounds, groups = torch.ops.dlrmbench.ecorec_tables_forward(
        cores, per, q, r, values, offsets, [int(t) for t in table_ids], int(batch_size), int(micro_batches),
        int(min_chunk), rows)
    saved = [_ecorec_saved(s, *parts, work) for (_, s), *parts in zip(tables, unique, co, occ_bags, bounds, groups)]
    return list(outs), saved


def ecorec_backward(cores: Sequence[Tensor], shape, saved: EcoRecSaved, grad: Tensor, grad_cores: Sequence[Tensor],
                    work=None) -> None:
    """Backward of ecorec_forward: adds into all d core gradients."""
    require_kernel("ecorec_backward", grad.device)
    q, r = _tt_args(shape)
    torch.ops.dlrmbench.ecorec_backward(list(cores), q, r, saved.unique, saved.count_offsets, saved.occ_bags,
                                        saved.chunk_bounds, grad, list(grad_cores), _num_rows(shape))
    if work is not None:
        _count_ecorec_backward(work, shape, saved)


def _count_ecorec_backward(work, shape, saved: EcoRecSaved) -> None:
    chunks = saved.chunks
    widest = max((n for n, _ in chunks), default=0)
    for n, g in chunks:
        count_stages_backward(work, shape, g, n)
    # the chunk's gradient rows beside the occurrences' bags
    work.live_bytes(widest * shape.dim * 4 + saved.occ_bags.numel() * saved.occ_bags.element_size())


def ecorec_tables_backward(tables, saved: Sequence[EcoRecSaved], grads: Sequence[Tensor],
                           grad_cores: Sequence[Sequence[Tensor]], work=None) -> None:
    """Backward of ecorec_tables_forward in one native call: adds into every table's d core gradients
    (``grad_cores``: the gradient buffers of each table's cores)."""
    if not tables:
        return
    require_kernel("ecorec_tables_backward", grads[0].device)
    cores, per, q, r, rows = _tables_args(tables)
    torch.ops.dlrmbench.ecorec_tables_backward(
        cores, per, q, r, [x.unique for x in saved], [x.count_offsets for x in saved], [x.occ_bags for x in saved],
        [x.chunk_bounds for x in saved], list(grads), [g for gs in grad_cores for g in gs], rows)
    if work is not None:
        for (_, shape), x in zip(tables, saved):
            _count_ecorec_backward(work, shape, x)


def ttrec_tables_forward(tables, values: Tensor, offsets: Tensor, table_ids: Sequence[int], batch_size: int,
                         chunk: int, work=None) -> list[Tensor]:
    """TT-Rec's step, forward, for every TT table of a table-major batch in one native call (laid out as
    ecorec_tables_forward's): in chunks of ``chunk`` occurrences every occurrence its own chain, into its bag. Each
    table's sum-pooled [B, D_k]."""
    require_kernel("ttrec_tables_forward", values.device)
    cores, per, q, r, rows = _tables_args(tables)
    outs = torch.ops.dlrmbench.ttrec_tables_forward(cores, per, q, r, values, offsets, [int(t) for t in table_ids],
                                                    int(batch_size), int(chunk), rows)
    if work is not None:
        _count_ttrec(work, tables, offsets, table_ids, batch_size, chunk, count_stages)
    return list(outs)


def ttrec_tables_backward(tables, values: Tensor, offsets: Tensor, table_ids: Sequence[int], batch_size: int,
                          chunk: int, grads: Sequence[Tensor], grad_cores: Sequence[Sequence[Tensor]],
                          work=None) -> None:
    """Backward of ttrec_tables_forward in one native call (the chains recomputed): adds into every table's core
    gradients."""
    if not tables:
        return
    require_kernel("ttrec_tables_backward", values.device)
    cores, per, q, r, rows = _tables_args(tables)
    torch.ops.dlrmbench.ttrec_tables_backward(cores, per, q, r, values, offsets, [int(t) for t in table_ids],
                                              int(batch_size), int(chunk), list(grads),
                                              [g for gs in grad_cores for g in gs], rows)
    if work is not None:
        _count_ttrec(work, tables, offsets, table_ids, batch_size, chunk, count_stages_backward)


def _count_ttrec(work, tables, offsets: Tensor, table_ids: Sequence[int], batch_size: int, chunk: int, count) -> None:
    """TT-Rec's chunks of every table (each occurrence its own prefix and item), and the chunk of rows alive."""
    ends = offsets[torch.tensor([[t * batch_size, (t + 1) * batch_size] for t in table_ids],
                                dtype=torch.long, device=offsets.device).reshape(-1)].tolist() if tables else []
    for (_, shape), lo, hi in zip(tables, ends[::2], ends[1::2]):
        full, rest = divmod(hi - lo, chunk)
        for n in [chunk] * full + ([rest] if rest else []):
            count(work, shape, n, n)
        work.live_bytes(min(chunk, hi - lo) * shape.dim * 4)  # one chunk of rows (of their gradients backward)


def elrec_tables_forward(tables, values: Tensor, offsets: Tensor, table_ids: Sequence[int], batch_size: int,
                         work=None) -> tuple[list[Tensor], list[tuple[Tensor, Tensor, Tensor]]]:
    """EL-Rec's step, forward, for every TT table of a table-major batch in one native call (laid out as
    ecorec_tables_forward's): one stage-1 product per prefix group of the sorted unique ids, stage 2 per occurrence.
    Each table's sum-pooled [B, D_k], and (unique, count_offsets, occ_bags) per table for the backward."""
    require_kernel("elrec_tables_forward", values.device)
    cores, per, q, r, rows = _tables_args(tables)
    outs, unique, co, occ_bags, groups = torch.ops.dlrmbench.elrec_tables_forward(
        cores, per, q, r, values, offsets, [int(t) for t in table_ids], int(batch_size), rows)
    if work is not None:
        for (_, shape), u, g, ob in zip(tables, unique, groups, occ_bags):
            e1, nnz = int(g), ob.numel()
            work.unique += u.numel()
            work.e1 += e1
            work.micro_batches += 1
            count_stages(work, shape, e1, nnz)
            work.live_bytes(nnz * shape.dim * 4)  # every occurrence's row
    return list(outs), list(zip(unique, co, occ_bags))


def elrec_tables_backward(tables, saved: Sequence[tuple[Tensor, Tensor, Tensor]], grads: Sequence[Tensor],
                          grad_cores: Sequence[Sequence[Tensor]], work=None) -> None:
    """Backward of elrec_tables_forward in one native call: per unique id its gradient summed, its whole chain walked
    back (no prefix reuse); adds into every table's core gradients."""
    if not tables:
        return
    require_kernel("elrec_tables_backward", grads[0].device)
    cores, per, q, r, rows = _tables_args(tables)
    torch.ops.dlrmbench.elrec_tables_backward(cores, per, q, r, [u for u, _, _ in saved], [c for _, c, _ in saved],
                                              [b for _, _, b in saved], list(grads),
                                              [g for gs in grad_cores for g in gs], rows)
    if work is not None:
        for (_, shape), (u, _, ob) in zip(tables, saved):
            count_stages_backward(work, shape, u.numel(), u.numel())
            # the per-unique gradient rows beside every occurrence's bag
            work.live_bytes(u.numel() * shape.dim * 4 + ob.numel() * 8)


def gather_pool(src: Tensor, index: Tensor, segment_offsets: Tensor, out: Tensor, check_indices: bool = True) -> None:
    """out[s] += sum(src[index[j]] for j in segment s); segments given by offsets (len S+1)."""
    require_kernel("gather_pool", src.device)
    torch.ops.dlrmbench.gather_pool(src, index, segment_offsets, out, check_indices)


def scatter_add_rows(src: Tensor, src_index: Tensor, dst_index: Tensor, out: Tensor,
                     check_indices: bool = True) -> None:
    """out[dst_index[j]] += src[src_index[j]] for every j."""
    require_kernel("scatter_add_rows", src.device)
    torch.ops.dlrmbench.scatter_add_rows(src, src_index, dst_index, out, check_indices)


class RoutedKeys(NamedTuple):
    keys: Tensor  # [m] local rows, shard by shard
    samples: Tensor  # [m] the sample (bag within its table) of each
    shard_counts: Tensor  # [num_shards]
    sample_counts: Tensor  # [count_shards, B]


def route_keys(values: Tensor, offsets: Tensor, batch_size: int, table_r: Tensor, table_c: Tensor,
               table_base: Tensor, shard_of: Tensor, num_shards: int, count_shards: int) -> RoutedKeys:
    """Every key of a table-major batch to the shards that hold it (schema in csrc/ops.cpp)."""
    require_kernel("route_keys", values.device)
    return RoutedKeys(*torch.ops.dlrmbench.route_keys(values, offsets, int(batch_size), table_r, table_c, table_base,
                                                  shard_of, int(num_shards), int(count_shards)))


def transpose_segments(values: Tensor, lengths: Tensor) -> Tensor:
    """G payloads of S segments each, back to back (``lengths`` [G, S]), relaid segment-major: segment s of every
    payload in payload order, then segment s + 1 (one copy per segment)."""
    require_kernel("transpose_segments", values.device)
    return torch.ops.dlrmbench.transpose_segments(values, lengths)


def counter_uniform(seed: int, out: Tensor, low: float, high: float, row_start: int = 0, row_step: int = 1,
                    col_start: int = 0) -> Tensor:
    """Fill float32 ``out`` [n, c] with draws in [low, high) that depend on (seed, row, column) only: row
    row_start + i * row_step, column col_start + j. Returns ``out``."""
    require_kernel("counter_uniform", out.device)
    torch.ops.dlrmbench.counter_uniform(int(seed), int(row_start), int(row_step), int(col_start), float(low),
                                        float(high), out)
    return out


@torch.library.register_fake(f"{_LIB}::tt_prefix")
def _tt_prefix_fake(cores, q, r, prefix_ids, out, check_indices=True):
    return None


@torch.library.register_fake(f"{_LIB}::tt_last")
def _tt_last_fake(prefix, cores, q, r, item_group, item_last, out, check_indices=True):
    return None


@torch.library.register_fake(f"{_LIB}::tt_last_backward")
def _tt_last_backward_fake(prefix, cores, q, r, item_group, item_last, grad_items, grad_last_core, grad_prefix,
                           check_indices=True):
    return None


@torch.library.register_fake(f"{_LIB}::tt_prefix_backward")
def _tt_prefix_backward_fake(cores, q, r, prefix_ids, grad_prefix, grad_cores, check_indices=True):
    return None


@torch.library.register_fake(f"{_LIB}::tt_stages")
def _tt_stages_fake(cores, q, r, prefix_ids, item_group, item_last, out, check_indices=True, num_rows=-1):
    return None


@torch.library.register_fake(f"{_LIB}::tt_stages_backward")
def _tt_stages_backward_fake(cores, q, r, prefix_ids, item_group, item_last, grad_items, grad_cores, check_indices=True,
                             num_rows=-1):
    return None


@torch.library.register_fake(f"{_LIB}::ecorec_forward")
def _ecorec_forward_fake(cores, q, r, values, offsets, batch_size, micro_batches, min_chunk, num_rows=-1):
    ctx = torch.library.get_ctx()
    u, m = ctx.new_dynamic_size(), ctx.new_dynamic_size()
    return (cores[0].new_empty(batch_size, math.prod(q)), values.new_empty(u), values.new_empty(u + 1),
            values.new_empty(values.shape[0]), values.new_empty(m + 1), values.new_empty(m))


@torch.library.register_fake(f"{_LIB}::ecorec_backward")
def _ecorec_backward_fake(cores, q, r, unique, count_offsets, occ_bags, chunk_bounds, grad, grad_cores, num_rows=-1):
    return None


def _per_table_fakes(cores, cores_per_table, q, batch_size, made) -> tuple[list[Tensor], ...]:
    """A *_tables op's outputs as lists of one fake tensor per table: made(out) gives table k's outputs from its
    fake pooled [B, D_k] (the rest data-dependent sizes)."""
    parts, at = None, 0
    for d in cores_per_table:
        outs = made(cores[0].new_empty(batch_size, math.prod(q[at:at + d])))
        parts = parts or [[] for _ in outs]
        for part, x in zip(parts, outs):
            part.append(x)
        at += d
    return tuple(parts or [])


@torch.library.register_fake(f"{_LIB}::ecorec_tables_forward")
def _ecorec_tables_forward_fake(cores, cores_per_table, q, r, values, offsets, tables, batch_size, micro_batches,
                                min_chunk, num_rows):
    ctx = torch.library.get_ctx()

    def made(out):
        u, m, nnz = ctx.new_dynamic_size(), ctx.new_dynamic_size(), ctx.new_dynamic_size()
        return (out, values.new_empty(u), values.new_empty(u + 1), values.new_empty(nnz), values.new_empty(m + 1),
                values.new_empty(m))

    return _per_table_fakes(cores, cores_per_table, q, batch_size, made) or tuple([] for _ in range(6))


@torch.library.register_fake(f"{_LIB}::ecorec_tables_backward")
def _ecorec_tables_backward_fake(cores, cores_per_table, q, r, unique, count_offsets, occ_bags, chunk_bounds, grads,
                                 grad_cores, num_rows):
    return None


@torch.library.register_fake(f"{_LIB}::ttrec_tables_forward")
def _ttrec_tables_forward_fake(cores, cores_per_table, q, r, values, offsets, tables, batch_size, chunk, num_rows):
    return (_per_table_fakes(cores, cores_per_table, q, batch_size, lambda out: (out,)) or ([],))[0]


@torch.library.register_fake(f"{_LIB}::ttrec_tables_backward")
def _ttrec_tables_backward_fake(cores, cores_per_table, q, r, values, offsets, tables, batch_size, chunk, grads,
                                grad_cores, num_rows):
    return None


@torch.library.register_fake(f"{_LIB}::elrec_tables_forward")
def _elrec_tables_forward_fake(cores, cores_per_table, q, r, values, offsets, tables, batch_size, num_rows):
    ctx = torch.library.get_ctx()

    def made(out):
        u, nnz = ctx.new_dynamic_size(), ctx.new_dynamic_size()
        return out, values.new_empty(u), values.new_empty(u + 1), values.new_empty(nnz), values.new_empty(1)

    return _per_table_fakes(cores, cores_per_table, q, batch_size, made) or tuple([] for _ in range(5))


@torch.library.register_fake(f"{_LIB}::elrec_tables_backward")
def _elrec_tables_backward_fake(cores, cores_per_table, q, r, unique, count_offsets, occ_bags, grads, grad_cores,
                                num_rows):
    return None


@torch.library.register_fake(f"{_LIB}::gather_pool")
def _gather_pool_fake(src, index, segment_offsets, out, check_indices=True):
    return None


@torch.library.register_fake(f"{_LIB}::scatter_add_rows")
def _scatter_add_rows_fake(src, src_index, dst_index, out, check_indices=True):
    return None


@torch.library.register_fake(f"{_LIB}::counter_uniform")
def _counter_uniform_fake(seed, row_start, row_step, col_start, low, high, out):
    return None


@torch.library.register_fake(f"{_LIB}::transpose_segments")
def _transpose_segments_fake(values, lengths):
    return torch.empty_like(values)


@torch.library.register_fake(f"{_LIB}::route_keys")
def _route_keys_fake(values, offsets, batch_size, table_r, table_c, table_base, shard_of, num_shards, count_shards):
    m = torch.library.get_ctx().new_dynamic_size()
    return (values.new_empty(m), values.new_empty(m), values.new_empty(num_shards),
            values.new_empty(count_shards, batch_size))
