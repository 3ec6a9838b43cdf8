"""The modeled part of `dlrmbench reproduce recsys24` (`dlrmbench model recsys24`): EMBark's planner and table_row_wise for the four workloads at
8-128 GPUs with the DGX-H100 profile (local batch 8192 per GPU), the predicted embedding step of each and the
speedup (also with every table in the RB cluster on both sides, the part HugeCTR's own cost model covers: the DP and
UB cluster costs are this project's terms), written to results/recsys24_model/modeled.csv (with the planning times; model.json: its code) and drawn to
figures/recsys24_model/modeled_speedup.png. A model: every number here is predicted, none measured."""
from __future__ import annotations

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
    from impls.embark.cost import evaluate
    from impls.embark.planner import make_plan
    from impls.embark.planning import cost_model, plan_for

    rows = []
    for name, preset in WORKLOADS.items():
        tables = get_preset(preset).tables
        for G in GPUS:
            model = cost_model(hw, G, None, local_batch * G)
            plan, secs = plan_for(tables, model, "embark", "hugectr")
            base, _ = plan_for(tables, model, "table_row_wise", "hugectr")
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


def write(root: Path) -> tuple[pd.DataFrame, Path]:
    """Model every workload and world, write results/recsys24_model/modeled.csv under ``root``."""
    out = Path(root) / "results" / "recsys24_model"
    out.mkdir(parents=True, exist_ok=True)
    df = pd.DataFrame(model_rows())
    df.to_csv(out / "modeled.csv", index=False)
    write_model_meta(out)
    return df, out / "modeled.csv"


def write_model_meta(out: Path) -> Path:
    """model.json: the commit and the model's code fingerprint, so a report can tell when modeled.csv no longer
    describes the code (analysis/freshness.py)."""
    from reproduce.analysis.model_code import model_fingerprint
    from reproduce.harness.environment import code_dirty, git_sha
    from reproduce.harness.record_store import write_json

    return write_json(out / "model.json", {"git_sha": git_sha(), "git_dirty": code_dirty(),
                                           "code": model_fingerprint(MODULE)})


MODULE = "reproduce.analysis.recsys24_model"


def draw(root: Path) -> list[Path]:
    """figures/recsys24_model from the written modeled.csv."""
    from reproduce.analysis.plots.recsys24 import modeled

    return modeled(pd.read_csv(Path(root) / "results" / "recsys24_model" / "modeled.csv"),
                   Path(root) / "figures" / "recsys24_model")
