"""TT math: shape suggestion (FBTT's results), the index codec, materialize, parameter counts, init."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from impls.core import tt

# Expected values produced by FBTT's own suggested_tt_shapes for these sizes (checked once against it).
FBTT_SHAPES = {
    (16, 3, False): (2, 2, 4),
    (32, 3, False): (2, 4, 4),
    (64, 3, False): (4, 4, 4),
    (128, 3, False): (4, 4, 8),
    (64, 4, False): (2, 4, 2, 4),
    (16, 2, False): (4, 4),
    (10131227, 3, True): (200, 220, 250),  # Criteo Kaggle's largest table; FBTT's benchmark default p
    (8351593, 3, True): (200, 200, 209),
    (2202608, 3, True): (125, 130, 136),
    (40_000_000, 3, True): (250, 400, 400),
    (10**8, 3, True): (400, 500, 500),
    (1000, 4, True): (5, 5, 5, 8),
    (5_000_000, 4, True): (40, 50, 50, 50),
    (10131227, 3, False): (1, 1, 10131227),  # a prime: FBTT pads with ones when not rounding up
}


@pytest.mark.parametrize("args,expected", FBTT_SHAPES.items())
def test_suggest_tt_shapes_matches_fbtt(args, expected):
    n, d, up = args
    assert tt.suggest_tt_shapes(n, d, allow_round_up=up) == expected


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 10**7), d=st.integers(2, 4))
def test_suggested_shapes_cover_n(n, d):
    p = tt.suggest_tt_shapes(n, d)
    assert len(p) == d and math.prod(p) >= n and min(p) >= 1
    assert math.prod(tt.suggest_tt_shapes(n, d, allow_round_up=False)) == n


@settings(max_examples=200, deadline=None)
@given(p=st.lists(st.integers(1, 30), min_size=2, max_size=4), data=st.data())
def test_codec_round_trip_first_core_most_significant(p, data):
    n = math.prod(p)
    x = torch.tensor(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=20)))
    digits = tt.decode(x, p)
    assert torch.equal(tt.encode(digits, p), x)
    stride = math.prod(p[1:])
    assert torch.equal(digits[0], x // stride)  # first digit = most significant
    assert torch.equal(digits[-1], x % p[-1])
    for dg, pk in zip(digits, p):
        assert int(dg.min()) >= 0 and int(dg.max()) < pk


def einsum_full(cores, s):
    views = [c.view(s.p[k], s.r[k], s.q[k], s.r[k + 1]) for k, c in enumerate(cores)]
    if s.d == 2:
        w = torch.einsum("iaxb,jbyc->ijxy", *views)
    elif s.d == 3:
        w = torch.einsum("iaxb,jbyc,kczd->ijkxyz", *views)
    else:
        w = torch.einsum("iaxb,jbyc,kczd,ldwe->ijklxyzw", *views)
    return w.reshape(math.prod(s.p), s.dim)[: s.num_embeddings]


@settings(max_examples=40, deadline=None)
@given(
    d=st.integers(2, 4),
    p=st.lists(st.integers(1, 5), min_size=4, max_size=4),
    q=st.lists(st.integers(1, 3), min_size=4, max_size=4),
    r=st.lists(st.integers(1, 4), min_size=3, max_size=3),
    cut=st.integers(0, 3),
)
def test_materialize_equals_einsum_and_param_count(d, p, q, r, cut):
    p, q = p[:d], q[:d]
    n = max(1, math.prod(p) - cut)
    s = tt.TTShape.create(n, math.prod(q), r[: d - 1], p=p, q=q)
    cores = tt.init_cores(s, "normal", torch.Generator().manual_seed(0))
    want = einsum_full(cores, s)
    torch.testing.assert_close(tt.materialize(cores, s), want, rtol=1e-5, atol=1e-6 * float(want.abs().max()))
    assert s.num_params == sum(c.numel() for c in cores)
    assert s.num_params == sum(p[k] * s.r[k] * q[k] * s.r[k + 1] for k in range(d))


def test_compression_ratio_example():
    s = tt.TTShape.create(40_000_000, 64, 128, p=(200, 200, 1000), q=(4, 4, 4))
    assert s.num_params == 200 * 4 * 128 + 200 * 128 * 4 * 128 + 1000 * 128 * 4
    assert 186 < s.compression_ratio < 187  # TT-Rec's example shape: "≈186x"


def test_work_per_lookup_matches_dossier():
    s = tt.TTShape.create(10**6, 32, 32, q=(2, 4, 4))
    assert (s.prefix_flops(), s.last_flops()) == (16384, 2048)  # a, b at D=32, r=32
    s = tt.TTShape.create(10**6, 64, 128, q=(4, 4, 4))
    assert (s.prefix_flops(), s.last_flops()) == (524288, 16384)
    assert s.prefix_backward_cost() == (2, 2 * 524288)


def test_initializers():
    s = tt.TTShape.create(10_000, 16, [8, 8], q=(2, 2, 4))
    gen = torch.Generator().manual_seed(0)
    c = (math.sqrt(2 / (10_000 + 16))) ** (1 / 3) * (1 * 8 * 8 * 1) ** (-1 / 6)
    for core in tt.init_cores(s, "uniform", gen):
        assert 0 <= float(core.min()) and float(core.max()) <= c
        assert abs(float(core.mean()) - c / 2) < 0.1 * c
    for core in tt.init_cores(s, "naive-uniform", gen):
        assert 0 <= float(core.min()) and float(core.max()) <= 1 / math.sqrt(10_000)
    allc = torch.cat([x.flatten() for x in tt.init_cores(s, "normal", gen)])
    assert abs(float(allc.std()) - 1 / math.sqrt(10_000)) < 0.1 / math.sqrt(10_000)
    scale = (1 / math.sqrt(3 * 10_000)) ** (1 / 3)
    for core in tt.init_cores(s, "approx-normal", gen):
        assert float(core.abs().min()) >= 2 * scale * (1 - 1e-6)  # only the tails |x| >= 2 survive
    with pytest.raises(ValueError, match="unknown TT weight_dist"):
        tt.init_cores(s, "gaussian", gen)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(num_embeddings=1000, dim=32, ranks=8, p=(5, 5, 5)), "cover 125 rows < num_embeddings 1000"),
        (dict(num_embeddings=100, dim=32, ranks=8, q=(2, 2, 4)), "multiply to 16, not the dim 32"),
        (dict(num_embeddings=100, dim=32, ranks=[8, 8, 8], d=3), "3 cores need 2 inner ranks"),
        (dict(num_embeddings=100, dim=32, ranks=8, d=5), "2 to 4 cores"),
        (dict(num_embeddings=100, dim=32, ranks=0), "positive"),
    ],
)
def test_bad_shapes_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tt.TTShape.create(**kwargs)
