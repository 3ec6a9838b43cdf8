"""The modeled part of `make reproduce-recsys24`: EMBark's planner and table_row_wise for the four workloads at
8-128 GPUs with the DGX-H100 profile (local batch 8192 per GPU), the predicted embedding step of each and the
speedup (also with every table in the RB cluster on both sides, the part HugeCTR's own cost model covers: the DP and
UB cluster costs are this project's terms), written to results/recsys24_model/modeled.csv (with the planning times) and drawn to
figures/recsys24_model/modeled_speedup.png. A model: every number here is predicted, none measured."""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

WORKLOADS = {"DLRM-DCNv2": "dcnv2-multihot", "T180": "embark-t180", "T200": "embark-t200", "T510": "embark-t510"}
GPUS = (8, 16, 32, 64, 128)


def comm_share(ev) -> float:
    """Communication's share of the busiest bucket's modeled embedding step (the step excludes the MLPs)."""
    worst = max(range(len(ev.comp)), key=lambda i: ev.comp[i] + ev.comm[i])
    return ev.comm[worst] / (ev.comp[worst] + ev.comm[worst] + ev.shared)


def model_rows(hw: str = "dgx-h100", local_batch: int = 8192) -> list[dict]:
    from impls.data.presets import get_preset
    from impls.embark.cost import HARDWARE, CostModel, evaluate
    from impls.embark.planner import make_plan

    profile = HARDWARE[hw]
    rows = []
    for name, preset in WORKLOADS.items():
        tables = get_preset(preset).tables
        for G in GPUS:
            model = CostModel(profile, G, profile.gpus_per_node, local_batch * G)
            plan, secs = make_plan(tables, model, "embark")
            base, _ = make_plan(tables, model, "table_row_wise")
            rb_only, _ = make_plan(tables, model, "embark", clusters=False)  # every table RB, as HugeCTR models
            ev, eb, er = evaluate(plan, tables, model), evaluate(base, tables, model), evaluate(rb_only, tables, model)
            rows.append({"workload": name, "gpus": G, "hw": hw, "local_batch": local_batch,
                         "planner_ms": ev.step_s * 1e3, "table_row_wise_ms": eb.step_s * 1e3,
                         "speedup": eb.step_s / ev.step_s, "planner_rb_ms": er.step_s * 1e3,
                         "speedup_rb": eb.step_s / er.step_s, "planning_s": secs, "hierarchical": plan.hierarchical,
                         "dp": len(plan.dp), "ub": sum(p.cluster == "ub" for p in plan.mp),
                         "rb": sum(p.cluster == "rb" for p in plan.mp), "planner_oom": ev.oom,
                         "baseline_oom": eb.oom, "planner_comm_share": comm_share(ev),
                         "table_row_wise_comm_share": comm_share(eb)})
    return rows


def main(argv: list[str] | None = None) -> int:
    import argparse

    from reproduce.analysis.plots.recsys24 import modeled

    ap = argparse.ArgumentParser(description="EMBark planner vs table_row_wise at 8-128 GPUs (cost model)")
    ap.add_argument("root", nargs="?", default=".", help="results/ and figures/ are under it")
    ap.add_argument("--plot-only", action="store_true", help="redraw from results/recsys24_model/modeled.csv")
    args = ap.parse_args(argv)
    out = Path(args.root) / "results" / "recsys24_model"
    if args.plot_only:
        df = pd.read_csv(out / "modeled.csv")
    else:
        out.mkdir(parents=True, exist_ok=True)
        df = pd.DataFrame(model_rows())
        df.to_csv(out / "modeled.csv", index=False)
        print(df.to_string(index=False))
        print(f"average speedup {df['speedup'].mean():.2f}x, max {df['speedup'].max():.2f}x (modeled)")
    for p in modeled(df, Path(args.root) / "figures" / "recsys24_model"):
        print(f"figure: {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
