"""A TT system's whole training step against what its arithmetic costs and against the dense table:
one table of 1e7 (and 1e8) rows x D=32, ranks 32, B=8192 samples of 46 lookups drawn with a heavy head
(EcoRec's Table-1 setting, embedding-only, SGD), every system stepped once per round in turn (A B C D A B C D)
beside an SGEMM timed in the same round. Reported per system: the median step, the step over its FLOP-time
(the step's counted FLOPs at the same round's SGEMM rate), and the step over dense-fbgemm's in the same round
(median and range of the per-round ratios). A TT system is timed once per ISA build of the CPU kernels
("ecorec [avx512]", "ecorec [avx2]": ops.cpu_isas()), in the same rounds. After the rounds, each TT system's step
is profiled (native ISA, torch.profiler, the median of 3 profiled steps by wall time): the time inside the TT
stage kernels (every dlrmbench::tt_* op, and the stage calls a fused op makes, which it names the same), the rest of
the step outside them, and the ops that take the most of that rest.

Memory-aware limit (docs/systems/tt.md): each round also times a copy at each level past L1 (benchmarks/bandwidth.py:
L2, L3, DRAM). A system's limit in a round is the largest of its FLOP-time and, per level, the bytes that cross that
level in its step at that round's bandwidth there (impls/work/traffic.py: Traffic.by_level over the system's own stage
plan of the batch: its prefix products and their gradients written and read once, every lookup pooled into its bag
and its bag's gradient gathered back, the index work; each stream served by the smallest level that holds what it is
drawn from), plus the bytes the step must move from memory whatever the caches, at every level:
the batch's ids and offsets read, the pooled rows written and their gradient read, the parameters read by the forward
and the backward and written by the update, and every intermediate buffer the schedule keeps, its work report's peak,
written once and read once). "x limit" is the step over that limit, "bound" the term that sets it in most rounds."""
import pytest
import torch

from benchmarks.bandwidth import LevelCopies, capacity
from benchmarks.conftest import over_limit, report, timed
from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, get_impl
from impls.core import ops
from impls.core.stage_plan import SampledIndex
from impls.work.traffic import Traffic

B, L, D, ROUNDS = 8192, 46, 32, 5
WARMUP = 3  # steps before the rounds: a 1e8-row dense table's pages are first touched by its early steps
SYSTEMS = ("ecorec", "elrec", "ttrec", "dense-fbgemm")
SECTION = "TT step over its FLOP-time and over dense-fbgemm (median over interleaved rounds; range)"
BANDWIDTH_SECTION = "Memory-aware limit's bandwidths (the step rounds' copies at each level)"
PROFILE_SECTION = "TT step profile: inside the TT stage kernels vs outside them (one profiled step, native ISA)"
TT_KERNELS = frozenset({"dlrmbench::tt_stages", "dlrmbench::tt_stages_backward", "dlrmbench::tt_prefix",
                        "dlrmbench::tt_last", "dlrmbench::tt_last_backward", "dlrmbench::tt_prefix_backward"})
PROFILED, TOP_OPS = 3, 6


def batch(rows: int) -> SparseFeatures:
    g = torch.Generator().manual_seed(0)
    n = B * L
    values = (torch.rand(n, generator=g) ** 4 * rows).long().clamp_(max=rows - 1)  # a heavy head, a long tail
    return SparseFeatures(values, torch.arange(0, n + 1, L), B)


def build(name: str, rows: int):
    try:
        cls = get_impl(name)
    except ImportError as exc:
        return None, str(exc)
    opts = {} if name.startswith("dense") else {"ranks": 32}
    return cls([TableSpec("t", rows, D)], EmbeddingOptim("sgd", lr=0.01), check_bounds=False, **opts), ""


def step(emb, sf, upstream) -> None:
    (emb(sf) * upstream).sum().backward()
    emb.optimizer_step()


def step_once(emb, sf, upstream, isa: str | None = None) -> float:
    """One step's seconds, the TT kernels of ISA build ``isa`` (the native one when None)."""
    with ops.use_cpu_isa(isa or ops.cpu_isa()):
        return timed(step, emb, sf, upstream)


