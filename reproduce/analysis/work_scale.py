"""The work model at the EcoRec paper's scale (`dlrmbench model work`): EcoRec, EL-Rec and TT-Rec on a Meta-2022-like
workload (the meta-2022 preset's 788 tables at D = 32, TT ranks 32 as the artifact builds them, 4,096 samples per GPU:
weak scaling as the paper's Figs 10 / 12) over 8-128 GPUs, each sharded as it is distributed (its dist_defaults:
TT-Rec table-wise round-robin, EL-Rec data-parallel, EcoRec LPT on its expected per-table unique ids with the
table-group pipeline).

Per system and world size, from impls/work only (nothing fitted, nothing run): every rank's FLOPs, stage bytes,
lookups and distinct ids (an owner serves its tables over the global batch; a replica its local batch), its
parameter, optimizer and intermediate bytes and their sum (the peak), and the bytes it sends and receives per step
(impls/work/exchange.py); the busiest rank of each. The device profiles (A100 / H100, 80 GB) say whether a rank's
peak fits. These are counts, with the error the count was validated to: exact on sampled batches (tests/work), the
id-law expectations within 1 %; the peak bytes are the counted ones (the CPU peak-RSS model built on them:
work_memory.py). Step time is not
drawn: the time model missed its GPU target (work_model.py), so no modeled GPU time or speedup is quoted."""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

SYSTEMS = ("ecorec", "elrec", "ttrec")
WORLD_SIZES = (8, 16, 32, 64, 128)
DEVICES = ("A100", "H100")
LOCAL_BATCH = 4096
WORKLOAD = {"preset": "meta-2022", "dim": 32}
OPTIONS = {"ranks": 32, "tt_min_rows": 0, "tt_oversize": "allow"}  # every table TT at rank 32, as the artifacts


def workload():
    from impls.data.presets import get_preset

    return get_preset(WORKLOAD["preset"], dim=WORKLOAD["dim"])


def _key(spec, t: int) -> tuple:
    tb = spec.tables[t]
    return tb.num_embeddings, tb.dim, tb.hotness


def rank_steps(system: str, spec, world: int, owned) -> list[dict]:
    """Every rank's summed work and memory: owners over the global batch, a replica (owned None) over its local one."""
    from impls.work.counts import memory, table_step

    tables = list(spec.tables)
    rep = {}  # one representative table index per distinct (rows, dim, hotness): the cache's key
    for t in range(len(tables)):
        rep.setdefault(_key(spec, t), t)
    groups = [list(range(len(tables)))] if owned is None else owned
    batch = LOCAL_BATCH if owned is None else LOCAL_BATCH * world
    out = []
    for g in groups:
        flops = stage = look = uniq = nnz = 0.0
        peak_inter = 0.0
        for t in g:
            st = table_step(system, spec, rep[_key(spec, t)], batch, OPTIONS)
            w = st.work
            flops += w.flops["fwd"] + w.flops["bwd"]
            stage += st.traffic.stage_fwd + st.traffic.stage_bwd
            look += st.traffic.pooling + st.traffic.index
            uniq += w.unique
            nnz += w.nnz
            peak_inter = max(peak_inter, w.peak_intermediate_bytes)
        mem = memory(system, [tables[t] for t in g], OPTIONS, _peak_work(peak_inter))
        out.append({"flops": flops, "stage_bytes": stage, "lookup_bytes": look, "unique": uniq, "nnz": nnz,
                    "params": mem.params, "optimizer": mem.optimizer_state, "intermediates": mem.peak_intermediates,
                    "peak": mem.params + mem.optimizer_state + mem.peak_intermediates})
    return out * world if owned is None else out


def _peak_work(peak: float):
    """A TTWork carrying only a step's peak live bytes (a rank's tables run one after another: the largest one's)."""
    from impls.core.counters import TTWork

    w = TTWork()
    w.peak_intermediate_bytes = peak
    return w


