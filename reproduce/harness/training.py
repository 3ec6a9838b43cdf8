"""The two step loops a worker runs, and held-out scoring.

``bench_loop``: the benchmark - warm-up, then timed steps cycling a few pre-built batches (a speed measurement).
``train_loop``: a training run (``epochs`` > 0) - passes over the whole training split in shuffled whole batches,
AUC and log loss on the whole held-out split every ``eval_every`` steps and at the end, early stop on the eval log
loss. Both time the forward / backward / update phases of every step after the warm-up, and both stop at the
first NaN / inf loss, or at a loss that exploded while staying finite (``Explosion``: a BCE loss above ten times a
coin flip's for 20 steps in a row, or a held-out log loss above it), and hand back what they measured so far with
the reason (a `diverged` record keeps its timings and curve). Over ranks every rank must stop at the same step: a training run agrees on it every step
(a one-float all-reduce outside the timed window); a benchmark runs its fixed steps and the ranks agree at the end
on the first bad step, so that a benchmark step carries no extra collective."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

PHASES = ("forward", "backward", "update", "total", "cpu")  # cpu: this process's CPU time over the step
SETTLE_WINDOW = 3  # warm-up has settled when the last this-many steps lie within `settle` of their median
SETTLE = 0.10


@dataclass
class LoopResult:
    phases: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in PHASES})
    losses: list[float] = field(default_factory=list)
    curve: list[dict[str, float]] = field(default_factory=list)
    diverged: str | None = None  # why the loop stopped early on a bad loss
    info: dict[str, Any] = field(default_factory=dict)  # a training run's epochs, steps, stop reason, best eval
    loop: dict[str, Any] = field(default_factory=dict)  # a benchmark's warm-up and timed-step counts and their rule
    syncs: dict[str, Any] | None = None  # on a GPU: host-device syncs of warm-up step 1 (syncs.py)
    state: dict[str, Any] | None = None  # a training run's position at its end, for a resumed run (kept_model.py)
    last_weights: dict[str, Any] | None = None  # the weights at the end when early stop put the best ones back


EXPLODED = 10 * math.log(2)  # nats per sample: ten times the log loss of predicting 0.5 (no constant does worse)
EXPLODED_STEPS = 20  # that many training steps in a row above it: diverged (one spike may recover)


class Explosion:
    """The rule for a loss that explodes while staying finite (dlrm mode's BCE only: the embedding-only loss is
    no log loss): ``EXPLODED_STEPS`` consecutive training losses above ``EXPLODED``; ``step`` says why, once."""

    def __init__(self, mode: str) -> None:
        self.on, self.run, self.first = mode == "dlrm", 0, None

    def step(self, value: float, it: int) -> str | None:
        if not self.on or not math.isfinite(value):
            return None
        if value <= EXPLODED:
            self.run = 0
            return None
        self.run += 1
        self.first = it if self.run == 1 else self.first
        if self.run < EXPLODED_STEPS:
            return None
        return (f"the loss exploded: above {EXPLODED:.2f} nats (10 x ln 2, ten times a coin flip's log loss) for "
                f"{EXPLODED_STEPS} steps in a row, steps {self.first + 1}-{it + 1} (last {value:.3g}); lower the "
                f"learning rate or check the inputs")


def held_out_exploded(logloss: float) -> bool:
    """A held-out log loss above ``EXPLODED``: the model predicts far worse than any constant (diverged)."""
    return logloss > EXPLODED


class NonFinite(ArithmeticError):
    """The model predicts NaN / inf: its weights went bad although the last loss was finite."""


def metrics(probs, labels) -> dict[str, float]:
    """AUC and log loss of click probabilities (AUC is NaN when the labels hold one class), and the base-rate log
    loss beside them."""
    import numpy as np
    from sklearn.metrics import log_loss, roc_auc_score

    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels)
    bad = int((~np.isfinite(p)).sum())
    if bad:
        raise NonFinite(f"{bad} of {len(p)} held-out predictions are NaN / inf (the weights are no longer finite)")
    out = {"logloss": float(log_loss(y, p, labels=[0, 1])), "samples": int(len(y))}
    out["auc"] = float(roc_auc_score(y, p)) if len(np.unique(y)) > 1 else float("nan")
    rate = float(np.mean(y)) if len(y) else 0.5
    # the log loss of predicting the held-out base rate for every sample: a model worse than it learned nothing
    out["base_logloss"] = float(log_loss(y, np.full(len(y), rate), labels=[0, 1])) if 0 < rate < 1 else 0.0
    return out


def score(step, batches, rank=None, keep: int | None = None) -> dict[str, float]:
    """AUC / log loss of ``step``'s predictions on ``batches`` (every rank predicts its slice; the slices are
    gathered in rank order, which restores each global batch); ``keep``: score the first ``keep`` samples only
    (a whole split whose last batch was padded)."""
    import torch

    probs, labels = [], []
    for b in batches:
        probs.append(step.predict(b).cpu())
        labels.append(b.labels.cpu())
    if rank is not None:
        parts = rank.gather([(p, y) for p, y in zip(probs, labels)])
        probs = [torch.cat([part[k][0] for part in parts]) for k in range(len(probs))]
        labels = [torch.cat([part[k][1] for part in parts]) for k in range(len(labels))]
    p, y = torch.cat(probs).double().numpy(), torch.cat(labels).numpy()
    return metrics(p[:keep], y[:keep])


class Clock:
    """Times one step's phases (synchronizing the device between them), and the CPU time this process (every one of
    its threads) spent over the step: wall time includes time the machine gave to other processes or tenants, CPU
    time does not."""

    def __init__(self, sync: Callable[[], None], after_first: Callable[[], None] | None = None) -> None:
        self.sync = sync
        self.after_first = after_first  # called once, after the first step's clock stopped

    def step(self, step, batch, next_batch):
        """(loss tensor, (forward, backward, update, total, cpu) ms)."""
        try:
            return self._step(step, batch, next_batch)
        finally:
            if self.after_first is not None:
                then, self.after_first = self.after_first, None
                then()

    def _step(self, step, batch, next_batch):
        self.sync()
        cpu0 = time.process_time()
        a = time.perf_counter()
        step.prefetch(next_batch)  # a no-op unless the system pipelines its loads
        loss = step.forward(batch)
        self.sync()
        b = time.perf_counter()
        step.backward(loss)
        self.sync()
        c = time.perf_counter()
        step.update()
        self.sync()
        d = time.perf_counter()
        cpu = (time.process_time() - cpu0) * 1e3
        return loss, ((b - a) * 1e3, (c - b) * 1e3, (d - c) * 1e3, (d - a) * 1e3, cpu)


def _exploded_eval(logloss: float, it: int) -> str:
    return (f"the held-out log loss exploded to {logloss:.3g} after step {it} (above {EXPLODED:.2f} nats, ten times a "
            f"coin flip's); lower the learning rate or check the inputs")


def _bad(value: float, it: int, point, epoch: int | None = None) -> str:
    where = (f"epoch {epoch + 1}" if epoch is not None else f"of {point.warmup} warm-up + {point.iters} timed steps")
    return f"the loss became {value} at step {it + 1} ({where}); lower the learning rate or check the inputs"


def settled(times: list[float], window: int = SETTLE_WINDOW, tol: float = SETTLE) -> bool:
    """Whether the step time has settled: the last ``window`` steps lie within ``tol`` (relative) of their median,
    and that median is within ``tol`` / 2 of the median of the ``window`` steps before (a time still falling
    step by step is not settled)."""
    if len(times) < 2 * window:
        return False
    last, before = sorted(times[-window:]), sorted(times[-2 * window:-window])
    med, prev = last[window // 2], before[window // 2]
    return med > 0 and (last[-1] - last[0]) / med <= tol and abs(med - prev) / prev <= tol / 2


def timed_steps(point, warm_ms: list[float]) -> int:
    """How many steps to time: ``iters``, or with a time budget enough steps at the settled warm-up step time to
    fill ``time_budget_s`` (at least ``iters``, at most ``max_iters``)."""
    if not point.time_budget_s or not warm_ms:
        return point.iters
    recent = sorted(warm_ms[-SETTLE_WINDOW:])
    step_s = max(recent[len(recent) // 2], 1e-3) / 1e3
    return max(point.iters, min(point.max_iters, math.ceil(point.time_budget_s / step_s)))


def loop_rule(point) -> str:
    warm = (f"at least {point.warmup} warm-up steps, then until {SETTLE_WINDOW} in a row lie within "
            f"{SETTLE:.0%} of their median and that median within {SETTLE / 2:.0%} of the {SETTLE_WINDOW} before "
            f"(at most {point.warmup_max})" if point.warmup_max > point.warmup
            else f"{point.warmup} warm-up steps")
    timed = (f"timed steps to fill {point.time_budget_s:g} s at the settled step time (at least {point.iters}, at "
             f"most {point.max_iters})" if point.time_budget_s else f"{point.iters} timed steps")
    return f"{warm}; {timed}"


def bench_loop(point, step, batches, evaluation, rank, clock: Clock, fault, rank_no: int,
               count_syncs: bool = False) -> LoopResult:
    """Warm-up (``warmup`` steps; with ``warmup_max`` more, until the step time settles on every rank), then the
    timed steps (``iters``, or with ``time_budget_s`` as many as fill it), cycling ``batches``; with ``eval_every``,
    AUC / log loss on ``evaluation`` after every that many steps (outside the timed window). Over ranks the decisions
    are agreed outside the timed window: one flag per extra warm-up step, the count of timed steps once.
    ``count_syncs`` (a GPU): the first warm-up step's host-device syncs are counted (syncs.py); none without one."""
    res = LoopResult()
    first_bad: int | None = None
    boom, why = Explosion(point.mode), None
    warm_ms: list[float] = []
    warmup, total, it = point.warmup, None, 0
    calm = point.warmup_max <= point.warmup
    while total is None or it < total:
        if total is None and it >= warmup:  # the warm-up is over when it has settled everywhere (or hit its cap)
            calm = calm or settled(warm_ms)
            done = calm or it >= point.warmup_max or first_bad is not None
            if rank is not None and point.warmup_max > point.warmup:
                done = not rank.any(not done)  # every rank ends its warm-up at the same step
            if done:
                warmup = it
                n = timed_steps(point, warm_ms)
                if rank is not None and point.time_budget_s:
                    n = max(rank.gather(n))
                total = warmup + n
                if it >= total:
                    break
        if fault:
            fault.at_step(rank_no, it)
        if rank:
            rank.at_step(it, warmup if total is not None else -1)
        now, after = batches[it % len(batches)], batches[(it + 1) % len(batches)]
        if it == 0 and count_syncs and point.warmup > 0:
            from reproduce.harness.syncs import counted

            (loss, times), res.syncs = counted(lambda: clock.step(step, now, after))
        else:
            loss, times = clock.step(step, now, after)
        value = float(loss.detach())  # after the timed window
        exploded = boom.step(value, it) if first_bad is None else None
        if not math.isfinite(value) or exploded:
            first_bad = it if first_bad is None else first_bad
            why = exploded
            if rank is None:
                break  # one process stops now; ranks run their fixed steps and agree below
        if total is None:
            warm_ms.append(times[3])
        elif first_bad is None:
            for k, v in zip(res.phases, times):
                res.phases[k].append(v)
            res.losses.append(value)
        it += 1
        if point.eval_every and it % point.eval_every == 0 and first_bad is None:
            try:
                res.curve.append({"step": it, **score(step, evaluation)})
            except NonFinite as exc:  # single process only (eval_every is)
                res.diverged = f"{exc} after step {it}"
                break
            if held_out_exploded(res.curve[-1]["logloss"]):
                res.diverged = _exploded_eval(res.curve[-1]["logloss"], it)
                break
    local_bad = first_bad
    if rank is not None:
        bad = rank.gather(first_bad)
        first_bad = min((b for b in bad if b is not None), default=None)
        if first_bad is not None:  # every rank keeps the steps before the first bad one anywhere
            kept = max(0, first_bad - warmup)
            res.phases = {k: v[:kept] for k, v in res.phases.items()}
            res.losses = res.losses[:kept]
    if first_bad is not None:
        if why and local_bad == first_bad:  # this process's loss exploded, at the first bad step of any rank
            res.diverged = why
        else:
            res.diverged = _bad(float("nan"), first_bad, point) if rank else _bad(value, first_bad, point)
    res.loop = {"warmup_steps": warmup, "warmup_settled": bool(calm), "timed_steps": len(res.phases["total"]),
                "warmup_ms": warm_ms, "rule": loop_rule(point)}
    return res


