#!/usr/bin/env bash
# `make test` from a clean clone of this checkout's HEAD (what CI runs), timed: the build (`make install`: the venv,
# the pinned packages, the native ops) and pytest apart. Writes results/test_time/<machine>.json in this checkout,
# from which `dlrmbench report` writes the README's line on how long `make test` takes. Run it on a quiet machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone -q "$root" "$work/clone"
cd "$work/clone"
t0=$(date +%s.%N)
make install > "$work/build.log" 2>&1 || { tail -50 "$work/build.log"; exit 1; }
t1=$(date +%s.%N)
set +e
make test 2>&1 | tee "$work/test.log"
status=${PIPESTATUS[0]}
set -e
t2=$(date +%s.%N)
.venv/bin/python - "$root" "$t0" "$t1" "$t2" "$status" "$work/test.log" <<'PY'
import json, re, sys
from pathlib import Path

from reproduce.harness.environment import git_sha
from reproduce.harness.machine import cores, this_machine
from reproduce.harness.record_store import write_json

root, t0, t1, t2, status, log = sys.argv[1], *map(float, sys.argv[2:5]), int(sys.argv[5]), sys.argv[6]
tail = [ln for ln in Path(log).read_text().splitlines() if re.search(r"\d+ (passed|failed)", ln)]
counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", tail[-1] if tail else "")}
machine = this_machine()
out = write_json(Path(root) / "results" / "test_time" / f"{machine}.json", {
    "machine": machine, "cores": cores(), "git_sha": git_sha(), "build_s": t1 - t0, "pytest_s": t2 - t1,
    "total_s": t2 - t0, "exit_status": status, "counts": counts})
print(f"make test from a clean clone: {t2 - t0:.0f} s (build {t1 - t0:.0f} s, pytest {t2 - t1:.0f} s): {out}")
PY
exit "$status"
