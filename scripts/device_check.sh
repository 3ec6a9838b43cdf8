#!/usr/bin/env bash
# make device-check: one pass over a GPU machine, every step run whatever the earlier ones did, each under its own
# limit; the summary lists each step's result and the exit code is 1 when any step failed. Everything it writes
# lies under $OUT/work (default OUT=results/device) and is packed into $OUT/device-check.tar.gz at the end (the
# device tool brings back only a few top-level files): env.txt, deps.txt, toolkit.txt, one log per step, the junit
# XML of each test step, the benchmarks' run records and sweep folder, summary.txt (also left beside the archive).
#
# Python: $PYTHON (default python3), which must already have torch with CUDA; nothing is installed. The tests need
# pytest and hypothesis; the benchmarks need click, rich, pandas, numpy. Optional (their tests skip without them):
# fbgemm_gpu (dense-fbgemm), torchrec, pyarrow (tabular data), igraph (EL-Rec reordering).
#
# Step budget, for a 10-minute command on an H200 machine (16 cores, nvcc 13.0); the limits add up to 420 s, so at
# least 180 s of the 600 s stay unused (the machine's start and the transfers are outside the command):
#   preflight  10 s  three lookups and one `import torch` (about 3 s).
#   build     140 s  16 C++ and 3 CUDA translation units with MAX_JOBS = every core: as long as the slowest unit.
#                    On this project's 2-core machine (Zen 5) `touch cuda/tt.cu; make cuda-check` takes 43 s (tt.cu
#                    for sm_90 and the link), and `make ext` compiles the 16 C++ units in ~2 min (~15 s per unit per
#                    core); ninja runs them side by side, so a 16-core machine needs ~35-60 s; 140 s leaves room for a
#                    slower compiler host.
#   gpu-tests  75 s  the gpu-marked tests, once: hypothesis cases of 30 small examples each (ms apiece on a GPU),
#                    the full-size op paths (a few s each), and ~60 three-step trainings on 60k-row tables whose
#                    CPU halves take 7 s in all on the 2-core machine; plus one CUDA context (~5 s).
#   op-tests   45 s  the CPU op tests without the gpu ones (tests/core -m "not gpu": 18-22 s on the 2-core machine).
#   benchmark  80 s  `dlrmbench run`, five cold worker processes one after another (import torch + CUDA context
#                    ~8 s each), 10M rows, 2 warm-up + 5 timed steps of B = 16,384 (well under 1 s per step).
#   fig11      70 s  the sc24_fig11 gpu profile: B = 65,536 for ecorec, elrec, ttrec first (three cold workers, one
#                    warm-up + three timed steps each; the artifact's FBTT takes 11.8 s per step there on its GPU,
#                    so TT-Rec's point may not finish: the summary then says TIMED OUT and the records of the
#                    finished points are kept), then the smaller batches while time is left.
# A test step is stopped with SIGINT at its limit, so pytest still writes its junit XML; SIGKILL follows 15 s later.
set -u
PY=${PYTHON:-python3}
OUT=${OUT:-results/device}
WORK="$OUT/work"
rm -rf "$WORK"
mkdir -p "$WORK"
SUMMARY="$WORK/summary.txt"
: > "$SUMMARY"
failed=0
JOBS=${DEVICE_JOBS:-$(nproc)}  # not MAX_JOBS: the Makefile exports that as 2 for the project's CPU machine

step() {  # step NAME SECONDS COMMAND...: run, log to $WORK/NAME.log, record the result, never stop the script
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout --signal=INT --kill-after=15 "$limit" "$@" > "$WORK/$name.log" 2>&1
  local code=$?
  local what="ok"
  if [ $code -eq 124 ] || [ $code -eq 137 ]; then what="TIMED OUT after ${limit}s"; elif [ $code -ne 0 ]; then what="FAILED (exit $code)"; fi
  [ "$what" = "ok" ] || failed=1
  printf '%-11s %-26s %4ds of %3ds  %s\n' "$name" "$what" $((SECONDS - t0)) "$limit" "$name.log" | tee -a "$SUMMARY"
  tail -n 3 "$WORK/$name.log" | awk '{print "    " $0}' | tee -a "$SUMMARY"
}

skip() {  # skip NAME REASON
  printf '%-11s %-26s %s\n' "$1" "SKIPPED" "$2" | tee -a "$SUMMARY"
}

{ nvidia-smi 2>&1 | head -15; nproc; "$PY" -c 'import sys, torch; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'; } > "$WORK/env.txt" 2>&1

