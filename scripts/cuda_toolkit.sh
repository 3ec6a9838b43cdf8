#!/usr/bin/env bash
# Finds the CUDA toolkit a CUDA build needs and says what is missing: prints the toolkit root (the folder holding
# include/cuda_runtime.h and bin/nvcc) and exits 0, or names each missing piece on stderr and exits 1.
# Used by `make cuda-check` and scripts/device_check.sh. Looks at $CUDA_HOME, then the nvcc on PATH (which may be a
# link into the toolkit), then /usr/local/cuda and /usr/local/cuda-*. ninja: torch builds serially without it (a
# 16-core machine then takes minutes, not seconds), so it counts as missing too.
set -u
candidates=()
[ -n "${CUDA_HOME:-}" ] && candidates+=("$CUDA_HOME")
if nvcc_path=$(command -v nvcc 2>/dev/null); then
  candidates+=("$(dirname "$(dirname "$(readlink -f "$nvcc_path")")")" "$(dirname "$(dirname "$nvcc_path")")")
fi
candidates+=(/usr/local/cuda /usr/local/cuda-*)
root=""
for c in "${candidates[@]}"; do
  if [ -f "$c/include/cuda_runtime.h" ] && [ -x "$c/bin/nvcc" ]; then root=$c; break; fi
done
problems=()
if [ -z "$root" ]; then
  problems+=("no CUDA toolkit: none of ${candidates[*]} holds include/cuda_runtime.h and bin/nvcc (set CUDA_HOME)")
fi
if ! command -v ninja > /dev/null 2>&1 && ! "${PYTHON:-python3}" -c "import ninja" > /dev/null 2>&1; then
  problems+=("no ninja (pip install ninja, or the distribution's ninja-build): the build would compile one file at a time")
fi
if [ ${#problems[@]} -gt 0 ]; then
  printf 'missing: %s\n' "${problems[@]}" >&2
  exit 1
fi
echo "$root"
