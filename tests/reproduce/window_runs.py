"""Runs points in this process (one device) or in spawned gloo ranks under ``sys.setprofile``, and says which project
modules ran a frame between the start of the build (worker.build) and the end of the timed loop (bench_loop's
return): the evidence behind fingerprint.BOOKKEEPING. Each run also gives its record, whose fingerprint the freshness
tests edit against. ``run_forked``: plain runs of reference points, each in a process of its own."""
from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from reproduce.harness import code

START = ("build", "reproduce/harness/worker.py")
END = ("bench_loop", "reproduce/harness/training.py")


class Window:
    """A profile hook that keeps the file of every Python frame called inside the window."""

    def __init__(self) -> None:
        self.active = False
        self.files: set[str] = set()

    def __call__(self, frame, event, arg):
        if event != "call" and event != "return":
            return
        name, file = frame.f_code.co_name, frame.f_code.co_filename
        if event == "call":
            if not self.active and name == START[0] and file.endswith(START[1]):
                self.active = True
            if self.active:
                self.files.add(file)
        elif self.active and name == END[0] and file.endswith(END[1]):
            self.active = False
            sys.setprofile(None)  # the window closed: the record's bookkeeping after it runs at full speed
            threading.setprofile(None)

    def modules(self) -> set[str]:
        by_path = {str(p): m for m, p in code.modules().items()}
        return {by_path[f] for f in self.files if f in by_path}


def run_in_window(point):
    """(record, project modules that ran in the window) of ``point`` (a RunPoint) in this process."""
    from reproduce.harness.worker import run_point

    window = Window()
    threading.setprofile(window)
    sys.setprofile(window)
    try:
        record = run_point(point)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return record, window.modules()


def _proc(k: int, plan: list[tuple[int, int]], ports: list[int], points: list[dict], out: str) -> None:
    """Process ``k``: rank ``plan[k][1]`` of point ``plan[k][0]``, a fresh process as the worker is."""
    import json

    from reproduce.harness.point import RunPoint

    i, rank = plan[k]
    world = int(points[i].get("world_size", 1))
    if world > 1:
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(ports[i]))
    record, ran = run_in_window(RunPoint.from_dict(points[i]))
    result = {"record": record.to_dict() if record is not None else None, "ran": sorted(ran)}
    Path(out, f"p{i}.rank{rank}.json").write_text(json.dumps(result))


def run_fresh(points, tmp: Path, max_procs: int = 6) -> list[tuple[dict, set[str]]]:
    """(rank 0's record, modules that ran in the window on any rank) of each point (a RunPoint), each rank of each
    point in a fresh spawned process (gloo ranks over ``world_size`` > 1), at most ``max_procs`` at a time."""
    import json
    import socket

    from reproduce.harness.rank_processes import start_ranks

    held = [socket.socket() for _ in points]  # a free port per point, each its own (port0 + i could be taken)
    try:
        for s in held:
            s.bind(("127.0.0.1", 0))
        ports = [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()
    dicts = [p.to_dict() for p in points]
    waves: list[list[tuple[int, int]]] = [[]]
    for i, p in enumerate(points):
        if waves[-1] and len(waves[-1]) + p.world_size > max_procs:
            waves.append([])
        waves[-1] += [(i, r) for r in range(p.world_size)]
    for plan in waves:
        start_ranks(_proc, (plan, ports, dicts, str(tmp)), len(plan))
    out = []
    for i, p in enumerate(points):
        ranks = [json.loads(Path(tmp, f"p{i}.rank{r}.json").read_text()) for r in range(p.world_size)]
        out.append((ranks[0]["record"], set().union(*(set(r["ran"]) for r in ranks))))
    return out


def _plain(k: int, points: list[dict], out: str) -> None:
    import json

    from reproduce.harness.point import RunPoint
    from reproduce.harness.worker import run_point

    record = run_point(RunPoint.from_dict(points[k]))
    Path(out, f"p{k}.json").write_text(json.dumps(record.to_dict()))


def run_forked(points, tmp: Path) -> list[dict]:
    """The record of each one-process point (a RunPoint), each run by the worker's run_point in a process of its own
    forked from the rank server (torch imported already): a reference run whose launch is not what a test checks."""
    import json

    from reproduce.harness.rank_processes import start_ranks

    start_ranks(_plain, ([p.to_dict() for p in points], str(tmp)), len(points))
    return [json.loads(Path(tmp, f"p{k}.json").read_text()) for k in range(len(points))]