# which modules this python has: required ones stop the steps that need them (said here), optional ones skip tests
"$PY" - > "$WORK/deps.txt" 2>&1 <<'EOF'
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
tee -a "$SUMMARY" < "$WORK/deps.txt"
missing() { grep -q "^MISSING $1" "$WORK/deps.txt"; }

# preflight: a CUDA device, a CUDA torch, the toolkit (CUDA_HOME, nvcc) and ninja, each named when missing
t0=$SECONDS
why_no_cuda=""
if missing torch; then
  why_no_cuda="no torch in $PY"
elif ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.version.cuda and torch.cuda.is_available() else 1)' 2>/dev/null; then
  why_no_cuda="no CUDA device: $("$PY" -c 'import torch; print(f"torch {torch.__version__}, built for CUDA {torch.version.cuda}, device available: {torch.cuda.is_available()}")' 2>&1 | tail -1)"
elif ! toolkit=$(PYTHON="$PY" bash scripts/cuda_toolkit.sh 2> "$WORK/toolkit.txt"); then
  why_no_cuda="$(tr '\n' ' ' < "$WORK/toolkit.txt")"
else
  echo "CUDA_HOME=$toolkit" > "$WORK/toolkit.txt"
fi
pre="ok"
[ -n "$why_no_cuda" ] && pre="CUDA steps skipped"
printf '%-11s %-26s %4ds\n' preflight "$pre" $((SECONDS - t0)) | tee -a "$SUMMARY"
[ -n "$why_no_cuda" ] && echo "    $why_no_cuda" | tee -a "$SUMMARY"

if missing torch; then
  skip build "no torch in $PY"
elif [ -z "$why_no_cuda" ]; then
  step build 140 env CUDA_HOME="$toolkit" DLRMBENCH_CUDA=1 TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}" \
    MAX_JOBS="$JOBS" "$PY" setup.py -q build_ext --inplace
else  # the CPU op tests still need the library
  step build 140 env DLRMBENCH_CUDA=0 MAX_JOBS="$JOBS" "$PY" setup.py -q build_ext --inplace
fi

if missing pytest || missing hypothesis; then
  skip gpu-tests "pytest and hypothesis are needed (see deps.txt)"
  skip op-tests "pytest and hypothesis are needed (see deps.txt)"
else
  # the gpu-marked tests: every CUDA op at full size and on its error paths, each system CPU vs CUDA
  if [ -n "$why_no_cuda" ]; then
    skip gpu-tests "$why_no_cuda"
  else
    step gpu-tests 75 "$PY" -m pytest -q -p no:cacheprovider -m gpu tests --junitxml="$WORK/gpu-tests.xml"
  fi
  # the CPU op tests (this machine's CPU kernels), none of the gpu ones again
  step op-tests 45 "$PY" -m pytest -q -p no:cacheprovider -m "not gpu" tests/core --junitxml="$WORK/op-tests.xml"
fi

if missing click || missing rich || missing pandas; then
  skip benchmark "click, rich and pandas are needed (see deps.txt)"
  skip fig11 "click, rich and pandas are needed (see deps.txt)"
elif [ -n "$why_no_cuda" ]; then
  skip benchmark "$why_no_cuda"
  skip fig11 "$why_no_cuda"
else
  # each TT system's step on CUDA beside the dense baseline (dense-fbgemm joins where fbgemm_gpu is installed), with
  # the host-device syncs of one step in each record and the table
  impls=(--impl dense-torch --impl ttrec --impl elrec --impl ecorec)
  grep -q "^have fbgemm_gpu" "$WORK/deps.txt" && impls+=(--impl dense-fbgemm)
  step benchmark 80 "$PY" -m reproduce run "${impls[@]}" --data sc24-f4 --rows 10000000 --mode embedding-only \
    --lr 0.001 -b 16384 --iters 5 --warmup 2 --device cuda -o ttrec.ranks=32 -o elrec.ranks=32 -o ecorec.ranks=32 \
    --out "$WORK/run"
  # EcoRec's Figure 11 on one GPU: the point comparable with the artifact's results.txt
  step fig11 70 "$PY" -m reproduce sweep reproduce/experiments/sc24_fig11.toml --profile gpu --root "$WORK/fig11"
fi

cp "$SUMMARY" "$OUT/summary.txt"
tar -czf "$OUT/device-check.tar.gz" -C "$OUT" work && echo "archive: $OUT/device-check.tar.gz (summary: $OUT/summary.txt)"
exit $failed
