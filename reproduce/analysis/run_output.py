"""What `run` and `train` print from their records, and what the report shows of a training run: the comparison
table, what each TT system compressed (tt_lines), each trained system's held-out quality (quality_lines), and a
training run's output drawn from its committed record (train_output)."""
from __future__ import annotations

from rich.markup import escape
from rich.table import Table


def _fmt(x, spec=".2f", scale=1.0) -> str:
    return "–" if x is None or x != x else format(x / scale, spec)


def _bytes(x) -> str:
    """Bytes with 3 significant digits in the unit that fits (79,232 -> 77.4 KiB)."""
    if x is None or x != x:
        return "–"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(x) < 1024 or unit == "TiB":
            return f"{x:.3g} {unit}"
        x /= 1024
    return "–"


SAVES_LITTLE = 1.5  # a TT table with fewer than this many times fewer bytes than its dense table saves little


def tt_lines(records) -> list[str]:
    """What each TT system compressed: its TT tables with their compression against dense, how many stayed plain,
    and a warning for a TT table larger than its dense one, for TT tables that save little (under SAVES_LITTLE x)
    and for a TT system that compressed nothing."""
    lines, seen = [], set()
    for rec in records:
        extra = (rec.body.work or {}).get("extra") or {}
        impl = rec.point["impl"]
        if "tt_tables" not in extra or impl in seen:
            continue
        seen.add(impl)
        tt, plain = extra["tt_tables"], extra.get("dense_tables", 0)
        if not tt:
            lines.append(f"[yellow]{impl}: no table is TT[/]: all {plain} train as plain (dense) tables, none reaching "
                         f"tt_min_rows (default 10,000 rows); -o tt_min_rows=N or -o tt_tables=NAME,... makes some TT")
            continue
        shown = ", ".join(f"{name} {ratio:.3g}x" for name, ratio in list(tt.items())[:8]) + (
            f" and {len(tt) - 8} more" if len(tt) > 8 else "")
        lines.append(f"{impl}: {len(tt)} TT table(s), dense bytes / TT bytes: {shown}; {plain} plain")
        refitted = extra.get("tt_refitted") or {}
        capped = [f"{name} {max(asked)}->{max(got)}" for name, (asked, got) in refitted.items() if got]
        if capped:
            lines.append(f"{impl}: rank capped so that the TT cores fit in the dense table's bytes (tt_oversize=shrink; "
                         f"=refuse raises instead): {', '.join(capped[:8])}" + (f" and {len(capped) - 8} more"
                                                                               if len(capped) > 8 else ""))
        kept = [name for name, (_, got) in refitted.items() if not got]
        if kept:
            lines.append(f"{impl}: kept plain, their TT cores outweigh the dense table even at rank 1: "
                         f"{', '.join(kept[:8])}" + (f" and {len(kept) - 8} more" if len(kept) > 8 else ""))
        little = [f"{name} {ratio:.3g}x" for name, ratio in tt.items() if 1 <= ratio < SAVES_LITTLE]
        if little:
            lines.append(f"[yellow]{impl}: TT saves little or nothing on {', '.join(little[:8])}"
                         + (f" and {len(little) - 8} more" if len(little) > 8 else "")
                         + f"[/] (under {SAVES_LITTLE:g}x fewer bytes than dense): those tables pay TT's cost in "
                         "quality and time for almost no memory; -o tt_min_rows=N keeps tables under N rows plain")
        larger = [name for name, ratio in tt.items() if ratio < 1]
        if larger:
            lines.append(f"[yellow]{impl}: the TT cores of {', '.join(larger[:8])} are larger than the dense "
                         f"table[/] (tt_oversize=allow builds them as asked): lower -o ranks or raise -o tt_min_rows")
    return lines


BUDGET_RULES_DIFFER = 1.1  # systems under one `budget` whose parameter bytes differ by more than this factor


