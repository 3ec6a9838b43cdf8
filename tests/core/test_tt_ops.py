"""The native TT stage ops and row pooling ops against their pure-torch references (every device)."""
import math

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from impls.core import ops, tt
from impls.core import reference as ref
from impls.core.counters import TTWork
from tests.conftest import devices, on_target, tt_targets


@st.composite
def tt_cases(draw):
    d = draw(st.integers(2, 4))
    p = draw(st.lists(st.integers(1, 6), min_size=d, max_size=d))
    q = draw(st.lists(st.integers(1, 4), min_size=d, max_size=d))
    r = draw(st.lists(st.integers(1, 12), min_size=d - 1, max_size=d - 1))
    s = tt.TTShape.create(math.prod(p), math.prod(q), r, p=p, q=q)
    G = draw(st.integers(0, 12))
    n = draw(st.integers(0, 30))
    seed = draw(st.integers(0, 2**16))
    return s, G, n, seed


@st.composite
def wide_tt_cases(draw):
    """Shapes of real tables: ranks 8-64 (multiples of 16 among them), q products of 8 and more, a 4-wide last
    core, widths past 16 and 32: the wide register tiles, the AVX-512 stage-2 kernels and their remainders."""
    d = draw(st.integers(2, 4))
    p = draw(st.lists(st.integers(1, 5), min_size=d, max_size=d))
    q = draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=d - 1, max_size=d - 1))
    q.append(draw(st.sampled_from([4, 4, 2, 8])))  # mostly a 4-wide last core
    r = draw(st.lists(st.sampled_from([8, 16, 24, 32, 48, 64]), min_size=d - 1, max_size=d - 1))
    s = tt.TTShape.create(math.prod(p), math.prod(q), r, p=p, q=q)
    G = draw(st.integers(0, 10))
    n = draw(st.integers(0, 64))  # up to 64 items on one prefix
    seed = draw(st.integers(0, 2**16))
    return s, G, n, seed


def any_tt_case():
    return st.one_of(tt_cases(), wide_tt_cases())


def make(case, device):
    s, G, n, seed = case
    gen = torch.Generator().manual_seed(seed)
    cores = [c.to(device) for c in tt.init_cores(s, "normal", gen)]
    num_prefix = math.prod(s.p[:-1])
    prefix_ids = torch.randint(0, num_prefix, (G,), generator=gen).to(device)
    groups = max(G, 1)
    item_group = torch.sort(torch.randint(0, groups, (n if G else 0,), generator=gen))[0].to(device)
    item_last = torch.randint(0, s.p[-1], (item_group.numel(),), generator=gen).to(device)
    return s, cores, prefix_ids, item_group, item_last, gen


def close(a, b, rtol, magnitude=None):
    """a ~ b. ``magnitude``: per element, the same sums over |terms| (what a cancelling sum's rounding scales
    with; a result near zero made of large products is only as exact as those products)."""
    scale = max(float(b.abs().max()) if b.numel() else 0.0, 1e-30)
    if magnitude is not None:
        err = (a.cpu() - b.cpu()).abs()
        allowed = rtol * (b.cpu().abs() + magnitude.cpu()) + 1e-6 * scale
        assert bool((err <= allowed).all()), f"max |a - b| {float(err.max()):.3g} beyond the sums' rounding"
        return
    torch.testing.assert_close(a.cpu(), b.cpu(), rtol=rtol, atol=1e-6 * scale)


@pytest.mark.parametrize("target", tt_targets(), ids=lambda t: "-".join(x for x in t if x))
@settings(max_examples=150, deadline=None)
@given(case=any_tt_case())
@example(case=(tt.TTShape.create(3, 1, [3, 1], p=(1, 1, 3), q=(1, 1, 1)), 1, 0, 15))  # a prefix summing to ~0
@example(case=(tt.TTShape.create(27, 32, [32, 32], p=(3, 3, 3), q=(2, 4, 4)), 6, 13, 7))  # sc24's: AVX-512 lanes
def test_forward_stages_match_reference(target, case):
    device, scope = on_target(target)
    with scope:
        _forward_stages_match_reference(device, case)


def _forward_stages_match_reference(device, case):
    s, cores, prefix_ids, item_group, item_last, _ = make(case, device)
    work = TTWork()
    prefix = ops.tt_prefix(cores, s, prefix_ids, work)
    abs_cores = [c.abs() for c in cores]
    abs_prefix = ref.tt_prefix_ref(abs_cores, s, prefix_ids)
    close(prefix, ref.tt_prefix_ref(cores, s, prefix_ids), 1e-5, abs_prefix)
    emb = ops.tt_last(prefix, cores, s, item_group, item_last, work)
    abs_emb = ref.tt_last_ref(abs_prefix, abs_cores, s, item_group, item_last)
    close(emb, ref.tt_last_ref(prefix, cores, s, item_group, item_last), 1e-5, abs_emb)
    # rows equal the dense table's rows
    rows = prefix_ids[item_group] * s.p[-1] + item_last
    close(emb, tt.materialize([c.cpu() for c in cores], s)[rows.cpu()], 1e-5, abs_emb)
    G, n = prefix_ids.numel(), item_group.numel()
    assert work.gemms["fwd"] == G * (s.d - 2) + n
    assert work.flops["fwd"] == G * s.prefix_flops() + n * s.last_flops()


