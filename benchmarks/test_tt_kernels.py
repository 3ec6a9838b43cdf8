"""Roofline of the shared TT micro-kernels: each stage op in GFLOP/s beside an SGEMM and a torch.bmm
implementation of the same stage-1 work, measured in interleaved rounds (every kernel once per round, in
turn) on the same threads; each kernel's share of the SGEMM is taken within a round and reported as the
median and range over the rounds, so machine noise moves both sides of a ratio together.

Shapes are the SC24 Table-1 table: N = 1e8, D = 32, ranks 32 (p = (400, 500, 500), q = (2, 4, 4)), so
a = 2*q1*r1*q2*r2 = 16384 and b = 2*q1*q2*r2*q3 = 2048 FLOPs. Stage 1 gets G sorted distinct prefix
ids (EcoRec's E1 of a large batch); stage 2 gets 4 items per prefix. "stages" / "stages-bwd" are the fused
ops the TT systems run (both stages per stack of prefixes, the backward with the prefixes recomputed, its
FLOPs counted as such). "stage2@ecorec" / "stage2-bwd@ecorec": the same stage-2 kernels at the shape EcoRec gives
them in make bench's step (test_tt_step.py's batch on the 1e8-row table): the unique ids of its micro-batch with the
most prefixes, grouped by prefix (a few items per prefix, not 4; the report's note says how many). Outputs go to
preallocated buffers, as in the schedules, so the allocator is not timed.
"stages@ecorec" / "stages-bwd@ecorec": the fused ops (as EcoRec's pooled walk runs them) at that shape.
Every TT kernel runs once per round in each vector ISA build of the library (``stage2 [avx512]``, ``stage2 [avx2]``:
ops.cpu_isas(), the native one first; an AVX-512 build carries an AVX2 one), so the builds are compared side by
side in the same rounds.

Memory-aware limit: each round also times a copy of DRAM_FLOATS floats (far past any cache; its bandwidth counts
the bytes read plus the bytes written). A kernel's limit in a round is max(its FLOPs at that round's SGEMM rate, the
bytes it must move at that round's copy bandwidth), the bytes being every operand tensor read once and every output
written once (a gradient it adds into: read and written); "x limit" is its time over that limit and "bound" says
which term is larger (docs/systems/tt.md)."""
import inspect

import torch

from benchmarks.bandwidth import DRAM_FLOATS
from benchmarks.conftest import over_limit, report, timed
from impls.core import ops, tt

G, ITEMS_PER_PREFIX = 65536, 4
SECTION = "TT kernel roofline (median over interleaved rounds; GFLOP/s and share of the same round's SGEMM)"
_STATE: dict = {}


def setup():
    if _STATE:
        return _STATE
    s = tt.TTShape.create(10**8, 32, 32)
    gen = torch.Generator().manual_seed(0)
    cores = tt.init_cores(s, "uniform", gen)
    ids = torch.randperm(s.p[0] * s.p[1], generator=gen)[:G].sort().values
    n = G * ITEMS_PER_PREFIX
    grp = torch.arange(n) // ITEMS_PER_PREFIX
    last = torch.randint(0, s.p[2], (n,), generator=gen)
    digits = tt.decode(ids, s.p[:2])
    _STATE.update(
        s=s, cores=cores, ids=ids, grp=grp, last=last, n=n,
        prefix=ops.tt_prefix(cores, s, ids), emb=torch.empty(n, s.dim), d_prefix=torch.empty(G, s.prefix_width),
        d_emb=torch.randn(n, s.dim, generator=gen), grads=[torch.zeros_like(c) for c in cores],
        a1=cores[0][digits[0]].view(G, s.q[0], s.r[1]), b1=cores[1][digits[1]].view(G, s.r[1], -1),
        digits=digits, mm=(torch.randn(2048, 2048, generator=gen), torch.randn(2048, 2048, generator=gen)),
        stream=(torch.ones(DRAM_FLOATS), torch.empty(DRAM_FLOATS)),
        ecorec=ecorec_stage2(s, cores),
    )
    return _STATE