def budget_lines(records) -> list[str]:
    """A word when systems run under one ``budget`` option hold parameter bytes that differ by more than
    BUDGET_RULES_DIFFER: each sizes to the budget by its own rule (which tables count, what a method holds at least),
    so the comparison is not at equal bytes; each system's bytes and share of the dense tables are named."""
    by_budget: dict[float, dict[str, float]] = {}
    for rec in records:
        budget = (rec.point.get("impl_options") or {}).get("budget")
        dense = (rec.body.tables or {}).get("dense_bytes")
        params = ((rec.body.memory or {}).get("analytic") or {}).get("params")  # its report: no optimizer state
        if budget is None or not dense or not params:
            continue
        by_budget.setdefault(float(budget), {})[rec.point["impl"]] = params
    lines = []
    for budget, held in by_budget.items():
        if len(held) < 2 or max(held.values()) <= BUDGET_RULES_DIFFER * min(held.values()):
            continue
        dense = next(r.body.tables["dense_bytes"] for r in records
                     if (r.point.get("impl_options") or {}).get("budget") == budget and r.body.tables)
        said = ", ".join(f"{impl} {_bytes(b)} ({b / dense:.3g} of the dense bytes)" for impl, b in held.items())
        lines.append(f"[yellow]warning:[/] budget {budget:g} is sized by each system's own rule, and they hold "
                     f"different bytes: {said}; compare them at equal bytes with -o IMPL.budget=... per system")
    return lines


def quality_lines(records) -> list[str]:
    """Per trained system: held-out AUC / log loss at the last evaluation and at the best one (which epoch; with the
    best weights put back by early stop, the best is the result and the last is said beside it), the base-rate log
    loss beside them, and a warning when the held-out log loss rose at the last 2 evaluations or ends
    above the base rate (the model overfits, or learned nothing)."""
    lines, seen = [], set()
    for rec in records:
        impl, curve, last = rec.point["impl"], rec.body.eval_curve or [], rec.body.eval
        if not last or impl in seen:
            continue
        seen.add(impl)
        best = (rec.body.train or {}).get("best") or min(curve, key=lambda c: c["logloss"], default=None)
        at = f" (epoch {curve[-1]['epoch']:.2f})" if curve and "epoch" in curve[-1] else ""
        restored = (rec.body.train or {}).get("restored") is not None and bool(curve)
        if restored:  # the result is the best evaluation, its weights put back
            final = curve[-1]
            text = (f"{impl}: held-out AUC {best['auc']:.4f}, log loss {best['logloss']:.4f} at the best evaluation "
                    f"(epoch {best['epoch']:.2f}), whose weights --early-stop put back; the last evaluation: log loss "
                    f"{final['logloss']:.4f} (AUC {final['auc']:.4f}) at epoch {final['epoch']:.2f}")
        else:
            text = f"{impl}: held-out AUC {last['auc']:.4f}, log loss {last['logloss']:.4f} at the last evaluation{at}"
            if best and curve and best.get("step") != curve[-1].get("step"):
                text += f"; best log loss {best['logloss']:.4f} (AUC {best['auc']:.4f}) at epoch {best['epoch']:.2f}"
        base = last.get("base_logloss")
        if base is not None:
            text += f"; base-rate log loss {base:.4f}"
        lines.append(text)
        losses = [c["logloss"] for c in curve]
        if not restored and len(losses) >= 3 and losses[-1] > losses[-2] > losses[-3]:
            lines.append(f"[yellow]{impl}: the held-out log loss rose at the last 2 evaluations[/]: it overfits "
                         f"(fewer --epochs, or --early-stop 1 to stop at the best)")
        if base is not None and last["logloss"] > base:
            lines.append(f"[yellow]{impl}: its held-out log loss is worse than predicting the base rate[/]")
    return lines


def _ci(r, col: str) -> str:
    lo, hi = r.get(f"{col}_lo"), r.get(f"{col}_hi")
    if r.get("repeats", 1) < 2 or lo is None or lo != lo:
        return ""
    return f" [{lo:.2f}, {hi:.2f}]"


