"""ttrec_tables_forward / _backward and elrec_tables_forward / _backward, TT-Rec's and EL-Rec's steps over every TT
table of a batch in one native call each way: many tables of different shapes (d 2-4) in one table-major batch with
plain tables between them, against a float64 replay of each table; their work as each schedule's (TT-Rec every
occurrence its own chain; EL-Rec one stage-1 product per prefix group, stage 2 per occurrence, the backward per
unique id); the same at 1, 2 and 3 threads whether a table runs alone or beside others; an error naming its table."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.core import ops
from impls.core.counters import TTWork
from tests.core.test_determinism import assert_identical, with_threads
from tests.core.test_ecorec_step import cores_of, replay
from tests.core.test_ecorec_tables import batches, flat, sc24_tables, table_slice
from tests.core.test_tt_ops import close

LIB = torch.ops.dlrmbench


def run_ttrec(shapes, cores, values, offsets, tables, B, chunk, grads):
    cs, per, q, r, rows = flat(shapes, cores)
    outs = LIB.ttrec_tables_forward(cs, per, q, r, values, offsets, tables, B, chunk, rows)
    core_grads = [torch.zeros_like(c) for c in cs]
    LIB.ttrec_tables_backward(cs, per, q, r, values, offsets, tables, B, chunk, grads, core_grads, rows)
    return outs, core_grads, []


def run_elrec(shapes, cores, values, offsets, tables, B, grads):
    cs, per, q, r, rows = flat(shapes, cores)
    outs, *saved = LIB.elrec_tables_forward(cs, per, q, r, values, offsets, tables, B, rows)
    core_grads = [torch.zeros_like(c) for c in cs]
    LIB.elrec_tables_backward(cs, per, q, r, *saved[:3], grads, core_grads, rows)
    return outs, core_grads, saved


def runs(case):
    """Both systems' outputs and core gradients on a drawn batch (TT-Rec's chunk drawn from the case's seed)."""
    shapes, values, offsets, tables, B, m, min_chunk, seed = case
    cores = [cores_of(s, seed + k) for k, s in enumerate(shapes)]
    gen = torch.Generator().manual_seed(seed + 9)
    grads = [torch.randn(B, s.dim, generator=gen) for s in shapes]
    chunk = 1 + seed % 7
    return cores, grads, {"ttrec": run_ttrec(shapes, cores, values, offsets, tables, B, chunk, grads),
                          "elrec": run_elrec(shapes, cores, values, offsets, tables, B, grads)}