def labels(name: str) -> list[tuple[str, str | None]]:
    """(label, ISA build) per way a system is timed: a TT system once per ISA build of the CPU kernels
    ("ecorec [avx2]"), a dense table once."""
    if name.startswith("dense"):
        return [(name, None)]
    return [(f"{name} [{isa}]", isa) for isa in ops.cpu_isas()]


def sgemm_rate() -> float:
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    torch.mm(a, b)
    return 2 * 2048**3 / min(timed(torch.mm, a, b) for _ in range(3))


STACK = 64  # prefixes a fused walk stacks at a time (csrc/cpu/tt_chain.h: kStack): its working buffers' rows


def step_bytes(emb, sf) -> int:
    """What a step must move from memory whatever the caches (module docstring): ids and offsets, pooled rows and
    their gradient, the parameters three times, the schedule's peak intermediate buffers twice."""
    ids = sf.values.numel() * sf.values.element_size() + sf.offsets.numel() * sf.offsets.element_size()
    return ids + 2 * B * D * 4 + 3 * emb.memory_report().params + 2 * emb.work_report().intermediate_bytes


def level_bytes(emb, sf) -> dict[str, float]:
    """The bytes that must cross L2, L3 and DRAM in one step of TT system ``emb`` on batch ``sf`` (module docstring):
    its stage plan's traffic (Traffic.by_level) by the footprint of each stream (the fused walks' stacks of prefixes
    and their gradients, per thread; the bags and their gradients; the ids and their sort), plus step_bytes at every
    level."""
    table = emb.tt["0"]
    s = table.shape
    plan = type(emb).stage_plan(s, SampledIndex(sf.values, s.last_radix))
    traffic = Traffic()
    dedups = plan.unique > 0
    traffic.add_plan(plan, s, sf.values.numel(), dedups=dedups)
    threads = torch.get_num_threads()
    footprints = {"prefixes": threads * 2 * STACK * s.prefix_width * 4, "pooling": 2 * B * s.dim * 4,
                  "index": sf.values.numel() * (8 + (32 if dedups else 0))}
    return traffic.by_level(footprints, capacity(threads), step_bytes(emb, sf))


def run_rounds(rows: int) -> dict:
    sf, upstream = batch(rows), torch.randn(B, D, generator=torch.Generator().manual_seed(1))
    models, isas, missing = {}, {}, {}
    for name in SYSTEMS:
        for label, isa in labels(name):
            emb, why = build(name, rows)
            if emb is None:
                missing[name] = why
                break
            for _ in range(WARMUP):  # the first steps' allocations and first-touch page faults
                step_once(emb, sf, upstream, isa)
            models[label], isas[label] = emb, isa
    out = {k: {"step_s": [], "flops": 0, "over_flop_time": [], "over_dense": [], "over_limit": [], "bounds": []}
           for k in models}
    copies = LevelCopies(torch.get_num_threads())
    levels = {k: level_bytes(m, sf) for k, m in models.items() if m.work_report().flops}
    bandwidths = []
    for _ in range(ROUNDS):
        rate, bw = sgemm_rate(), copies.bandwidths()
        bandwidths.append(bw)
        times = {k: step_once(m, sf, upstream, isas[k]) for k, m in models.items()}
        for k, m in models.items():
            out[k]["step_s"].append(times[k])
            flops = m.work_report().flops
            out[k]["flops"] = flops
            if flops:  # a TT system (a dense table touches a few of its rows: its parameters bound nothing)
                out[k]["bytes"] = levels[k]
                terms = {"FLOP": flops / rate, **{lv: levels[k][lv] / bw[lv] for lv in bw if lv in levels[k]}}
                x, bound = over_limit(times[k], terms)
                out[k]["over_limit"].append(x)
                out[k]["bounds"].append(bound)
                out[k]["over_flop_time"].append(times[k] / (flops / rate))
            if "dense-fbgemm" in times:
                out[k]["over_dense"].append(times[k] / times["dense-fbgemm"])
    for k, m in models.items():
        out[k]["param_bytes"] = m.memory_report().params
    native = ops.cpu_isas()[0]  # what the TT kernels run unless asked otherwise (a dense table has no ISA build)
    profiles = {k: step_profile(m, sf, upstream) for k, m in models.items() if isas[k] == native}
    return {"systems": out, "missing": missing, "profiles": profiles, "bandwidths": bandwidths,
            "copy_bytes": copies.sizes(), "capacity": capacity(torch.get_num_threads())}


