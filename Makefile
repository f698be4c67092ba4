# The map of the project. A user needs two targets: `make reports` and `make test`.
# Everything else (the environment included) is built on demand.

# the interpreter .venv is made with (only when it is made); unset: the fastest build of python3's own version here
# (scripts/pick_python.py: Debian's optimised 3.11 ran make reports in 15% less CPU time than pyenv's source build).
# make PYTHON=python3 keeps the default one
PYTHON ?=
# pytest-xdist workers of `make test` (they share one run of each notebook; 1: no workers, all in one process)
TEST_WORKERS ?= 2
VENV   := .venv
BIN    := $(VENV)/bin
PARAMS ?= params/default.yaml
CONFIG := $(basename $(notdir $(PARAMS)))
# the project and what it needs to compute (make reports); then also the test tools and JupyterLab (make test, lab)
STAMP  := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
DEV_EXTRAS := test,lab
# pip prints only errors unless V=1 (its warnings about this machine's package indexes are not the project's)
PIP    := $(BIN)/python -m pip install $(if $(filter-out 0,$(V)),,-qq)

.DEFAULT_GOAL := help
.PHONY: help setup reports check-results check-other-cpu golden test data public corpus failure-corpus lab bench clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-15s %s\n", $$1, $$2}'

setup: $(DEV_STAMP) ## create .venv, install the project (editable) with its pinned dependencies, the test tools, JupyterLab and its Jupyter kernel

# The bytecode is written after the install, on every core and without the packages' own test suites, which
# nothing imports (pip would compile every file, one at a time): a third of the install's time. Bytecode is a cache,
# so a file that does not compile (another Python's test data) is left to be compiled by nobody, as pip leaves it.
define install
	@test -x $(BIN)/python || $(or $(PYTHON),$$(python3 scripts/pick_python.py)) -m venv $(VENV)
	$(PIP) --no-compile -e '$(1)'
	$(BIN)/python -m compileall -qq -j 0 -x '/tests/' $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))') || true
	$(BIN)/python -m ipykernel install --sys-prefix --name dlcluster --display-name "Python (dlcluster)" >/dev/null
endef

# make reports installs only what computes the reports (105 packages instead of 149: pip 36 s instead of 58 s); the
# development extras (test, lab) change no cached result (dlcluster.codeversion.development_only)
$(STAMP): pyproject.toml
	$(call install,.)
	@touch $@

$(DEV_STAMP): pyproject.toml
	$(call install,.[$(DEV_EXTRAS)])
	@touch $(STAMP) $@

reports: $(STAMP) ## execute every notebook with $(PARAMS) into reports/$(CONFIG)/ (+ HTML, figures, results.json); V=1 shows everything
	$(BIN)/dlcluster reports --params $(PARAMS)$(if $(filter-out 0,$(V)), -v)

check-results: reports ## compare reports/$(CONFIG)/ with the golden results golden/$(CONFIG).yaml (fails on any figure that moved)
	$(BIN)/dlcluster check-results reports/$(CONFIG)

# numpy held to its baseline SIMD paths and OpenBLAS on an older kernel: the arithmetic of an x86 CPU without AVX2
OTHER_CPU := NPY_DISABLE_CPU_FEATURES=X86_V3 OPENBLAS_CORETYPE=Sandybridge

check-other-cpu: $(STAMP) ## rebuild every report as on an older CPU (numpy's baseline SIMD, another BLAS kernel) into reports/$(CONFIG)-other-cpu/ and compare it with the same golden results
	$(OTHER_CPU) $(BIN)/dlcluster reports --params $(PARAMS) --out reports/$(CONFIG)-other-cpu
	$(OTHER_CPU) $(BIN)/dlcluster check-results reports/$(CONFIG)-other-cpu --golden golden/$(CONFIG).yaml

golden: reports ## rewrite golden/$(CONFIG).yaml from reports/$(CONFIG)/ on purpose: commit its diff with the change that moved it
	$(BIN)/dlcluster golden reports/$(CONFIG)

test: $(DEV_STAMP) ## the linter (ruff, rules in pyproject.toml), then unit tests and a papermill run of every notebook with params/ci.yaml
	$(BIN)/ruff check lib tests bench scripts
	$(BIN)/python -m pytest $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist worksteal)

data: $(STAMP) ## download the full Philly trace (sha256-verified), extract to data/raw/philly, ingest to data/philly
	$(BIN)/dlcluster data

public: $(STAMP) ## rebuild data/public (Parquet) from the verbatim copies in data/external
	$(BIN)/dlcluster build-public

corpus: $(STAMP) ## rebuild data/corpus (real CPU training runs with scikit-learn; seeded)
	$(PIP) -e '.[corpus]'
	$(BIN)/python scripts/make_training_corpus.py

failure-corpus: $(STAMP) ## rebuild data/failure_logs by running small programs that really fail (needs gcc, g++)
	$(PIP) -e '.[failure-corpus]'
	$(BIN)/python scripts/make_failure_corpus.py --mpi-bin $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("scripts"))')

# tests/test_lab.py starts the server with this recipe line (plus --no-browser, a token and a port).
lab: $(DEV_STAMP) ## open JupyterLab on the notebooks, with the kernel "Python (dlcluster)"
	$(BIN)/jupyter lab --ServerApp.root_dir=notebooks --MappingKernelManager.default_kernel_name=dlcluster

bench: $(STAMP) ## speed and memory benchmarks, results in bench/results/ (~20-30 min, ~8 GB free disk)
	@mkdir -p bench/results
	@for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean: ## remove built reports and caches (keeps .venv and data)
	rm -rf reports/*/ reports/.sweep-cache .pytest_cache .ruff_cache .hypothesis bench/results
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