@pytest.mark.parametrize("target", tt_targets(), ids=lambda t: "-".join(x for x in t if x))
@settings(max_examples=150, deadline=None)
@given(case=any_tt_case())
def test_backward_stages_match_autograd(target, case):
    device, scope = on_target(target)
    with scope:
        _backward_stages_match_autograd(device, case)


def _backward_stages_match_autograd(device, case):
    s, cores, prefix_ids, item_group, item_last, gen = make(case, device)
    prefix = ops.tt_prefix(cores, s, prefix_ids)
    grad_items = torch.randn(item_group.numel(), s.dim, generator=gen).to(device)
    grad_last = torch.zeros_like(cores[-1])
    work = TTWork()
    d_prefix = ops.tt_last_backward(prefix, cores, s, item_group, item_last, grad_items, grad_last, work)
    want_prefix, want_last = ref.tt_last_backward_ref(prefix, cores, s, item_group, item_last, grad_items)
    abs_cores = [c.abs() for c in cores]  # the same sums over |terms|: how exact a cancelling sum can be
    mag_prefix, mag_last = ref.tt_last_backward_ref(prefix.abs(), abs_cores, s, item_group, item_last, grad_items.abs())
    close(d_prefix, want_prefix, 1e-4, mag_prefix)
    close(grad_last, want_last, 1e-4, mag_last)
    grads = [torch.zeros_like(c) for c in cores[:-1]]
    ops.tt_prefix_backward(cores, s, prefix_ids, d_prefix, grads, work)
    mags = ref.tt_prefix_backward_ref(abs_cores, s, prefix_ids, d_prefix.abs())
    for got, want, mag in zip(grads, ref.tt_prefix_backward_ref(cores, s, prefix_ids, d_prefix), mags):
        zero = torch.zeros_like(got)
        close(got, want if want is not None else zero, 1e-4, mag if mag is not None else zero)
    G, n = prefix_ids.numel(), item_group.numel()
    g_per, f_per = s.prefix_backward_cost()
    assert work.gemms["bwd"] == 2 * n + G * g_per
    assert work.flops["bwd"] == 2 * n * s.last_flops() + G * f_per


@pytest.mark.parametrize("target", tt_targets(), ids=lambda t: "-".join(x for x in t if x))
@settings(max_examples=150, deadline=None)
@given(case=any_tt_case(), shuffle=st.booleans())
@example(case=(tt.TTShape.create(27, 64, [1, 4, 4], p=(3, 1, 3, 3), q=(1, 4, 4, 4)), 4, 3, 8), shuffle=False)  # cancels
def test_fused_stages_match_the_separate_stages(target, case, shuffle):
    """tt_stages = tt_prefix then tt_last (items in any order); tt_stages_backward = tt_prefix,
    tt_last_backward, tt_prefix_backward (items by group); both equal autograd through the references."""
    device, scope = on_target(target)
    with scope:
        _fused_stages_match_the_separate_stages(device, case, shuffle)


def _fused_stages_match_the_separate_stages(device, case, shuffle):
    s, cores, prefix_ids, item_group, item_last, gen = make(case, device)
    G, n = prefix_ids.numel(), item_group.numel()
    perm = torch.randperm(n, generator=gen).to(device) if shuffle else torch.arange(n, device=device)
    work = TTWork()
    emb = ops.tt_stages(cores, s, prefix_ids, item_group[perm], item_last[perm], work)
    prefix = ref.tt_prefix_ref(cores, s, prefix_ids)
    abs_cores = [c.abs() for c in cores]
    abs_emb = ref.tt_last_ref(ref.tt_prefix_ref(abs_cores, s, prefix_ids), abs_cores, s, item_group, item_last)
    close(emb, ref.tt_last_ref(prefix, cores, s, item_group, item_last)[perm], 1e-5, abs_emb[perm])
    assert work.gemms["fwd"] == G * (s.d - 2) + n
    assert work.flops["fwd"] == G * s.prefix_flops() + n * s.last_flops()

    grad_items = torch.randn(n, s.dim, generator=gen).to(device)
    grads = [torch.zeros_like(c) for c in cores]
    ops.tt_stages_backward(cores, s, prefix_ids, item_group, item_last, grad_items, grads, work)
    want_prefix, want_last = ref.tt_last_backward_ref(prefix, cores, s, item_group, item_last, grad_items)
    want = ref.tt_prefix_backward_ref(cores, s, prefix_ids, want_prefix)
    # the same sums over |terms| (a gradient summed from cancelling products is only as exact as they are)
    mag_prefix, mag_last = ref.tt_last_backward_ref(ref.tt_prefix_ref(abs_cores, s, prefix_ids), abs_cores, s,
                                                     item_group, item_last, grad_items.abs())
    mags = ref.tt_prefix_backward_ref(abs_cores, s, prefix_ids, mag_prefix)
    for got, w, mag in zip(grads, [*want, want_last], [*mags, mag_last]):
        zero = torch.zeros_like(got)
        close(got, w if w is not None else zero, 1e-4, mag if mag is not None else zero)
    g_per, f_per = s.prefix_backward_cost()
    assert work.gemms["bwd"] == G * (s.d - 2) + 2 * n + G * g_per
    assert work.flops["bwd"] == G * s.prefix_flops() + 2 * n * s.last_flops() + G * f_per