def step_profile(emb, sf, upstream) -> dict:
    """Where one step's time goes: the median of PROFILED profiled steps (by wall time), its milliseconds inside
    the TT stage kernels and outside them, and the TOP_OPS ops with the most self time outside them (ms)."""
    from torch.profiler import ProfilerActivity, profile

    runs = []
    for _ in range(PROFILED):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            wall = timed(step, emb, sf, upstream)
        self_ms = {e.key: e.self_cpu_time_total / 1e3 for e in prof.key_averages()}
        runs.append((wall * 1e3, self_ms))
    wall, self_ms = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
    inside = sum(v for k, v in self_ms.items() if k in TT_KERNELS)
    outside = sorted(((k, v) for k, v in self_ms.items() if k not in TT_KERNELS), key=lambda kv: -kv[1])
    return {"step_ms": wall, "tt_kernels_ms": inside, "outside_ms": wall - inside,
            "outside_share": (wall - inside) / wall, "top_outside": [[k, v] for k, v in outside[:TOP_OPS]]}


def med(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else float("nan")


@pytest.mark.parametrize("rows", [10**7, 10**8], ids=["1e7", "1e8"])
def test_tt_step_against_flops_and_dense(benchmark, rows):
    res = benchmark.pedantic(run_rounds, args=(rows,), rounds=1, iterations=1)
    summary = {}
    for k, r in res["systems"].items():
        summary[k] = {"step_ms": med(r["step_s"]) * 1e3, "over_flop_time": med(r["over_flop_time"]),
                      "over_flop_time_range": [min(r["over_flop_time"], default=None), max(r["over_flop_time"], default=None)],
                      "over_dense": med(r["over_dense"]),
                      "over_dense_range": [min(r["over_dense"], default=None), max(r["over_dense"], default=None)],
                      "flops_per_step": r["flops"], "param_bytes": r["param_bytes"], "rounds": len(r["step_s"]),
                      "over_limit": med(r["over_limit"]),
                      "over_limit_range": [min(r["over_limit"], default=None), max(r["over_limit"], default=None)],
                      "bytes_per_step": r.get("bytes"),
                      "bound": max(set(r["bounds"]), key=r["bounds"].count) if r["bounds"] else "–"}
        s = summary[k]
        report(SECTION, {"rows": f"{rows:.0e}", "system": k, "step ms": s["step_ms"],
                         "x FLOP-time": s["over_flop_time"], "x limit": s["over_limit"],
                         "bound": s["bound"],
                         "x dense-fbgemm": s["over_dense"],
                         "params MiB": s["param_bytes"] / 2**20},
               f"B={B}, {L} lookups/sample, D={D}, TT ranks 32, SGD, embedding-only; {ROUNDS} interleaved rounds; "
               f"threads {torch.get_num_threads()}")
    for k, prof in res["profiles"].items():
        report(PROFILE_SECTION, {"rows": f"{rows:.0e}", "system": k, "step ms": prof["step_ms"],
                                 "TT kernels ms": prof["tt_kernels_ms"], "outside ms": prof["outside_ms"],
                                 "outside share": prof["outside_share"],
                                 "largest outside": ", ".join(f"{n} {v:.1f}" for n, v in prof["top_outside"][:3])},
               "self CPU time per op on the stepping thread (torch.profiler); outside = the step's wall time less "
               "the TT kernels'")
    bw = {lv: med([b[lv] for b in res["bandwidths"]]) for lv in res["bandwidths"][0]}
    report(BANDWIDTH_SECTION, {"rows": f"{rows:.0e}", **{f"{lv} GB/s": v / 1e9 for lv, v in bw.items()},
                               **{f"{lv} copy MiB": n / 2**20 for lv, n in res["copy_bytes"].items()}},
           "copy bandwidth (read + written) with source and destination in the level: L2 half of one core's L2 on one "
           "thread, times the threads; L3 half the shared L3; DRAM far past it; median over the rounds")
    benchmark.extra_info.update(rows=rows, systems=summary, missing=res["missing"], per_round=res["systems"],
                                isas=ops.cpu_isas(), native_isa=ops.cpu_isa(), profiles=res["profiles"],
                                bandwidths=bw, copy_bytes=res["copy_bytes"], capacity=res["capacity"])
