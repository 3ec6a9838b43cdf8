"""The one figure style, and saving to PNG + PDF."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

from impls.data.safe_write import refuse_symlink


def setup() -> None:
    sns.set_theme(context="paper", style="whitegrid", palette="colorblind", font_scale=1.1)


def save(fig: "plt.Figure", out_dir: Path, stem: str) -> list[Path]:
    """PNG + PDF of ``fig``; a caption that promises whiskers the figure does not draw (or whiskers no caption
    explains) is refused."""
    check_caption(fig, stem)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [refuse_symlink(out_dir / f"{stem}.png", "a figure"), refuse_symlink(out_dir / f"{stem}.pdf", "a figure")]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight", metadata={"Software": None})
    fig.savefig(paths[1], bbox_inches="tight", metadata={"CreationDate": None, "Producer": None})
    plt.close(fig)
    return paths


def footnote(df, fig) -> None:
    """Name the implementations that have no measured bar, and why (skipped / failed)."""
    missing = df[df["status"] != "ok"].groupby("status")["impl"].unique()
    notes = [f"{status}: {', '.join(sorted(impls))}" for status, impls in missing.items()]
    if notes:
        fig.text(0.01, -0.02, "no bar — " + "; ".join(notes), fontsize=8, ha="left", va="top")


def runs(df):
    """The `ok` runs (repeats.csv) behind a summary, the A/A twin's left out, or None when it has none."""
    from reproduce.analysis.aggregate import without_twins

    reps = getattr(df.attrs.get("runs"), "frame", None)
    if reps is None or reps.empty:
        return None
    return without_twins(reps[reps["status"] == "ok"])


def totals(g, runs) -> dict:
    """label -> round -> the total_ms of that point's run in the round (round 0: its summary median when there are
    no runs)."""
    from reproduce.analysis.stats import by_round

    return {lab: (by_round(runs[runs["point_id"] == pid], "total_ms") if runs is not None else {0: t})
            for lab, pid, t in zip(g["label"], g["point_id"], g["total_ms"])}


def paired_speedups(totals_: dict, over: str, of: str) -> tuple[float, float, float]:
    """totals[over] / totals[of] paired by round (stats.paired_ratio): value, lo, hi."""
    from reproduce.analysis.stats import paired_ratio

    return paired_ratio(totals_[over], totals_[of])[:3]


def commits(df) -> str:
    """Every commit the figure's runs were measured at (from the runs behind the summary, else summary.csv's
    git_sha): up to three by name, more by their count and where REPORT.md lists them."""
    reps = getattr(df.attrs.get("runs"), "frame", None)
    src = reps if reps is not None and "git_sha" in reps and reps["git_sha"].notna().any() else df
    if "git_sha" not in src or src["git_sha"].dropna().empty:
        return "commit unknown"
    counts = src["git_sha"].dropna().astype(str).str[:7].value_counts()
    if len(counts) == 1:
        return f"commit {counts.index[0]}"
    if len(counts) <= 3:
        return "commits " + ", ".join(f"{sha} ({n} runs)" for sha, n in counts.items())
    return f"{len(counts)} commits (results/REPORT.md lists them)"


def caption(df, *, whiskers: bool, paired: bool = False) -> str:
    """Machine, commit, repeats and what the whiskers are, for a figure of measured medians (``paired``: of ratios
    paired by round, their Hodges-Lehmann estimates); ``whiskers``: whether the figure draws them
    (tests/reproduce/test_figure_captions.py holds every figure to it)."""
    from reproduce.analysis.stats import interval_name, paired_interval_name

    machine = df["machine"].dropna().iloc[0] if "machine" in df and df["machine"].notna().any() else None
    reps = df["repeats"].dropna().astype(int) if "repeats" in df else None
    if reps is None or reps.empty:
        n = "runs per point unknown"
    else:
        n = ("1 run" if reps.max() == 1 else f"{reps.min()} repeats" if reps.min() == reps.max()
             else f"{reps.min()}-{reps.max()} repeats") + " per point"
    if not whiskers:
        what = "medians over the repeats, no whiskers drawn"
    elif reps is None or reps.empty or reps.max() <= 1:
        what = "one run per point: no interval"
    else:
        named = whisker_names(sorted({int(r) for r in reps}), paired_interval_name if paired else interval_name)
        what = f"ratios paired by round, whiskers: {named}" if paired else f"medians, whiskers: {named}"
    return f"machine {machine or '?'}; {commits(df)}; {n}; {what}{oversubscribed(df)}"


def whisker_names(rounds: list[int], name) -> str:
    """What the whiskers of points over the round counts ``rounds`` are (``name``: stats' name of one count's
    interval): one name when every point has as many rounds; else each distinct name with the round counts it
    covers, so a figure over 3-7 rounds says which of its intervals are 95 % CIs and which are ranges."""
    if len({name(r) for r in rounds}) == 1:
        return name(rounds[0])
    by_kind: dict[str, list[int]] = {}  # the name without its round count: counts of one kind share it
    for r in rounds:
        by_kind.setdefault(name(r).replace(f" over {r} rounds", "").replace(f" of {r} rounds", ""), []).append(r)
    return "; ".join(f"{n} (points of {_counts(rs)} rounds)" for n, rs in by_kind.items())