def world_counts(spec, G: int) -> dict[str, tuple[list[dict], object]]:
    """Every system's per-rank counts (rank_steps) and its Exchange on ``spec`` over ``G`` GPUs of LOCAL_BATCH."""
    from impls.data.synthetic import SyntheticSource, mean_bag
    from impls.data.zipf import expected_unique
    from impls.work.exchange import ExpectedKeys, sharding, system_exchange

    tables = list(spec.tables)
    per_rank = [LOCAL_BATCH * mean_bag(t.hotness, spec.bag_sizes) for t in tables]
    keys = ExpectedKeys.of_source(SyntheticSource(spec), [per_rank] * G)
    costs = [expected_unique(t.num_embeddings, n * G, spec.alpha) for t, n in zip(tables, per_rank)]
    out = {}
    for s in SYSTEMS:
        _, owned = sharding(s, OPTIONS, G, tables, costs)
        out[s] = (rank_steps(s, spec, G, owned), system_exchange(s, tables, OPTIONS, [LOCAL_BATCH] * G, keys,
                                                                 costs=costs))
    return out


def scale_rows() -> pd.DataFrame:
    """One row per system, world size and device: the busiest rank's counts."""
    from impls.work.timing import Device

    spec = workload()
    rows = []
    for G in WORLD_SIZES:
        for s, (ranks, ex) in world_counts(spec, G).items():
            sent, recv = ex.total_sent(), ex.total_received()
            busiest = max(range(G), key=lambda r: ranks[r]["flops"])
            top = max(range(G), key=lambda r: ranks[r]["peak"])
            for d in DEVICES:
                dev = Device.named(d)
                rows.append({"system": s, "world_size": G, "device": d, "global_batch": LOCAL_BATCH * G,
                             "max_flops": ranks[busiest]["flops"], "mean_flops": sum(r["flops"] for r in ranks) / G,
                             "max_stage_bytes": max(r["stage_bytes"] for r in ranks),
                             "max_lookup_bytes": max(r["lookup_bytes"] for r in ranks),
                             "max_unique": max(r["unique"] for r in ranks),
                             "max_peak_bytes": ranks[top]["peak"], "params": ranks[top]["params"],
                             "optimizer": ranks[top]["optimizer"], "intermediates": ranks[top]["intermediates"],
                             "fits": bool(ranks[top]["peak"] <= dev.memory_bytes),
                             "max_sent_bytes": float(sent.max()), "max_received_bytes": float(recv.max())})
    return pd.DataFrame(rows)


def whole_model_seconds() -> float:
    """Seconds the whole model takes for 128 GPUs and 510 tables (EMBark's T510 workload): the three TT systems'
    counts and exchanges, and EMBark's plan with its exchange and lookups (issue 74's budget: under 10 s)."""
    from impls.work import counts

    t0 = time.perf_counter()
    counts._table_step.cache_clear()
    from impls.data.presets import get_preset

    world_counts(get_preset("embark-t510"), 128)
    embark_rows({"T510": "embark-t510"}, {"H100": "dgx-h100"})
    return time.perf_counter() - t0


RATIOS = (("elrec", "ecorec"), ("ttrec", "ecorec"))


def ratios(points: pd.DataFrame) -> pd.DataFrame:
    """Per world size: EL-Rec's and TT-Rec's busiest-rank FLOPs and bytes over EcoRec's, and EcoRec's memory saving
    against EL-Rec (the 38.5 % claim's quantity: peak bytes per GPU)."""
    p = points[points["device"] == DEVICES[0]].set_index(["system", "world_size"])
    out = []
    for G in WORLD_SIZES:
        row = {"world_size": G}
        for num, den in RATIOS:
            for col in ("max_flops", "max_stage_bytes", "max_sent_bytes"):
                row[f"{num}_over_{den}_{col}"] = p.loc[(num, G), col] / p.loc[(den, G), col]
        row["ecorec_memory_saving_vs_elrec"] = 1 - p.loc[("ecorec", G), "max_peak_bytes"] / p.loc[("elrec", G),
                                                                                               "max_peak_bytes"]
        out.append(row)
    return pd.DataFrame(out)