def comparison_table(df, command: str = "run") -> Table:
    import pandas as pd

    from reproduce.analysis.stats import paired_interval_name

    n = int(df["runs"].max()) if "runs" in df and len(df) else 1
    held = "; AUC / log loss: held-out, at the last evaluation" if "auc" in df.columns else ""
    t = Table(title=f"dlrmbench {command} (medians over timed iterations" + (
        f", then over {n} interleaved rounds; speedup: within each round, Hodges-Lehmann over rounds; "
        f"\\[{paired_interval_name(n)}]"
        if n > 1 else "; one run each: no interval")
        + held + ")")
    quality = [c for c in ("syncs_per_step", "epochs", "auc", "logloss") if c in df.columns]
    cols = ["impl", "status", "fwd ms", "bwd ms", "update ms", "total ms", "samples/s", "peak RSS Δ MiB",
            "analytic MiB", "params", "speedup"] + [{"auc": "AUC", "logloss": "log loss", "syncs_per_step": "syncs/step"}.get(c, c)
                                                   for c in quality]
    for col in cols:
        t.add_column(col, justify="left" if col in ("impl", "status") else "right")
    for _, r in df.iterrows():
        timed = pd.notna(r.get("total_ms"))  # ok runs, and diverged runs that had timed steps
        if not timed:
            t.add_row(r["impl"], escape(f"{r['status']}: {r['reason']}"), *["–"] * (len(cols) - 2))
            continue
        status = "ok" if r["status"] == "ok" else escape(f"{r['status']}: {r['reason']}")
        row = [
            r["impl"], status, _fmt(r["forward_ms"]), _fmt(r["backward_ms"]), _fmt(r["update_ms"]),
            _fmt(r["total_ms"]) + _ci(r, "total_ms"), _fmt(r["samples_per_s"], ",.0f"), _fmt(r["peak_rss_delta_bytes"], ",.0f", 2**20),
            _fmt(r["analytic_bytes"], ",.0f", 2**20), _bytes(r["param_bytes"]), _fmt(r["speedup"], ".2f") + "×" + _ci(r, "speedup"),
        ]
        spec = {"epochs": ".2f", "syncs_per_step": ".0f"}
        t.add_row(*row, *(_fmt(r.get(c), spec.get(c, ".4f")) for c in quality))
    return t


def held_out_postfix(held: dict | None) -> str:
    """A held-out evaluation beside an epoch's bar ("" before the first)."""
    if not held or held.get("logloss") is None:
        return ""
    auc = "–" if held.get("auc") is None else f"{held['auc']:.4f}"
    base = "" if held.get("base_logloss") is None else f" (base rate {held['base_logloss']:.4f})"
    return f"held-out AUC {auc}, log loss {held['logloss']:.4f}{base}"


def epoch_bar_desc(impl: str, epoch: int, epochs: int) -> str:
    """What an epoch's bar is called."""
    return f"  {impl} epoch {epoch}/{epochs}"


def epoch_bar_line(impl: str, epoch: int, epochs: int, steps: int, elapsed_s: float, held: dict | None) -> str:
    """The line a training run's bar for ``epoch`` ends on (reproduce/cli/epoch_bars.py draws it live)."""
    from tqdm import tqdm

    return tqdm.format_meter(steps, steps, elapsed_s, ncols=150, prefix=epoch_bar_desc(impl, epoch, epochs),
                             unit="step", postfix=held_out_postfix(held) or None)


def train_output(records, command: str, data: str) -> list[str]:
    """What `dlrmbench train` prints for ``records`` (one per system, trained with evaluations after every epoch), as
    text: ``command``, each system's start line (naming ``data``) and epoch bars at their end (the held-out evaluation beside each; the
    elapsed time is the epoch's steps at the record's median step time), then the table and the lines under it."""
    import io

    from rich.console import Console

    from reproduce.analysis.aggregate import summarize

    con = Console(file=io.StringIO(), width=180, record=True, color_system=None, soft_wrap=True)
    con.print(f"$ {command}", markup=False)
    for rec in records:
        p, info = rec.point, rec.body.train or {}
        steps, epochs = int(info.get("steps_per_epoch", 0)), int(p.get("epochs", 1))
        con.print(f"{p['impl']} training {epochs} epoch(s) {data}, batch {p['batch_size']} …", markup=False)
        step_s = (rec.total_ms or 0.0) / 1e3
        for c in rec.body.eval_curve or []:
            con.print(epoch_bar_line(p["impl"], round(c["epoch"]), epochs, steps, steps * step_s, c), markup=False,
                      highlight=False)
    con.print(comparison_table(summarize(records, baseline=records[0].point["impl"]), "train"))
    for line in [*tt_lines(records), *quality_lines(records)]:
        con.print(line)
    return con.export_text().rstrip().splitlines()
