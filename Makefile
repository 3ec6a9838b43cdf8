# dlrmbench: every target sets up what it needs. `make test` and `make reproduce-sc24` work from nothing.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
export MAX_JOBS ?= 2

TORCH_CPU := torch==2.13.0
FBGEMM_CPU := fbgemm-gpu-cpu==1.8.0
# TorchRec (the `torchrec` peer): its fbgemm-gpu requirement is met by fbgemm-gpu-cpu, hence --no-deps plus its
# light dependencies
TORCHREC_CPU := torchrec==1.8.0
TORCHREC_DEPS := tensordict==0.15.3 torchmetrics==1.0.3 pyre-extensions iopath tqdm
DEPS_STAMP := $(VENV)/.dlrmbench-deps
EXT_STAMP := $(VENV)/.dlrmbench-ext
CSRC := $(wildcard impls/core/csrc/*.cpp impls/core/csrc/cpu/*.cpp impls/core/csrc/cuda/*.cu impls/core/csrc/*.h impls/core/csrc/*/*.h)

.PHONY: help venv deps install ext test bench redundancy reproduce figures cuda-check device-check clean

# Every target below is one `dlrmbench` command (or the build); `make reproduce-NAME` runs any experiment of
# reproduce/experiments/NAME.toml ('-' or '_' alike): the folder is the one list of them.
help:
	@echo "make test            set up .venv, build the native ops, run pytest"
	@echo "make reproduce       sc24 and recsys24 end to end: \`dlrmbench reproduce\` (the cpu profile: rounds until the headline ratios resolve; under an hour on 2 cores: README); PROFILE=paper LAUNCHER=slurm for a cluster"
	@for f in reproduce/experiments/*.toml; do \
		n=$$(basename $$f .toml | tr _ -); d=$$(sed -n 's/^description = "\(.*\)"$$/\1/p' $$f | head -1); \
		printf "make reproduce-%-14s %s\n" "$$n" "$$d"; done
	@echo "make bench           \`dlrmbench bench\`: lookup redundancy, this machine's calibration when missing, then the benchmarks (dense baselines, the TT kernels' roofline)"
	@echo "make redundancy      \`dlrmbench redundancy\`: distinct ids and TT prefix groups per batch of each source"
	@echo "make figures         redraw every figure and results/REPORT.md from the committed records (no runs)"
	@echo "make install         set up .venv and build the native ops only"
	@echo "make ext             rebuild the native ops after a C++ edit"
	@echo "make cuda-check      compile-check the CUDA kernels in a separate venv (needs nvcc)"
	@echo "make device-check    on a GPU machine: build with CUDA, run gpu tests and a short benchmark"

# A base python whose torch already has CUDA lends it to the venv (system site packages), so the
# CUDA build is never replaced by the CPU wheel.
$(PY):
	@if $(PYTHON) -c "import torch, sys; sys.exit(0 if torch.version.cuda else 1)" 2>/dev/null; then \
		echo "base $(PYTHON) has a CUDA torch: the venv uses it"; \
		$(PYTHON) -m venv --system-site-packages $(VENV); \
	else \
		$(PYTHON) -m venv $(VENV); \
	fi

venv: $(PY)

$(DEPS_STAMP): pyproject.toml | $(PY)
	$(PIP) install -q --upgrade "setuptools>=64" wheel ninja
	@if $(PY) -c "import torch, sys; sys.exit(0 if torch.version.cuda else 1)" 2>/dev/null; then \
		echo "torch $$($(PY) -c 'import torch; print(torch.__version__)') has CUDA: keeping it (install a matching fbgemm-gpu yourself for dense-fbgemm)"; \
	else \
		$(PIP) install -q $(TORCH_CPU) $(FBGEMM_CPU) && \
		$(PIP) install -q --no-deps $(TORCHREC_CPU) && $(PIP) install -q $(TORCHREC_DEPS); \
	fi
	DLRMBENCH_NO_EXT=1 $(PIP) install -q --no-build-isolation -e '.[dev]'
	touch $@

deps: $(DEPS_STAMP)

$(EXT_STAMP): $(DEPS_STAMP) $(CSRC) setup.py
	$(PY) setup.py -q build_ext --inplace
	touch $@

ext: $(EXT_STAMP)
install: $(EXT_STAMP)

# pytest-xdist workers (default: 2, the reference machine's cores; a test spawns its own ranks too)
TEST_WORKERS ?= 2
test: install
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --durations=15 tests

# the record lands in this machine's result set: results/bench/<machine>/benchmarks.json
bench: install
	$(VENV)/bin/dlrmbench bench $(MACHINE_ARG)

redundancy: install
	$(VENV)/bin/dlrmbench redundancy

# PROFILE: a [profiles.NAME] of each experiment (default: its reference profiles, e.g. cpu; cpu-full: every point, own
# result sets; paper: the papers' sizes on a GPU cluster: add LAUNCHER=slurm to get an sbatch script); ROOT: where
# results/ and figures/ go; MACHINE: the result set's name (default: this machine's slug, e.g. amd-epyc-2c; required
# with LAUNCHER=slurm); REPEATS: runs per point, interleaved (default: the profile's, else 3); DATA=DIR: a prepared
# dataset of yours (the experiment's profiles for it: compression, accuracy); OUTSIDE: the outside systems raced in an
# experiment's $$IMPL slot (compression's default: its worked example, examples/lowrank.py)
PROFILE ?=
LAUNCHER ?= local
ROOT ?= .
MACHINE ?=
REPEATS ?=
DATA ?=
OUTSIDE ?=
MACHINE_ARG = $(if $(MACHINE),--machine $(MACHINE))
REPRODUCE = $(strip $(VENV)/bin/dlrmbench reproduce $(if $(PROFILE),--profile $(PROFILE)) --launcher $(LAUNCHER) --root $(ROOT) \
	$(MACHINE_ARG) $(if $(REPEATS),--repeats $(REPEATS)) $(if $(DATA),--data $(DATA)) $(foreach s,$(OUTSIDE),--impl $(s)))

reproduce: install
	$(REPRODUCE)

reproduce-%: install
	$(REPRODUCE) $*

figures: install
	$(VENV)/bin/dlrmbench figures $(MACHINE_ARG)

# Compile-check the CUDA kernels on a machine with nvcc but no GPU (a separate venv of several GB). The torch is the
# oldest a GPU machine of ours may have (2.11, CUDA 13.0): an API it lacks fails here, not there. A warning in our
# own sources fails the check (the log: build/cuda-check/build.log).
CUDA_VENV ?= .venv-cuda
TORCH_CUDA_CHECK := torch==2.11.0
cuda-check:
	@root=$$(bash scripts/cuda_toolkit.sh) || exit 1; \
	test -x $(CUDA_VENV)/bin/python || $(PYTHON) -m venv $(CUDA_VENV); \
	$(CUDA_VENV)/bin/pip install -q $(TORCH_CUDA_CHECK) "setuptools>=64" wheel ninja || exit 1; \
	mkdir -p build/cuda-check; set -o pipefail; \
	stamp=impls/core/_C.build.json; test -f $$stamp && cp $$stamp build/cuda-check/cpu-build.json; \
	CUDA_HOME=$$root LIBRARY_PATH=$$root/lib:$$root/lib64 DLRMBENCH_CUDA=1 TORCH_CUDA_ARCH_LIST="9.0" \
		$(CUDA_VENV)/bin/python setup.py -q build_ext --build-temp build/cuda-check --build-lib build/cuda-check/lib \
		2>&1 | tee build/cuda-check/build.log; ok=$$?; \
	if test -f build/cuda-check/cpu-build.json; then cp build/cuda-check/cpu-build.json $$stamp; else rm -f $$stamp; fi; \
	test $$ok = 0 || exit 1; \
	if grep -n "impls/core/csrc.*warning" build/cuda-check/build.log; then \
		echo "cuda-check: warnings in our sources (above)"; exit 1; fi; \
	echo "cuda-check: every source compiled for CUDA (torch $$($(CUDA_VENV)/bin/python -c 'import torch; print(torch.__version__)'), $$root)"

# On the GPU machine: its python3 already has a CUDA torch; build in place with every core without touching it, then
# the gpu tests, the CPU op tests and the benchmarks, each step under its own limit (the budget: the script's head),
# every step run whatever the others did; everything in one archive under $$OUT (default results/device), exit 1 if
# any step failed.
device-check:
	bash scripts/device_check.sh

clean:
	if test -x $(PY); then $(PY) -c "from reproduce.harness.derived_cache import clear, cache_dir; print(f'removed {clear()} cached derivations from {cache_dir()}')"; fi
	rm -rf build impls/core/_C*.so $(EXT_STAMP)