def write(out: Path, root: Path | None = None, machine: str | None = None) -> dict[str, Path]:
    """The scale points, their ratios and EMBark's plans (CSV), and the whole model's run time (JSON)."""
    import json

    from reproduce.harness.machine import this_machine

    points = scale_rows()
    paths = {"scale_points": out / "scale_points.csv", "scale_ratios": out / "scale_ratios.csv",
             "embark_plans": out / "embark_plans.csv", "scale": out / "scale.json"}
    points.to_csv(paths["scale_points"], index=False, float_format="%.6g")
    ratios(points).to_csv(paths["scale_ratios"], index=False, float_format="%.6g")
    embark_rows().to_csv(paths["embark_plans"], index=False, float_format="%.6g")
    paths["scale"].write_text(json.dumps({"whole_model_s": whole_model_seconds(), "gpus": 128, "tables": 510,
                                          "machine": this_machine()}, indent=1) + "\n")
    return paths


def draw(out: Path, figures: Path, machine: str | None = None) -> list[Path]:
    """Per GPU at 8-128 GPUs: the busiest rank's peak memory (against the devices' 80 GB), its FLOPs and the bytes it
    sends per step, each system; modeled counts, no time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = pd.read_csv(out / "scale_points.csv")
    p = p[p["device"] == DEVICES[0]]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    for ax, col, label in zip(axes, ("max_peak_bytes", "max_flops", "max_sent_bytes"),
                              ("peak memory per GPU (GB)", "FLOPs per step, busiest GPU (G)",
                               "bytes sent per step, busiest GPU (GB)")):
        for s, g in p.groupby("system"):
            ax.plot(g["world_size"], g[col] / 1e9, marker="o", label=s)
        ax.set(xscale="log", yscale="log", xlabel="GPUs (4,096 samples each)", ylabel=label)
        ax.set_xticks(list(WORLD_SIZES), [str(w) for w in WORLD_SIZES])
    axes[0].axhline(80, color="grey", lw=0.8, ls="--")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"work model, modeled counts at scale ({WORKLOAD['preset']} preset, D = {WORKLOAD['dim']}, TT rank 32)"
                 f"; no time: the GPU time model is not validated", fontsize=9)
    fig.tight_layout()
    from reproduce.analysis.plots.style import save

    return save(fig, figures, "scale_work")


def table(out: Path, machine: str | None = None) -> list[str]:
    if not (out / "scale_ratios.csv").exists():
        return []
    r = pd.read_csv(out / "scale_ratios.csv")
    p = pd.read_csv(out / "scale_points.csv")
    lines = [f"At the paper's scale (modeled counts; {WORKLOAD['preset']} preset at D = {WORKLOAD['dim']}, "
             f"{LOCAL_BATCH:,} samples per GPU; the busiest GPU of each system):", "",
             "| GPUs | EL-Rec / EcoRec FLOPs | TT-Rec / EcoRec FLOPs | EL-Rec / EcoRec bytes sent | "
             "EcoRec peak memory per GPU (GB) | EL-Rec (GB) | EcoRec's saving vs EL-Rec |", "|---|---|---|---|---|---|---|"]
    q = p[p["device"] == DEVICES[0]].set_index(["system", "world_size"])
    for _, x in r.iterrows():
        G = int(x["world_size"])
        lines.append(f"| {G} | {x['elrec_over_ecorec_max_flops']:.2f} | {x['ttrec_over_ecorec_max_flops']:.2f} | "
                     f"{x['elrec_over_ecorec_max_sent_bytes']:.2f} | {q.loc[('ecorec', G), 'max_peak_bytes'] / 1e9:.2f}"
                     f" | {q.loc[('elrec', G), 'max_peak_bytes'] / 1e9:.2f} | "
                     f"{x['ecorec_memory_saving_vs_elrec']:.1%} |")
    if (out / "embark_plans.csv").exists():
        e = pd.read_csv(out / "embark_plans.csv")
        lines += ["", f"EMBark at {EMBARK_GPUS} GPUs ({EMBARK_LOCAL_BATCH:,} samples each): its planner on HugeCTR's cost "
                  "model (the calibrated search needs a profile measured on the GPU; none exists) against round_robin, "
                  "the plan its calibrated search chose on this project's CPU ranks. Lookups and bytes are the work "
                  "layer's counts for the busiest GPU; the cost model's step is HugeCTR's, never validated.", "",
                  "| workload | profile | planner's plan (DP / UB / RB tables, hierarchical) | is round_robin | "
                  "lookups, planner / round_robin (M) | bytes sent, planner / round_robin (GB) | "
                  "cost-model ms, planner / round_robin |", "|---|---|---|---|---|---|---|"]
        for _, x in e.iterrows():
            lines.append(f"| {x['workload']} | {x['device']} | {x['dp']} / {x['ub']} / {x['rb']}"
                         f"{', hierarchical' if x['hierarchical'] else ''} | {'yes' if x['plan_is_round_robin'] else 'no'}"
                         f" | {x['planner_max_lookups'] / 1e6:.1f} / {x['round_robin_max_lookups'] / 1e6:.1f} | "
                         f"{x['planner_max_sent_bytes'] / 1e9:.2f} / {x['round_robin_max_sent_bytes'] / 1e9:.2f} | "
                         f"{x['planner_cost_model_ms']:.1f} / {x['round_robin_cost_model_ms']:.1f} |")
    if (out / "scale.json").exists():
        import json

        j = json.loads((out / "scale.json").read_text())
        lines += ["", f"The whole model for {j['gpus']} GPUs and {j['tables']} tables (three TT systems and EMBark's "
                  f"plan) ran in {j['whole_model_s']:.1f} s on {j['machine']}."]
    return lines


EMBARK_WORKLOADS = {"DLRM-DCNv2": "dcnv2-multihot", "T180": "embark-t180", "T200": "embark-t200",
                    "T510": "embark-t510"}
EMBARK_GPUS = 128
EMBARK_HARDWARE = {"A100": "dgx-a100", "H100": "dgx-h100"}
EMBARK_LOCAL_BATCH = 8192  # recsys24_model's (EMBark's benchmarks)


def embark_rows(workloads: dict | None = None, hardware: dict | None = None) -> pd.DataFrame:
    """EMBark at 128 GPUs on each GPU profile: the plan its planner makes (HugeCTR's cost model: the calibrated search
    needs a profile measured on the machine, and no GPU profile exists) against round_robin, the plan the calibrated
    search chose on this project's CPU ranks; per plan its clusters, the busiest GPU's lookups and bytes sent from
    the work layer (expected under each workload's own law) and HugeCTR's cost-model step (never validated)."""
    from impls.data.presets import get_preset
    from impls.data.synthetic import SyntheticSource, mean_bag
    from impls.embark.cost import evaluate
    from impls.embark.planning import cost_model, plan_for
    from impls.work.exchange import Exchange, ExpectedKeys, embark, embark_lookups, rank_sizes

    rows = []
    G = EMBARK_GPUS
    for name, preset in (workloads or EMBARK_WORKLOADS).items():
        spec = get_preset(preset)
        tables = list(spec.tables)
        src = SyntheticSource(spec)
        keys = ExpectedKeys.of_source(src, [[EMBARK_LOCAL_BATCH * mean_bag(t.hotness, spec.bag_sizes)
                                             for t in tables]] * G)
        for dev, hw in (hardware or EMBARK_HARDWARE).items():
            model = cost_model(hw, G, None, EMBARK_LOCAL_BATCH * G)
            plan, secs = plan_for(tables, model, "embark", "hugectr")
            rr, _ = plan_for(tables, model, "round_robin", "hugectr")
            row = {"workload": name, "device": dev, "hw": hw, "gpus": G, "local_batch": EMBARK_LOCAL_BATCH,
                   "planning_s": secs, "plan_is_round_robin": (plan.dp, plan.mp, plan.hierarchical)
                   == (rr.dp, rr.mp, rr.hierarchical), "hierarchical": plan.hierarchical, "dp": len(plan.dp),
                   "ub": sum(p.cluster == "ub" for p in plan.mp), "rb": sum(p.cluster == "rb" for p in plan.mp)}
            for label, p in (("planner", plan), ("round_robin", rr)):
                ex = Exchange(G)
                embark(ex, tables, p, rank_sizes(EMBARK_LOCAL_BATCH * G, G), keys)
                row[f"{label}_max_lookups"] = max(embark_lookups(tables, p, keys))
                row[f"{label}_max_sent_bytes"] = float(ex.total_sent().max())
                row[f"{label}_cost_model_ms"] = evaluate(p, tables, model).step_s * 1e3
            rows.append(row)
    return pd.DataFrame(rows)