def final_score(step, evaluation, rank, res: LoopResult) -> dict[str, float] | None:
    """The benchmark's held-out score after its steps (None when it diverged; a NaN prediction makes it so)."""
    if not evaluation or res.diverged:
        return None
    try:
        return score(step, evaluation, rank)
    except NonFinite as exc:
        res.diverged = f"{exc} after the last step"
        return None


def whole_split(source, batch_size: int, rank_id: int, world: int):
    """Every sample of a held-out split once, in batches of ``batch_size`` (the last padded by wrapping around,
    its padding left out of the score), this rank's slices; and the sample count."""
    from impls.data.loader import BatchIterator

    n = source.num_rows
    return BatchIterator(source, batch_size, -(-n // batch_size), 0, rank_id, world), n


def train_loop(point, step, source, held_out, rank, clock: Clock, fault, rank_no: int, world: int, device,
               note=None, start: dict[str, Any] | None = None, best_weights=None) -> LoopResult:
    """``point.epochs`` shuffled passes over ``source`` (whole global batches), scoring the whole ``held_out``
    split every ``eval_every`` steps (0: after every epoch) and at the end; early stop after ``early_stop``
    evaluations without a lower eval log loss; with early stop asked, the weights at the best evaluation are kept
    (``step.weights()``, outside the timed span) and put back at the end when a later evaluation was worse
    (``info["restored"]``: the best evaluation's step). ``note(epoch, step, evaluation=None)`` (progress.ProgressNote,
    or None) hears where the run is after every step and evaluation, outside the steps' timed span. ``start``: the
    ``state`` a run that ended after its epochs left (its weights and optimizer state loaded into ``step``, and with
    early stop ``best_weights``, the weights of its best evaluation): the loop goes on from the next epoch as the
    run that never stopped would, its curve carried on. ``res.state`` is the position at the end, and
    ``res.last_weights`` the weights at the end when the best ones were put back."""
    from impls.data.loader import BatchIterator, Epoch

    res = LoopResult()
    B = point.batch_size * world
    per_epoch = source.num_rows // B
    if per_epoch == 0:
        raise ValueError(f"the training split has {source.num_rows} samples, fewer than one global batch of {B}: "
                         f"lower --batch-size")
    evaluation, n_eval = whole_split(held_out, B, rank_no, world)
    start = start or {}
    best: dict[str, Any] | None = start.get("best")
    since_best, it, stop, window = start.get("since_best", 0), start.get("it", 0), "epochs done", start.get("window", [])
    res.curve = list(start.get("curve", []))
    first_step, first_epoch = it, start.get("epoch", 0)
    boom = Explosion(point.mode)
    boom.run, boom.first = start.get("boom", (0, None))

    def evaluate(epoch: int) -> str:
        """Score the held-out split; why to stop ("early stop", "diverged"), or "epochs done" to go on."""
        nonlocal best, best_weights, since_best
        try:
            m = score(step, (b.to(device) for b in evaluation), rank, keep=n_eval)
        except NonFinite as exc:  # every rank scores the same gathered predictions: all stop here
            res.diverged = f"{exc} after step {it} (epoch {epoch + 1})"
            return "diverged"
        if held_out_exploded(m["logloss"]):  # the same gathered predictions on every rank: all stop here
            res.diverged = _exploded_eval(m["logloss"], it) + f" (epoch {epoch + 1})"
            return "diverged"
        train_loss = sum(window) / len(window) if window else float("nan")
        window.clear()
        res.curve.append({"step": it, "epoch": round(it / per_epoch, 4), "train_loss": train_loss, **m})
        if note:
            note(epoch + 1, it - epoch * per_epoch, {k: m.get(k) for k in ("auc", "logloss", "base_logloss")})
        if best is None or m["logloss"] < best["logloss"]:
            best, since_best = dict(res.curve[-1]), 0
            if point.early_stop:
                try:
                    best_weights = step.weights()
                except TypeError as exc:
                    raise TypeError(f"--early-stop keeps the weights of the best evaluation to put them back, but "
                                    f"{exc} ({point.impl})") from None
        else:
            since_best += 1
        return "early stop" if point.early_stop and since_best >= point.early_stop else "epochs done"

    for epoch in range(first_epoch, point.epochs):
        batches = BatchIterator(Epoch(source, point.seed, epoch, point.shuffle), B, per_epoch, 0, rank_no, world)
        with batches:
            stream = iter(batches)
            nxt = next(stream).to(device)
            for k in range(per_epoch):
                batch, nxt = nxt, (next(stream).to(device) if k + 1 < per_epoch else nxt)
                if fault:
                    fault.at_step(rank_no, it)
                if rank:
                    rank.at_step(it, point.warmup)
                loss, times = clock.step(step, batch, nxt)
                value = float(loss.detach())
                exploded = boom.step(value, it)
                bad = not math.isfinite(value) or exploded is not None
                if rank is not None:
                    bad = rank.any(bad)  # every rank stops at the same step
                if bad:
                    res.diverged = (_bad(value, it, point, epoch) if not math.isfinite(value) else
                                    f"{exploded} (epoch {epoch + 1})" if exploded else
                                    f"another rank's loss became non-finite or exploded at step {it + 1} "
                                    f"(epoch {epoch + 1})")
                    stop = "diverged"
                    break
                it += 1
                window.append(value)
                if note:
                    note(epoch + 1, k + 1)
                if it - first_step > point.warmup:
                    for key, v in zip(res.phases, times):
                        res.phases[key].append(v)
                    res.losses.append(value)
                if point.eval_every and it % point.eval_every == 0:
                    stop = evaluate(epoch)
                    if stop != "epochs done":
                        break
        if stop != "epochs done":
            break
        if not point.eval_every and epoch + 1 < point.epochs:  # no step interval: score after every epoch
            stop = evaluate(epoch)
            if stop != "epochs done":
                break
    if stop == "epochs done" and (not res.curve or res.curve[-1]["step"] != it):
        stop = evaluate(point.epochs - 1)
    res.state = {"epoch": -(-it // per_epoch), "it": it, "curve": res.curve, "best": best, "since_best": since_best,
                 "window": window, "boom": (boom.run, boom.first), "stop": stop}
    restored = None
    if best_weights is not None and not res.diverged and res.curve and best["step"] != res.curve[-1]["step"]:
        res.last_weights = step.weights()
        step.restore(best_weights)  # early stop keeps the best weights, not the last
        restored = best["step"]
    res.info = {"steps": it, "steps_per_epoch": per_epoch, "epochs": round(it / per_epoch, 4), "stop": stop,
                "train_samples": source.num_rows, "eval_samples": n_eval, "best": best, "restored": restored}
    if start:
        res.info["resumed_at_step"] = first_step
    return res
