"""`--launcher slurm`: an sbatch script that runs an experiment's points inside one allocation, each with srun
(one task per node) and, for a world size above 1, torchrun on every node meeting at a c10d rendezvous on the
allocation's first node, every repeat of every point in the sweep's interleaved order. Each run goes under the per-point time limit; a point that leaves no record gets one
from ``python -m reproduce.harness.slurm finish`` (the same crash / OOM / time-limit records as a local sweep); the script
skips points that have a record, so resubmitting it resumes; its last step writes summary.csv and the figures.
"""
from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from pathlib import Path

from reproduce.harness.resolve import Sweep
from reproduce.harness.point import RunPoint
from impls.data import safe_write
from reproduce.harness.launch import RecordedElsewhere, finish_point, skip_unregistered
from reproduce.harness.record_store import DiskFull, log_path, record_path

TIMEOUT_EXIT = 124  # coreutils `timeout`: the command ran past its limit
BASE_PORT = 29500


def _q(x: object) -> str:
    return shlex.quote(str(x))


def point_command(point: RunPoint, rec: Path, port: int) -> list[str]:
    """What srun starts on each of the point's nodes (``$PY`` and ``$HEAD`` are the script's variables)."""
    from reproduce.harness.systems import launch_module

    worker = [*map(_q, launch_module(point.impl)), "--point-json", _q(json.dumps(point.to_dict())), "--out", _q(rec)]
    threads = [f"OMP_NUM_THREADS={point.threads}"] if point.threads else []
    if point.world_size == 1:
        return ["env", *threads, '"$PY"', *worker]
    rdzv = [f"--nnodes={point.nnodes}", f"--nproc-per-node={point.ranks_per_node}", "--rdzv-backend=c10d",
            f'--rdzv-endpoint="$HEAD:{port}"', f"--rdzv-id=dlrmbench-{point.point_id}"]
    if point.nnodes == 1:
        rdzv = ["--standalone", f"--nproc-per-node={point.world_size}"]
    return ["env", *threads, '"$PY"', "-m", "reproduce.harness.torchrun", *rdzv, *worker]


