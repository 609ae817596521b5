# Batch Size Lab. `make run` serves the lab; `make test` runs the whole suite.
# Both create .venv and install on first use. TORCH is the torch requirement: plain "torch"
# (pip picks the CUDA build on Linux) for real use; CI pins a CPU build: make test TORCH=torch==2.13.0
PYTHON ?= python3
TORCH ?= torch
PORT ?= 8501
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml scripts/install.sh | $(BIN)/python
	scripts/install.sh $(BIN)/pip "$(TORCH)" dev
	touch $@

install: $(STAMP)

run: install
	$(BIN)/streamlit run app.py --server.port $(PORT)

test: install
	$(BIN)/ruff check .
	$(BIN)/pytest

lint: install
	$(BIN)/ruff check .

bench: install
	$(BIN)/python bench/engine_overhead.py
	$(BIN)/python bench/latency.py
	$(BIN)/python bench/sweep_bench.py
	$(BIN)/python bench/dynamics_bench.py
	$(BIN)/python bench/lessons_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
