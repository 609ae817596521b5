# Batch Size Lab. `make run` serves the lab; `make test` runs the whole suite.
# Both create .venv and install on first use (scripts/install.sh). TORCH is the torch requirement
# (empty: pyproject.toml's range, the one CI tests); TORCH_INDEX where torch comes from: "auto"
# takes PyTorch's CPU-only wheels on Linux without an NVIDIA driver and pip's index (the CUDA
# build) with one; "cpu", "default" or an index URL choose. CI: TORCH=torch==2.13.0 TORCH_INDEX=default
PYTHON ?= python3
TORCH ?=
TORCH_INDEX ?= auto
# optional extras: EXTRAS=cluster adds PostgreSQL's driver (a course's shared run store)
EXTRAS ?=
PORT ?= 8501
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml scripts/install.sh | $(BIN)/python
	scripts/install.sh $(BIN)/pip "$(TORCH)" dev "$(TORCH_INDEX)" "$(EXTRAS)"
	touch $@

install: $(STAMP)

run: install
	$(BIN)/python -m bsdemo.ui.launch app.py --server.port $(PORT)

test: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: install
	$(BIN)/python bench/engine_overhead.py
	$(BIN)/python bench/latency.py
	$(BIN)/python bench/sweep_bench.py
	$(BIN)/python bench/dynamics_bench.py
	$(BIN)/python bench/lessons_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
