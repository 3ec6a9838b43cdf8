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

.PHONY: help venv deps install ext test test-fast bench redundancy reproduce reproduce-sc24 reproduce-sc24-table1 reproduce-sc24-fig11 reproduce-table-size reproduce-recsys24 reproduce-compression reproduce-tt-quality reproduce-aa-schedule figures cuda-check device-check clean

help:
	@echo "make test            set up .venv, build the native ops, run pytest"
	@echo "make reproduce-sc24  set up, run reproduce/experiments/sc24.toml, write results/sc24 and figures/sc24"
	@echo "make bench           pytest-benchmark: dense baselines and the TT kernel roofline; lookup redundancy"
	@echo "make reproduce-sc24-table1  the 1e8-row Table 1 / Fig 11 analogue"
	@echo "make reproduce-sc24-fig11  EcoRec's Fig 11 configuration beside its artifact's ratios"
	@echo "make reproduce-recsys24  EMBark planner vs baselines on gloo ranks, and modeled at 8-128 GPUs"
	@echo "make reproduce       both (cpu profile: 3 rounds, then rounds until the headline ratios resolve; under an hour on 2 cores: README); PROFILE=paper LAUNCHER=slurm for a cluster"
	@echo "make reproduce-table-size  one table of 1e5..1e9 rows, dense vs TT"
	@echo "make reproduce-compression  hash, QR, MD, TT, fp16 and examples/lowrank.py at 1/10..1/1000 of the dense bytes (DATA=DIR: yours)"
	@echo "make reproduce-tt-quality  every table TT vs dense on small tables: rank, initializer, learning rate, optimizer"
	@echo "make reproduce-aa-schedule  the A/A control in sequential and in duet rounds: which the timed profiles use"
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

test: install
	$(PY) -m pytest -q -p no:cacheprovider --durations=15 tests

# the record lands in this machine's result set: results/bench/<machine>/benchmarks.json
bench: install redundancy
	$(VENV)/bin/dlrmbench calibrate --if-missing $(MACHINE_ARG)
	dir=results/bench/$$($(VENV)/bin/dlrmbench env --slug $(MACHINE_ARG)) && mkdir -p $$dir && \
	$(PY) -m pytest -q -p no:cacheprovider benchmarks --benchmark-only --benchmark-columns=median,iqr,rounds \
		--benchmark-json=$$dir/benchmarks.json

redundancy: install
	$(VENV)/bin/dlrmbench redundancy --data criteo-kaggle --data criteo-terabyte-40m --data dcnv2-multihot \
		--data sc24-f4 --data sc24-f4-ranked -b 2048 -b 8192 -b 32768

# PROFILE: cpu (default; sc24 + recsys24: 3 rounds of every point, then rounds of the headline points until resolved), cpu-full (every point, own result sets) or paper
# (the papers' sizes on a GPU cluster: add LAUNCHER=slurm to get an sbatch script); ROOT: where results/ and
# figures/ go
# MACHINE: the result set's name (default: this machine's slug, e.g. amd-epyc-2c; required with LAUNCHER=slurm);
# REPEATS: runs per point, interleaved (default: the profile's, else 3)
PROFILE ?= cpu
LAUNCHER ?= local
ROOT ?= .
MACHINE ?=
REPEATS ?=
MACHINE_ARG = $(if $(MACHINE),--machine $(MACHINE))
# `dlrmbench reproduce EXPERIMENT`: its sweep, then the models its TOML names (the scale model after sc24)
REPRODUCE = $(VENV)/bin/dlrmbench reproduce --profile $(PROFILE) --launcher $(LAUNCHER) --root $(ROOT) $(MACHINE_ARG) \
	$(if $(REPEATS),--repeats $(REPEATS))

reproduce-sc24: install
	$(REPRODUCE) sc24

reproduce-sc24-table1: install
	$(REPRODUCE) sc24_table1

# EcoRec's Figure 11 configuration (28 Meta-like tables, D 32, R 32) beside the artifact's ratios (PROFILE=gpu on a GPU)
reproduce-sc24-fig11: install
	$(REPRODUCE) sc24_fig11

# one table of 1e5...1e9 rows, dense vs TT
reproduce-table-size: install
	$(REPRODUCE) table_size

# hash, QR, MD, TT (EcoRec) and fp16 tables at 1/10, 1/100, 1/1000 of the dense bytes: held-out quality, step time,
# samples to target over 3 seeds (on its own synthetic data, written once; DATA=DIR: a prepared dataset of yours, in
# results/compression_real: the last --profile given holds)
# OUTSIDE: the outside systems raced beside ours in the budget grid's $IMPL slot (default: the worked example)
OUTSIDE ?= examples/lowrank.py:LowRankEmbedding
reproduce-compression: install
	$(REPRODUCE) compression $(if $(DATA),--profile real --data $(DATA)) $(foreach s,$(OUTSIDE),--impl $(s))

# every table TT against dense tables on small tables (3 to 3,000 rows) over 3 seeds: rank, initializer, the cores'
# learning rate and optimizer, the oversize rule (docs/studies/compression.md)
reproduce-tt-quality: install
	$(REPRODUCE) tt-quality

# the A/A control measured in sequential and in duet rounds with the same wall time (docs/methodology.md): the timed
# profiles use the schedule that came out tighter
reproduce-aa-schedule: install
	$(REPRODUCE) aa-schedule
	$(REPRODUCE) aa-schedule --profile duet

reproduce: reproduce-sc24 reproduce-recsys24

# RecSys'24 (EMBark): this machine's calibration profile when it has none (the planner plans on it; a few minutes;
# on a cluster run `dlrmbench calibrate --machine NAME` on a node first: the sweep says so otherwise),
# the planner vs its baselines measured on gloo ranks (scaled workloads), then the modeled 8-128 GPU DGX-H100
# speedups over table_row_wise
reproduce-recsys24: install
	$(if $(filter local,$(LAUNCHER)),$(VENV)/bin/dlrmbench calibrate --if-missing --root $(ROOT) $(MACHINE_ARG))
	$(REPRODUCE) recsys24

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
	rm -rf build impls/core/_C*.so $(EXT_STAMP)
