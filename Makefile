# steplabel: `make run` to try it, `make test` to check it. See README.md.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
PIP_INSTALL := $(BIN)/pip install --quiet --disable-pip-version-check --no-compile
# pip compiles what it installs to bytecode on one core, two thirds of an install's time;
# compileall does the same files on every core (61 -> 46 s on 2 cores, BENCHMARKS). Like pip,
# it passes over the odd file this Python cannot compile (torch ships one for 3.12).
COMPILE_VENV := $(BIN)/python -m compileall -qq -j 0 $(VENV)/lib || true

.PHONY: run model worker serve install install-dev static migrate seed export test lint format bench clean

# `make run` runs the worker too, so it installs the worker extra (CPU torch from the pin).
$(BIN)/steplabel: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) --upgrade pip
	$(PIP_INSTALL) -e '.[worker]'
	$(COMPILE_VENV)
	@touch $@

$(VENV)/.dev-installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) --upgrade pip
	$(PIP_INSTALL) -e '.[dev,worker]'
	$(COMPILE_VENV)
	@touch $@

install: $(BIN)/steplabel

install-dev: $(VENV)/.dev-installed

static/vendor/.installed: package.json package-lock.json scripts/install_vendor.sh
	bash scripts/install_vendor.sh
	@touch $@

static: static/vendor/.installed

migrate: install
	$(BIN)/steplabel migrate

seed: migrate
	$(BIN)/steplabel seed-demo

run: seed static
	HOST=$(HOST) PORT=$(PORT) bash scripts/run.sh

# The worker's default base model, SmolLM2-135M (worker/pretrained.py); `make run` does it too.
model: install
	$(BIN)/python -m worker prepare

worker: migrate
	$(BIN)/python -m worker

serve: install static
	$(BIN)/uvicorn app.main:app --no-proxy-headers --host $(HOST) --port $(PORT)

export: migrate
	@mkdir -p exports
	$(BIN)/steplabel export --format prm800k --output exports/prm800k-$$(date -u +%Y%m%dT%H%M%SZ).jsonl

# pytest-xdist: a test process per core (on 2 cores: 5:03 with 2 processes, 5:02 with 3,
# 5:28 with 4); TEST_PROCESSES=0 runs them all in this one. Tests marked xdist_group (a
# browser module, the pretrained model's) stay in one process.
TEST_PROCESSES ?= auto

test: install-dev static
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/pytest --numprocesses $(TEST_PROCESSES) --dist loadgroup

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: install-dev
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: install-dev
	$(BIN)/python -m bench.export_import

clean:
	rm -rf $(VENV) static/vendor node_modules .pytest_cache .ruff_cache .mypy_cache