@settings(max_examples=60, deadline=None)
@given(batches())
def test_every_table_matches_its_float64_replay(case):
    shapes, values, offsets, tables, B, *_ = case
    cores, grads, by_system = runs(case)
    for name, (outs, core_grads, saved) in by_system.items():
        at = 0
        for k, s in enumerate(shapes):
            v, o = table_slice(values, offsets, tables[k], B)
            want_out, want_grads = replay(s, cores[k], v, o, grads[k])
            close(outs[k], want_out.float(), 1e-4)
            for g, w in zip(core_grads[at:at + s.d], want_grads):
                close(g, w.float(), 1e-4)
            at += s.d
            if name == "elrec":  # the sort it saved: ascending unique ids, each occurrence's bag
                unique, co, occ_bags, groups = (x[k] for x in saved)
                ids = sorted(set(v.tolist()))
                assert unique.tolist() == ids
                assert groups.tolist() == [len({i // s.p[-1] for i in ids})]
                bags = torch.repeat_interleave(torch.arange(B), o[1:] - o[:-1])
                for u, i in enumerate(ids):
                    assert occ_bags[co[u]:co[u + 1]].tolist() == bags[v == i].tolist()


def test_each_schedule_counts_its_own_work():
    """The FLOPs the wrappers count are each schedule's: TT-Rec nnz (a + b) forward and nnz (3a + 2b) backward, EL-Rec
    E1 a + nnz b and U (3a + 2b)."""
    shapes, values, offsets, B = sc24_tables()
    tables = [(cores_of(s, k), s) for k, s in enumerate(shapes)]
    grads = [torch.randn(B, s.dim) for s in shapes]
    nnz = [int(offsets[(k + 1) * B] - offsets[k * B]) for k in range(3)]
    w = TTWork()
    outs = ops.ttrec_tables_forward(tables, values, offsets, [0, 1, 2], B, 20_000, w)
    ops.ttrec_tables_backward(tables, values, offsets, [0, 1, 2], B, 20_000, grads,
                              [[torch.zeros_like(c) for c in cs] for cs, _ in tables], w)
    a = [s.prefix_flops() for s in shapes]
    b = [s.last_flops() for s in shapes]
    bwd = [s.prefix_flops() + s.prefix_backward_cost()[1] + 2 * s.last_flops() for s in shapes]
    assert w.flops["fwd"] == sum(n * (x + y) for n, x, y in zip(nnz, a, b))
    assert w.flops["bwd"] == sum(n * f for n, f in zip(nnz, bwd))
    assert len(outs) == 3
    w = TTWork()
    outs, saved = ops.elrec_tables_forward(tables, values, offsets, [0, 1, 2], B, w)
    e1 = w.e1
    ops.elrec_tables_backward(tables, saved, grads, [[torch.zeros_like(c) for c in cs] for cs, _ in tables], w)
    U = [u.numel() for u, _, _ in saved]
    assert w.unique == sum(U) and 0 < e1 < sum(U)
    assert w.flops["bwd"] == sum(u * f for u, f in zip(U, bwd))
    groups = [len(set((u // s.p[-1]).tolist())) for (u, _, _), s in zip(saved, shapes)]
    assert e1 == sum(groups) and w.flops["fwd"] == sum(g * x + n * y for g, x, n, y in zip(groups, a, nnz, b))


@pytest.mark.parametrize("system", ["ttrec", "elrec"])
def test_reruns_and_thread_counts_are_bit_identical(system):
    shapes, values, offsets, B = sc24_tables()
    cores = [cores_of(s, k) for k, s in enumerate(shapes)]
    grads = [torch.randn(B, s.dim, generator=torch.Generator().manual_seed(k)) for k, s in enumerate(shapes)]
    def run():
        if system == "ttrec":
            outs, core_grads, saved = run_ttrec(shapes, cores, values, offsets, [0, 1, 2], B, 20_000, grads)
        else:
            outs, core_grads, saved = run_elrec(shapes, cores, values, offsets, [0, 1, 2], B, grads)
        return [*outs, *core_grads, *[x for part in saved for x in part]]

    assert_identical([with_threads(t, run) for t in (1, 1, 2, 3)], f"{system}_tables_* (threads 1, 1, 2, 3)")


def test_an_error_names_its_table():
    shapes, values, offsets, B = sc24_tables()
    cs, per, q, r, rows = flat(shapes, [cores_of(s, k) for k, s in enumerate(shapes)])
    bad = values.clone()
    bad[int(offsets[B]) + 2] = -4  # below the rows of the batch's table 1
    for call in (lambda v: LIB.ttrec_tables_forward(cs, per, q, r, v, offsets, [0, 1, 2], B, 100, rows),
                 lambda v: LIB.elrec_tables_forward(cs, per, q, r, v, offsets, [0, 1, 2], B, rows)):
        with pytest.raises(ValueError, match=r"TT table 1 \(the batch's table 1\): .*values\[2\] \(bag \d+\) reads row -4"):
            call(bad)
    with pytest.raises(ValueError, match="chunk must be >= 1, got 0"):
        LIB.ttrec_tables_forward(cs, per, q, r, values, offsets, [0, 1, 2], B, 0, rows)
    grads = [torch.ones(B, s.dim) for s in shapes]
    grads[2] = torch.ones(B + 1, shapes[2].dim)
    with pytest.raises(ValueError, match="TT table 2 \\(the batch's table 2\\): ttrec_tables_backward: grads"):
        LIB.ttrec_tables_backward(cs, per, q, r, values, offsets, [0, 1, 2], B, 100, grads,
                                  [torch.zeros_like(c) for c in cs], rows)
    _, *saved = LIB.elrec_tables_forward(cs, per, q, r, values, offsets, [0, 1, 2], B, rows)
    unsorted = [u.flip(0) for u in saved[0]]
    with pytest.raises(ValueError, match="TT table 0: elrec_tables_backward: unique ids must ascend"):
        LIB.elrec_tables_backward(cs, per, q, r, unsorted, *saved[1:3], [torch.ones(B, s.dim) for s in shapes],
                                  [torch.zeros_like(c) for c in cs], rows)


@pytest.mark.parametrize("system", ["ttrec", "elrec"])
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10**6), optim=st.sampled_from(["sgd", "adagrad"]))
def test_the_native_step_trains_as_the_stage_op_schedule_does(system, seed, optim):
    """Two steps of the system with its native step over every table and with its schedule in stage ops (the path a
    device without the native kernels runs): the same pooled rows and cores (within float32 summation order), the
    same work counts."""
    from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, get_impl

    specs = [TableSpec("t", 200, 16), TableSpec("plain", 30, 8), TableSpec("u", 900, 8)]
    opts = {"ranks": [3, 5], "tt_tables": ["t", "u"], "tt_oversize": "allow",
            **({"chunk": 7} if system == "ttrec" else {})}
    gen = torch.Generator().manual_seed(seed)
    batch = []
    for _ in range(2):
        lengths = torch.randint(0, 5, (3 * 16,), generator=gen)
        owner = torch.repeat_interleave(torch.tensor([200, 30, 900]).repeat_interleave(16), lengths)
        values = (torch.rand(int(lengths.sum()), generator=gen) ** 2 * owner).long()
        batch.append((SparseFeatures(values, torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]), 16),
                      torch.randn(16, 32, generator=gen)))
    results = []
    for native in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            if not native:
                has = ops.has_kernel
                mp.setattr(ops, "has_kernel", lambda op, dev: "_tables_" not in op and has(op, dev))
            emb = get_impl(system)(specs, EmbeddingOptim(optim, lr=0.1 if optim == "adagrad" else 0.01), **opts)
            outs = []
            for sf, up in batch:
                out = emb(sf)
                (out * up).sum().backward()
                emb.optimizer_step()
                outs.append(out.detach())
        results.append((outs, [p.clone() for n in ("t", "u") for p in emb.table_parameters(n)], emb.work_report()))
    (a_out, a_par, a_work), (b_out, b_par, b_work) = results
    for x, y in zip(a_out + a_par, b_out + b_par):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)
    assert (a_work.flops, a_work.gemms, a_work.unique, a_work.e1, a_work.intermediate_bytes) == (
        b_work.flops, b_work.gemms, b_work.unique, b_work.e1, b_work.intermediate_bytes)


def test_tables_of_real_shapes_match_their_float64_replay_in_every_isa_build():
    """The SC24 shape (ranks 32, q = (2, 4, 4): the AVX-512 stage-2 kernels, 16-lane backward included, and the wide
    stage-1 tiles) beside a smaller one, for all three systems' native steps over the tables at once, in each vector
    ISA build of the kernels (ops.cpu_isas): each against the float64 replay, the builds against each other."""
    from tests.core.test_ecorec_tables import run_tables

    shapes, values, offsets, B = sc24_tables(B=1_500)
    cores = [cores_of(s, k) for k, s in enumerate(shapes)]
    grads = [torch.randn(B, s.dim, generator=torch.Generator().manual_seed(k)) for k, s in enumerate(shapes)]
    want = [replay(s, cores[k], *table_slice(values, offsets, k, B), grads[k]) for k, s in enumerate(shapes)]
    by_isa = {}
    for isa in ops.cpu_isas():
        with ops.use_cpu_isa(isa):
            runs = {"ttrec": run_ttrec(shapes, cores, values, offsets, [0, 1, 2], B, 20_000, grads),
                    "elrec": run_elrec(shapes, cores, values, offsets, [0, 1, 2], B, grads),
                    "ecorec": run_tables(shapes, cores, values, offsets, [0, 1, 2], B, 4, 16, grads)}
        for name, (outs, core_grads, _) in runs.items():
            at = 0
            for k, s in enumerate(shapes):
                close(outs[k], want[k][0].float(), 1e-4)
                for g, w in zip(core_grads[at:at + s.d], want[k][1]):
                    close(g, w.float(), 1e-4)
                at += s.d
        by_isa[isa] = runs
    first, *others = by_isa.values()
    for runs in others:  # the builds agree within float32 rounding of their different summation orders
        for name, (outs, core_grads, _) in runs.items():
            for a, b in zip([*outs, *core_grads], [*first[name][0], *first[name][1]]):
                close(a, b, 1e-5)
