"""dense-torch vs dense-fbgemm: forward and forward+backward(+update) on 8 tables x 1M rows x dim 64,
B = 4096, bag size 1 and 20, uniform ids (the setting of fbgemm's TBE benchmark)."""
import pytest
import torch

from benchmarks.conftest import report
from impls.api import EmbeddingOptim, get_impl
from impls.data.presets import get_preset
from impls.data.synthetic import SyntheticSource

T, N, D, B = 8, 1_000_000, 64, 4096
_MODULES = {}


def module(impl):
    if impl not in _MODULES:
        _MODULES.clear()  # one 2 GiB collection alive at a time
        try:
            cls = get_impl(impl)
        except ImportError as exc:
            pytest.skip(str(exc))
        spec = get_preset("uniform", num_tables=T, rows=N, dim=D)
        _MODULES[impl] = cls(spec.tables, EmbeddingOptim("sgd", lr=0.01), check_bounds=False)
    return _MODULES[impl]


def batches(L):
    src = SyntheticSource(get_preset("uniform", num_tables=T, rows=N, dim=D, hotness=L, seed=L))
    return [b.sparse for b in src.batches(4, B)]


@pytest.mark.parametrize("L", [1, 20])
@pytest.mark.parametrize("op", ["fwd", "fwd+bwd"])
@pytest.mark.parametrize("impl", ["dense-torch", "dense-fbgemm"])
def test_dense(benchmark, impl, op, L):
    emb = module(impl)
    reqs = batches(L)
    grad = torch.randn(B, T * D)
    state = {"i": 0}

    def step():
        sf = reqs[state["i"] % len(reqs)]
        state["i"] += 1
        if op == "fwd":
            with torch.no_grad():
                emb(sf)
            return
        out = emb(sf)
        out.backward(grad)
        emb.optimizer_step()

    benchmark.pedantic(step, rounds=10, warmup_rounds=2, iterations=1)
    t = benchmark.stats.stats.median
    lookups = B * T * L
    gbs = lookups * D * 4 * (3 if op == "fwd+bwd" else 1) / t / 1e9
    benchmark.extra_info.update({"lookups_per_s": lookups / t, "gb_per_s": gbs,
                                 "gb_convention": "rows read (B*T*L*D*4); x3 for fwd+bwd (fbgemm old)"})
    report(
        "dense embedding throughput (median)",
        {"impl": impl, "L": L, "op": op, "ms": t * 1e3, "Mlookups/s": lookups / t / 1e6, "GB/s": gbs},
        "GB/s convention: fbgemm's old one, rows read only = B*T*L*D*4 bytes; forward+backward counts them x3",
    )