def ecorec_stage2(s, cores) -> dict:
    """The stage-2 call EcoRec makes for the micro-batch with the most prefixes on make bench's step batch (the
    1e8-row table; its heavy head puts many items on each prefix of the first micro-batch and few on the last's):
    its prefix ids (distinct id div p_last), each unique id's prefix group and last digit, and the buffers of both
    directions."""
    from benchmarks.test_tt_step import batch
    from impls.ecorec.collection import EcoRec, micro_batch_bounds

    defaults = inspect.signature(EcoRec.configure).parameters  # EcoRec's own micro-batching defaults
    uq = torch.unique(batch(s.num_embeddings).values)
    p_last = s.p[-1]
    chunks = [uq[lo:hi] for lo, hi in micro_batch_bounds(uq.numel(), defaults["micro_batches"].default,
                                                          defaults["min_chunk"].default)]
    ids = max(chunks, key=lambda c: torch.unique_consecutive(c // p_last).numel())
    prefixes, grp = torch.unique_consecutive(ids // p_last, return_inverse=True)
    gen = torch.Generator().manual_seed(2)
    n, g = ids.numel(), prefixes.numel()
    return {"ids": prefixes, "prefix": ops.tt_prefix(cores, s, prefixes), "grp": grp, "last": ids % p_last, "n": n,
            "G": g, "grads": [torch.zeros_like(c) for c in cores],
            "emb": torch.empty(n, s.dim), "d_emb": torch.randn(n, s.dim, generator=gen),
            "d_prefix": torch.empty(g, s.prefix_width), "grad": torch.zeros_like(cores[-1])}


def flops_of(kernel, st):
    s = st["s"]
    return {
        "sgemm": 2 * 2048**3,
        "stage1": G * s.prefix_flops(),
        "stage1-bmm": G * s.prefix_flops(),
        "stage1-bmm+gather": G * s.prefix_flops(),
        "stage2": st["n"] * s.last_flops(),
        "stage2-bwd": 2 * st["n"] * s.last_flops(),
        "stage2@ecorec": st["ecorec"]["n"] * s.last_flops(),
        "stage2-bwd@ecorec": 2 * st["ecorec"]["n"] * s.last_flops(),
        "stages@ecorec": st["ecorec"]["G"] * s.prefix_flops() + st["ecorec"]["n"] * s.last_flops(),
        "stages-bwd@ecorec": st["ecorec"]["G"] * (s.prefix_flops() + s.prefix_backward_cost()[1])
        + 2 * st["ecorec"]["n"] * s.last_flops(),
        "stage1-bwd": G * s.prefix_backward_cost()[1],
        "stages": G * s.prefix_flops() + st["n"] * s.last_flops(),
        "stages-bwd": G * (s.prefix_flops() + s.prefix_backward_cost()[1]) + 2 * st["n"] * s.last_flops(),
    }[kernel]


TT_KERNELS = ["stage1", "stage2", "stage2-bwd", "stage1-bwd", "stages", "stages-bwd", "stage2@ecorec",
              "stage2-bwd@ecorec", "stages@ecorec", "stages-bwd@ecorec"]


def nbytes(*tensors) -> int:
    return sum(x.numel() * x.element_size() for x in tensors)


def bytes_of(kernel, st) -> int:
    """The bytes a kernel must move: its operands read once, its outputs written once, a gradient it adds into read
    and written (the cores: read once; their gradients: read and written)."""
    c, e = st["cores"], st["ecorec"]
    return {
        "stage1": nbytes(st["ids"], *c[:2], st["prefix"]),
        "stage2": nbytes(st["prefix"], st["grp"], st["last"], c[2], st["emb"]),
        "stage2-bwd": nbytes(st["prefix"], st["grp"], st["last"], st["d_emb"], st["d_prefix"]) + 3 * nbytes(c[2]),
        "stage1-bwd": nbytes(st["ids"], st["d_prefix"]) + 3 * nbytes(*c[:2]),
        "stages": nbytes(st["ids"], st["grp"], st["last"], *c, st["emb"]),
        "stages-bwd": nbytes(st["ids"], st["grp"], st["last"], st["d_emb"]) + 3 * nbytes(*c),
        "stage2@ecorec": nbytes(e["prefix"], e["grp"], e["last"], c[2], e["emb"]),
        "stage2-bwd@ecorec": nbytes(e["prefix"], e["grp"], e["last"], e["d_emb"], e["d_prefix"]) + 3 * nbytes(c[2]),
        "stages@ecorec": nbytes(e["ids"], e["grp"], e["last"], *c, e["emb"]),
        "stages-bwd@ecorec": nbytes(e["ids"], e["grp"], e["last"], e["d_emb"]) + 3 * nbytes(*c),
    }[kernel]
ISAS = ops.cpu_isas()


def labels() -> list[str]:
    """Every kernel, the TT ones once per ISA build ("stage2 [avx2]"), in the order a round runs them."""
    return [k for k in KERNELS if k not in TT_KERNELS] + [f"{k} [{i}]" for k in TT_KERNELS for i in ISAS]


def kernel_of(label: str) -> tuple[str, str | None]:
    """("stage2", "avx2") for "stage2 [avx2]", ("sgemm", None) for "sgemm"."""
    name, _, isa = label.partition(" [")
    return name, (isa.rstrip("]") or None)


def in_isa(isa, fn):
    """fn run in the CPU kernels of ISA build ``isa`` (as is when None)."""
    if isa is None:
        return fn

    def call():
        with ops.use_cpu_isa(isa):
            return fn()

    return call


def runner(kernel, st):
    s, c = st["s"], st["cores"]
    if kernel == "sgemm":
        return lambda: torch.mm(*st["mm"])
    if kernel == "stream":
        src, dst = st["stream"]
        return lambda: dst.copy_(src)
    if kernel == "stage1":
        return lambda: ops.tt_prefix(c, s, st["ids"], out=st["prefix"])
    if kernel == "stage1-bmm":
        return lambda: torch.bmm(st["a1"], st["b1"])
    if kernel == "stage1-bmm+gather":
        d = st["digits"]
        return lambda: torch.bmm(c[0][d[0]].view(G, s.q[0], s.r[1]), c[1][d[1]].view(G, s.r[1], -1))
    if kernel == "stage2":
        return lambda: ops.tt_last(st["prefix"], c, s, st["grp"], st["last"], out=st["emb"])
    if kernel == "stage2-bwd":
        return lambda: ops.tt_last_backward(
            st["prefix"], c, s, st["grp"], st["last"], st["d_emb"], st["grads"][2], out=st["d_prefix"]
        )
    if kernel in ("stage2@ecorec", "stage2-bwd@ecorec"):
        e = st["ecorec"]
        if kernel == "stage2@ecorec":
            return lambda: ops.tt_last(e["prefix"], c, s, e["grp"], e["last"], out=e["emb"])
        return lambda: ops.tt_last_backward(e["prefix"], c, s, e["grp"], e["last"], e["d_emb"], e["grads"][2],
                                            out=e["d_prefix"])
    if kernel == "stages@ecorec":
        e = st["ecorec"]
        return lambda: ops.tt_stages(c, s, e["ids"], e["grp"], e["last"], out=e["emb"])
    if kernel == "stages-bwd@ecorec":
        e = st["ecorec"]
        return lambda: ops.tt_stages_backward(c, s, e["ids"], e["grp"], e["last"], e["d_emb"], e["grads"])
    if kernel == "stage1-bwd":
        return lambda: ops.tt_prefix_backward(c, s, st["ids"], st["d_prefix"], st["grads"][:2])
    if kernel == "stages":
        return lambda: ops.tt_stages(c, s, st["ids"], st["grp"], st["last"], out=st["emb"])
    if kernel == "stages-bwd":
        return lambda: ops.tt_stages_backward(c, s, st["ids"], st["grp"], st["last"], st["d_emb"], st["grads"])
    raise ValueError(kernel)


KERNELS = ["sgemm", "stream", "stage1", "stage1-bmm", "stage1-bmm+gather", "stage2", "stage2-bwd", "stage1-bwd",
           "stages", "stages-bwd", "stage2@ecorec", "stage2-bwd@ecorec", "stages@ecorec", "stages-bwd@ecorec"]
ROUNDS, CALLS = 9, 3  # per round each kernel's best of CALLS calls (the first call of a kernel warms it)


def measure_rounds(st, rounds=ROUNDS, calls=CALLS) -> dict[str, list[float]]:
    """GFLOP/s per kernel (and ISA build) per round, kernels in turn within every round (A B C A B C); the copy's
    GB/s (bytes read plus bytes written)."""
    fns = {lab: in_isa(kernel_of(lab)[1], runner(kernel_of(lab)[0], st)) for lab in labels()}
    for f in fns.values():
        f()
    rates: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            best = min(timed(f) for _ in range(calls))
            work = 2 * nbytes(st["stream"][0]) if k == "stream" else flops_of(kernel_of(k)[0], st)
            rates[k].append(work / best / 1e9)
    return rates


def limits(kernel: str, st, rates: dict[str, list[float]], label: str) -> tuple[list[float], str]:
    """Per round, the kernel's time over its memory-aware limit (max of FLOP-time and bytes / copy bandwidth), and
    which term bounds it in most rounds ("FLOP" or "memory")."""
    flops, nb = flops_of(kernel, st), bytes_of(kernel, st)
    over, memory = [], 0
    for rate, sgemm, bw in zip(rates[label], rates["sgemm"], rates["stream"]):
        x, bound = over_limit(flops / (rate * 1e9), {"FLOP": flops / (sgemm * 1e9), "memory": nb / (bw * 1e9)})
        over.append(x)
        memory += bound == "memory"
    return sorted(over), "memory" if 2 * memory > len(over) else "FLOP"


def test_tt_kernel_roofline(benchmark):
    st = setup()
    rates = benchmark.pedantic(measure_rounds, args=(st,), rounds=1, iterations=1)
    stats: dict[str, dict] = {}
    e = st["ecorec"]
    for k in labels():
        if k == "stream":
            bw = sorted(rates[k])
            stats[k] = {"GB/s": bw[len(bw) // 2], "rounds": len(bw)}
            report(SECTION, {"kernel": k, "GFLOP/s": f"{stats[k]['GB/s']:.1f} GB/s"})
            continue
        shares = sorted(r / g for r, g in zip(rates[k], rates["sgemm"]))
        gf = sorted(rates[k])
        stats[k] = {"GFLOP/s": gf[len(gf) // 2], "of SGEMM": shares[len(shares) // 2], "of SGEMM min": shares[0],
                    "of SGEMM max": shares[-1], "rounds": len(gf)}
        row = {"kernel": k, "GFLOP/s": stats[k]["GFLOP/s"], "of SGEMM": stats[k]["of SGEMM"],
               "range": f"{shares[0]:.2f}-{shares[-1]:.2f}"}
        name = kernel_of(k)[0]
        if name in TT_KERNELS:
            over, bound = limits(name, st, rates, k)
            stats[k].update({"over_limit": over[len(over) // 2], "over_limit_min": over[0],
                             "over_limit_max": over[-1], "bound": bound, "bytes": bytes_of(name, st)})
            row.update({"x limit": stats[k]["over_limit"], "bound": bound})
        report(SECTION, row, f"threads: {torch.get_num_threads()}; shapes p=(400,500,500) q=(2,4,4) r=32, G={G}; "
                             f"@ecorec: {e['n']:,} items over {e['G']:,} prefixes ({e['n'] / e['G']:.2f} per prefix); "
                             f"{ROUNDS} interleaved rounds, share of the same round's SGEMM (median, range); "
                             f"x limit: time over max(FLOP-time, bytes / the same round's copy bandwidth); "
                             f"TT kernels per ISA build [..], native: {ISAS[0]}")
    benchmark.extra_info.update(kernels=stats, threads=torch.get_num_threads(), per_round=rates, isas=ISAS,
                                native_isa=ISAS[0], ecorec_stage2={"items": e["n"], "prefixes": e["G"]})