def test_fused_stages_refuse_bad_items():
    s = tt.TTShape.create(6 * 5 * 4, 8, [3, 3], p=(6, 5, 4), q=(2, 2, 2))
    cores = tt.init_cores(s, "normal", torch.Generator().manual_seed(1))
    ids, grads = torch.tensor([7, 9]), [torch.zeros_like(c) for c in cores]
    with pytest.raises(ValueError, match=r"item_group\[1\] = 2 is outside \[0, 2\)"):
        ops.tt_stages(cores, s, ids, torch.tensor([0, 2]), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"item_last\[0\] = 4 is outside \[0, 4\)"):
        ops.tt_stages(cores, s, ids, torch.tensor([0, 1]), torch.tensor([4, 1]))
    with pytest.raises(ValueError, match="non-decreasing"):
        ops.tt_stages_backward(cores, s, ids, torch.tensor([1, 0]), torch.tensor([0, 1]), torch.ones(2, 8), grads)
    with pytest.raises(ValueError, match=r"item_group\[0\] = -1"):
        ops.tt_stages_backward(cores, s, ids, torch.tensor([-1, 0]), torch.tensor([0, 1]), torch.ones(2, 8), grads)
    with pytest.raises(ValueError, match="expected 3 core gradients"):
        ops.tt_stages_backward(cores, s, ids, torch.tensor([0, 1]), torch.tensor([0, 1]), torch.ones(2, 8), grads[:2])


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("p", [(6, 5, 4), (3, 2, 5, 4)])  # 3 cores: the fused CPU walk; 4: the composed stages
def test_fused_stages_refuse_a_row_past_the_tables_rows(device, p):
    """The cores cover prod(p) rows, the table fewer: an item reading a padding row is refused, naming it, whether
    or not the caller asked for the range checks (a GPU checks when asked: one host read)."""
    rows = math.prod(p) - 7
    s = tt.TTShape.create(rows, 8, [3] * (len(p) - 1), p=p, q=(2, 2, 2) if len(p) == 3 else (2, 2, 2, 1))
    cores = [c.to(device) for c in tt.init_cores(s, "normal", torch.Generator().manual_seed(1))]
    grads = [torch.zeros_like(c) for c in cores]
    last = rows - 1  # the table's last row is fine, the next one is padding
    ids = torch.tensor([last // 4], device=device)
    ok = torch.tensor([last % 4], device=device)
    ops.tt_stages(cores, s, ids, torch.tensor([0], device=device), ok)
    ops.tt_stages_backward(cores, s, ids, torch.tensor([0], device=device), ok, torch.ones(1, 8, device=device), grads)
    pad = torch.tensor([last % 4 + 1], device=device)
    msg = rf"item 0 reads row {rows} .*of a table of {rows} rows"
    with pytest.raises(ValueError, match=msg):
        ops.tt_stages(cores, s, ids, torch.tensor([0], device=device), pad)
    with pytest.raises(ValueError, match=msg):
        ops.tt_stages_backward(cores, s, ids, torch.tensor([0], device=device), pad, torch.ones(1, 8, device=device),
                               grads)
    if device == "cpu":  # unchecked: still refused on the CPU (its checks cost no sync)
        with pytest.raises(ValueError, match=msg):
            ops.tt_stages(cores, s, ids, torch.tensor([0], device=device), pad, check_indices=False)


def test_untouched_core_rows_get_zero_gradient():
    s = tt.TTShape.create(6 * 5 * 4, 8, [3, 3], p=(6, 5, 4), q=(2, 2, 2))
    cores = tt.init_cores(s, "normal", torch.Generator().manual_seed(1))
    prefix_ids = torch.tensor([7])  # digits (1, 2)
    prefix = ops.tt_prefix(cores, s, prefix_ids)
    grad_last = torch.zeros_like(cores[-1])
    d_prefix = ops.tt_last_backward(prefix, cores, s, torch.tensor([0]), torch.tensor([3]), torch.ones(1, 8), grad_last)
    grads = [torch.zeros_like(c) for c in cores[:-1]]
    ops.tt_prefix_backward(cores, s, prefix_ids, d_prefix, grads)
    for g, row in ((grads[0], 1), (grads[1], 2), (grad_last, 3)):
        mask = torch.ones(g.shape[0], dtype=torch.bool)
        mask[row] = False
        assert torch.all(g[mask] == 0) and bool(g[row].abs().sum() > 0)


@st.composite
def pool_cases(draw):
    S = draw(st.integers(1, 10))
    D = draw(st.integers(1, 9))
    lengths = draw(st.lists(st.integers(0, 5), min_size=S, max_size=S))
    n = sum(lengths)
    rows = draw(st.integers(1, 8))
    index = draw(st.lists(st.integers(0, rows - 1), min_size=n, max_size=n))
    return S, D, lengths, rows, index, draw(st.integers(0, 2**16))


@pytest.mark.parametrize("device", devices())
@settings(max_examples=150, deadline=None)
@given(case=pool_cases())
def test_pooling_ops_match_reference(device, case):
    S, D, lengths, rows, index, seed = case
    gen = torch.Generator().manual_seed(seed)
    src = torch.randn(rows, D, generator=gen)
    idx = torch.tensor(index, dtype=torch.int64)
    offs = torch.tensor([0] + lengths, dtype=torch.int64).cumsum(0)
    out = torch.randn(S, D, generator=gen)
    want = ref.gather_pool_ref(src, idx, offs, out)
    got = out.clone().to(device)
    ops.gather_pool(src.to(device), idx.to(device), offs.to(device), got)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6)
    dst = torch.randint(0, S, (idx.numel(),), generator=gen)
    want = ref.scatter_add_rows_ref(src, idx, dst, out)
    got = out.clone().to(device)
    ops.scatter_add_rows(src.to(device), idx.to(device), dst.to(device), got)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6)


