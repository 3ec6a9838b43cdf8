#!/usr/bin/env bash
# make device-check: one pass over a GPU machine in at most 8 minutes (the steps' limits add up to 470 s), every
# step run whatever the earlier ones did; the summary lists each step's result and the exit code is 1 when any
# step failed. Writes to $OUT (default results/device): env.txt, deps.txt, one log and junit XML per test step, the
# benchmark's run records (run/), summary.txt.
#
# Python: $PYTHON (default python3), which must already have torch with CUDA; nothing is installed. The tests need
# pytest and hypothesis; the benchmark needs click, rich, pandas, numpy. Optional (their tests skip without them):
# fbgemm_gpu (dense-fbgemm), torchrec, pyarrow (tabular data), igraph (EL-Rec reordering).
set -u
PY=${PYTHON:-python3}
OUT=${OUT:-results/device}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
failed=0

step() {  # step NAME SECONDS COMMAND...: run, log to $OUT/NAME.log, record the result, never stop the script
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  local code=$?
  local what="ok"
  if [ $code -eq 124 ] || [ $code -eq 137 ]; then what="TIMED OUT after ${limit}s"; elif [ $code -ne 0 ]; then what="FAILED (exit $code)"; fi
  [ "$what" = "ok" ] || failed=1
  printf '%-14s %-28s %4ds  %s\n' "$name" "$what" $((SECONDS - t0)) "$OUT/$name.log" | tee -a "$SUMMARY"
  tail -n 3 "$OUT/$name.log" | awk '{print "    " $0}' | tee -a "$SUMMARY"
}

skip() {  # skip NAME REASON
  printf '%-14s %-28s        %s\n' "$1" "SKIPPED" "$2" | tee -a "$SUMMARY"
}

{ nvidia-smi 2>&1 | head -15; "$PY" -c 'import sys, torch; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'; } > "$OUT/env.txt" 2>&1

# which modules this python has: required ones stop the steps that need them (said here), optional ones skip tests
"$PY" - > "$OUT/deps.txt" 2>&1 <<'EOF'
import importlib
required = {"torch": "everything", "pytest": "tests", "hypothesis": "tests", "numpy": "everything",
            "click": "benchmark", "rich": "benchmark", "pandas": "benchmark"}
optional = ["fbgemm_gpu", "torchrec", "pyarrow", "igraph", "seaborn", "pytest_benchmark"]
for name in list(required) + optional:
    try:
        importlib.import_module(name)
        print(f"have {name}")
    except Exception as exc:  # noqa: BLE001 - any import failure means: not usable here
        print(f"{'MISSING' if name in required else 'absent'} {name}: {type(exc).__name__}")
EOF
cat "$OUT/deps.txt" | tee -a "$SUMMARY"
missing() { grep -q "^MISSING $1" "$OUT/deps.txt"; }

if missing torch; then
  skip build "no torch in $PY"
else
  step build 140 env DLRMBENCH_CUDA=1 TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}" MAX_JOBS="${MAX_JOBS:-16}" \
    "$PY" setup.py -q build_ext --inplace
fi

if missing pytest || missing hypothesis; then
  skip gpu-tests "pytest and hypothesis are needed (see deps.txt)"
  skip op-tests "pytest and hypothesis are needed (see deps.txt)"
else
  # the gpu-marked tests: every CUDA op at full size and on its error paths, each system CPU vs CUDA
  step gpu-tests 110 "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/core tests/impls \
    --junitxml="$OUT/gpu-tests.xml"
  # the op and system tests (CPU and CUDA parametrizations) without the optional dependencies' systems
  step op-tests 120 "$PY" -m pytest -q -p no:cacheprovider tests/core tests/impls -k "not fbgemm and not torchrec" \
    --junitxml="$OUT/op-tests.xml"
fi

if missing click || missing rich || missing pandas; then
  skip benchmark "click, rich and pandas are needed (see deps.txt)"
else
  # each TT system's step on CUDA beside the dense baseline (dense-fbgemm joins where fbgemm_gpu is installed)
  impls=(--impl dense-torch --impl ttrec --impl elrec --impl ecorec)
  grep -q "^have fbgemm_gpu" "$OUT/deps.txt" && impls+=(--impl dense-fbgemm)
  step benchmark 100 "$PY" -m reproduce run "${impls[@]}" --data sc24-f4 --rows 10000000 --mode embedding-only \
    --lr 0.001 -b 16384 --iters 5 --warmup 2 --device cuda -o ttrec.ranks=32 -o elrec.ranks=32 -o ecorec.ranks=32 \
    --out "$OUT/run"
fi

echo "summary: $SUMMARY"
exit $failed