def sbatch_script(exp: Sweep, experiment_file: Path, tasks: list[tuple[RunPoint, int]], timeout_s: float,
                  python: str = sys.executable, partition: str | None = None, account: str | None = None,
                  root: Path | None = None) -> str:
    """The sbatch script for ``tasks`` (the (point, repeat) runs still to do, in the sweep's interleaved order)."""
    points = [p for p, _ in tasks]
    if not points:
        raise ValueError(f"every point of {experiment_file} has a record: nothing to submit (use --force to rerun)")
    root = Path(root or Path.cwd()).resolve()
    experiment_file = Path(experiment_file).resolve()
    nodes = max(p.nnodes for p in points)
    gpus = max(p.ranks_per_node for p in points) if any(p.device == "cuda" for p in points) else 0
    limit = int(math.ceil(timeout_s))
    total = len(tasks) * (limit + 60) + 600
    out = Path(exp.out_dir).resolve()  # load_experiment put it under the root, relative to this directory
    head = [
        "#!/bin/bash",
        f"# dlrmbench sweep {experiment_file} (profile {exp.profile}, machine {exp.machine}): {len(tasks)} of "
        f"{len(exp.tasks())} runs to do ({len(exp.points)} points x {exp.repeats} repeats, interleaved).",
        "# Written by `dlrmbench sweep --launcher slurm`; resubmitting it runs only the points still without a record.",
        f"#SBATCH --job-name=dlrmbench-{exp.name}",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        *([f"#SBATCH --gpus-per-node={gpus}"] if gpus else []),
        f"#SBATCH --time={total // 3600:02d}:{total % 3600 // 60:02d}:{total % 60:02d}",
        f"#SBATCH --output={out}/logs/slurm-%j.out",
        *([f"#SBATCH --partition={partition}"] if partition else []),
        *([f"#SBATCH --account={account}"] if account else []),
        "set -uo pipefail",
        f"cd {_q(root)}",
        f'PY="${{DLRMBENCH_PYTHON:-{python}}}"',
        'HEAD=$(scontrol show hostnames "${SLURM_JOB_NODELIST:?submit this script with sbatch}" | head -n 1)',
        "export PY HEAD  # read by the command each srun task runs",
        f"mkdir -p {_q(out / 'logs')}",
        "",
        "# run_point RECORD LOG NODES POINT_JSON REPEAT COMMAND: skip a recorded run, else run it under the time limit",
        "run_point() {",
        '  local rec=$1 log=$2 nodes=$3 point=$4 repeat=$5 cmd=$6',
        '  if [ -f "$rec" ]; then echo "recorded earlier: $rec"; return 0; fi',
        f'  timeout --kill-after=30 {limit} srun --nodes="$nodes" --ntasks="$nodes" --ntasks-per-node=1 '
        '--kill-on-bad-exit=1 bash -c "$cmd" > "$log" 2>&1',
        "  local code=$?",
        f'  "$PY" -m reproduce.harness.slurm finish --point-json "$point" --out "$rec" --log "$log" --code "$code" '
        f'--repeat "$repeat" --timeout {limit}',
        "}",
        "",
    ]
    body = []
    for i, (p, r) in enumerate(tasks):
        rec = record_path(out, p, r)
        log = log_path(rec)
        cmd = " ".join(point_command(p, rec, BASE_PORT + i % 1000))
        body.append(f"run_point {_q(rec)} {_q(log)} {p.nnodes} {_q(json.dumps(p.to_dict()))} {r} {_q(cmd)}")
    where = f"{_q(experiment_file)} --profile {_q(exp.profile)} --root {_q(root)} --machine {_q(exp.machine)}"
    tail = ["", "# summary.csv and the figures: the command line's `summarize` and `plot`",
            f'"$PY" -m reproduce summarize {where}', f'"$PY" -m reproduce plot {where}', ""]
    return "\n".join(head + body + tail)


def write_sbatch(exp: Sweep, experiment_file: Path, tasks: list[tuple[RunPoint, int]], timeout_s: float,
                 path: Path, **kw) -> Path:
    """Write the script (runs of unregistered impls get their `skipped` record now, as a local sweep would)."""
    runnable = [(p, r) for p, r in tasks if not skip_unregistered(p, exp.out_dir, r)]
    (exp.out_dir / "logs").mkdir(parents=True, exist_ok=True)  # slurm opens --output before the script runs
    path.parent.mkdir(parents=True, exist_ok=True)
    safe_write.write_text(path, sbatch_script(exp, experiment_file, runnable, timeout_s, **kw), "the sbatch script")
    path.chmod(0o755)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the steps of a dlrmbench sbatch script (internal)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    fin = sub.add_parser("finish", help="record a point that left no record (crash, OOM kill, time limit)")
    fin.add_argument("--point-json", required=True)
    fin.add_argument("--out", required=True, type=Path)
    fin.add_argument("--log", required=True, type=Path)
    fin.add_argument("--code", required=True, type=int)
    fin.add_argument("--timeout", required=True, type=float)
    fin.add_argument("--repeat", type=int, default=0)
    args = ap.parse_args(argv)
    if args.cmd == "finish":
        point = RunPoint.from_dict(json.loads(args.point_json))
        code = None if args.code == TIMEOUT_EXIT else args.code
        try:
            record = finish_point(point, args.out, args.log, code, args.timeout, repeat=args.repeat)
        except RecordedElsewhere as exc:
            print(f"{point.point_id}: {exc}")
            return 0
        except DiskFull as exc:  # nothing recorded: the resubmitted script runs it again
            print(f"{point.point_id}: {exc}")
            return 1
        print(f"{point.point_id}: {record.status.value}" + (f" ({record.reason})" if record.reason else ""))
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