def test_bad_arguments_raise_value_errors():
    s = tt.TTShape.create(60, 8, [2, 2], p=(3, 4, 5), q=(2, 2, 2))
    cores = tt.init_cores(s, "normal", torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"prefix_ids\[1\] = 12 is outside \[0, 12\)"):
        ops.tt_prefix(cores, s, torch.tensor([0, 12]))
    prefix = ops.tt_prefix(cores, s, torch.tensor([0, 3]))
    with pytest.raises(ValueError, match=r"item_last\[0\] = 5 is outside \[0, 5\)"):
        ops.tt_last(prefix, cores, s, torch.tensor([0]), torch.tensor([5]))
    with pytest.raises(ValueError, match="non-decreasing"):
        ops.tt_last_backward(
            prefix, cores, s, torch.tensor([1, 0]), torch.tensor([0, 0]), torch.zeros(2, 8), torch.zeros_like(cores[2])
        )
    with pytest.raises(ValueError, match="core 1 has width"):
        torch.ops.dlrmbench.tt_prefix(
            [cores[0], cores[1][:, :-1].contiguous(), cores[2]], [2, 2, 2], [1, 2, 2, 1], torch.tensor([0]),
            torch.empty(1, 8),
        )
    with pytest.raises(ValueError, match="segment_offsets must run from 0"):
        ops.gather_pool(torch.zeros(3, 2), torch.tensor([0, 1]), torch.tensor([0, 1]), torch.zeros(1, 2))
    with pytest.raises(ValueError, match=r"dst_index\[0\] = 4"):
        ops.scatter_add_rows(torch.zeros(3, 2), torch.tensor([0]), torch.tensor([4]), torch.zeros(4, 2))


def test_cpu_isa_builds_are_named_and_chosen():
    """The library names its ISA builds (native first: what the compiler targeted, as the machine's flags say),
    runs the chosen one inside use_cpu_isa and the one before after it, and refuses a build it lacks by name."""
    from reproduce.harness.machine import fingerprint

    isas = ops.cpu_isas()
    assert isas[0] in ("avx512", "avx2", "portable") and len(set(isas)) == len(isas)
    assert isas[1:] in ([], ["avx2"]) and (len(isas) == 2) == (isas[0] == "avx512")
    assert ops.cpu_isa() == isas[0] == fingerprint()["kernel_isa"]
    for isa in isas:
        with ops.use_cpu_isa(isa):
            assert ops.cpu_isa() == isa
        assert ops.cpu_isa() == isas[0]
    with pytest.raises(ValueError, match=r"'sse' is not built into this library \(built: " + ", ".join(isas)):
        with ops.use_cpu_isa("sse"):
            pass
    assert ops.cpu_isa() == isas[0]