def _counts(rs: list[int]) -> str:
    return str(rs[0]) if len(rs) == 1 else ", ".join(map(str, rs[:-1])) + f" or {rs[-1]}"


def oversubscribed(df) -> str:
    """The flag of a figure with oversubscribed points (more ranks x threads than cores): which world sizes."""
    if "oversubscribed" not in df:
        return ""
    over = df[df["oversubscribed"].fillna(False).astype(bool)]
    if over.empty:
        return ""
    worlds = sorted({int(w) for w in over["world_size"].dropna()}) if "world_size" in over else []
    at = f" at {', '.join(map(str, worlds))} ranks" if worlds else ""
    return f"; oversubscribed{at} (*: ranks × threads > cores: contention, never a headline)"


def whiskers_xy(ax, data, x: str, y: str, lo: str, hi: str) -> None:
    """Vertical error bars [lo, hi] at each point (x, y) of a scatter or line plot."""
    if lo not in data or hi not in data:
        return
    ok = data[data[lo].notna() & data[hi].notna() & (data[lo] < data[hi])]  # one run: no interval to draw
    if ok.empty:
        return
    ax.errorbar(ok[x], ok[y], yerr=[ok[y] - ok[lo], ok[hi] - ok[y]], fmt="none", ecolor="0.3", elinewidth=0.8,
                capsize=2, zorder=0)


def whiskers(ax, data, x: str, y: str, lo: str, hi: str, scale: float = 1.0) -> None:
    """Error bars [lo, hi] on a seaborn bar plot whose bars show ``data[y]``: each bar is matched to its row by the
    x category under it and its height."""
    import numpy as np

    if lo not in data or hi not in data:
        return
    ticks = [(t, lab.get_text()) for t, lab in zip(ax.get_xticks(), ax.get_xticklabels())]
    for cont in ax.containers:
        for p in getattr(cont, "patches", []):
            h, mid = p.get_height(), p.get_x() + p.get_width() / 2
            if not ticks or h != h:
                continue
            cat = min(ticks, key=lambda t: abs(t[0] - mid))[1]
            m = data[(data[x].astype(str) == cat) & np.isclose(data[y] / scale, h, rtol=1e-9, atol=0)]
            if len(m) and m[lo].notna().iloc[0] and m[lo].iloc[0] < m[hi].iloc[0]:
                low, high = m[lo].iloc[0] / scale, m[hi].iloc[0] / scale
                ax.errorbar(mid, h, yerr=[[max(h - low, 0)], [max(high - h, 0)]], fmt="none", ecolor="black",
                            elinewidth=0.8, capsize=2)


def claim(claim_id: str) -> dict:
    """A claim of reproduce/analysis/claims.toml by id."""
    import tomllib

    doc = tomllib.loads((Path(__file__).resolve().parents[1] / "claims.toml").read_text())
    for c in doc["claim"]:
        if c["id"] == claim_id:
            return c
    raise ValueError(f"no claim {claim_id!r} in claims.toml")


def paper_line(ax, claim_id: str, text: str, x: float = 0.01) -> bool:
    """The paper's value of a claim as a reference line, labelled at ``x`` (a fraction of the axis width), only
    where the claim's verdict calls our measurement comparable (claims.toml); whether it was drawn."""
    c = claim(claim_id)
    if not c.get("comparable", False):
        return False
    value = c["paper_value"]
    ax.axhline(value, color="tab:red", lw=1.0, ls=":")
    ax.annotate(f"paper: {text}", xy=(x, value), xycoords=("axes fraction", "data"), color="tab:red",
                fontsize=7, va="bottom")
    return True


def caption_text(fig) -> str:
    """The figure's suptitle and axis titles."""
    parts = [fig._suptitle.get_text()] if fig._suptitle is not None else []
    return " ".join(parts + [ax.get_title() for ax in fig.axes])


def check_caption(fig, stem: str) -> None:
    promised, drawn = "whiskers:" in caption_text(fig), has_whiskers(fig)
    if promised != drawn:
        raise ValueError(f"figure {stem}: its caption {'promises' if promised else 'does not explain'} whiskers "
                         f"it {'does not draw' if promised else 'draws'}")


def has_whiskers(fig) -> bool:
    """Whether any axis of ``fig`` draws error bars."""
    from matplotlib.container import ErrorbarContainer

    return any(isinstance(c, ErrorbarContainer) for ax in fig.axes for c in ax.containers)


def hardware(df) -> str:
    devs = df.get("device")
    if devs is None or devs.dropna().empty:
        return ""
    threads = df["threads"].dropna()
    n = int(threads.iloc[0]) if not threads.empty else 0
    t = f", {n} thread{'s' if n > 1 else ''}" + (" per rank" if "world_size" in df and (df["world_size"] != 1).any() else "") if n else ""
    return f"{devs.dropna().iloc[0]}{t}"


def legend_on_last(ax, row) -> None:
    """One legend per row of axes: outside the last axis, removed from the others."""
    import seaborn as sns

    if ax.get_legend() is None:
        return
    if ax is row[-1]:
        sns.move_legend(ax, "upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    else:
        ax.get_legend().remove()
