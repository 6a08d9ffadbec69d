# accelboard: `make demo` runs the product with demo data; `make test` runs the whole suite.
#
#   make demo                        # python3, a .venv beside this file, http://127.0.0.1:8000/
#   make demo PYTHON=python3.12      # another interpreter (>= 3.11) for a new .venv
#   make demo ARGS="--port 8001"     # anything `accelboard demo` accepts (--host, --reset, --no-agent)
#   make test                        # installs .[dev] and runs pytest, browser tests included
#   make lint                        # ruff + makemigrations --check

PYTHON ?= python3
VENV ?= .venv
ARGS ?=
PYTEST_ARGS ?=

BIN := $(VENV)/bin
# Stamps newer than pyproject.toml mean "installed and up to date": no pip run, no network.
STAMP_RUN := $(VENV)/.accelboard-installed
STAMP_DEV := $(VENV)/.accelboard-installed-dev
PIP := $(BIN)/python -m pip --disable-pip-version-check

.PHONY: demo test lint format venv install install-dev clean-venv help

help:
	@sed -n '1,8p' Makefile

# The interpreter check runs before anything is created, so an old Python fails with a sentence
# rather than a pip resolver error half-way through an install.
$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { \
		echo "accelboard needs Python >= 3.11, but '$(PYTHON)' was not found; install it or run 'make demo PYTHON=/path/to/python3.12'" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || { \
		echo "accelboard needs Python >= 3.11, but $(PYTHON) is $$($(PYTHON) -c 'import platform; print(platform.python_version())'); run 'make demo PYTHON=python3.12' (or another >= 3.11)" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	@$(PIP) install --quiet --upgrade "pip>=23"

venv: $(BIN)/python
	@$(BIN)/python -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || { \
		echo "$(VENV) was made with Python < 3.11; remove it (make clean-venv) and run again" >&2; exit 1; }
ifeq ($(origin PYTHON),command line)
	@want=$$($(PYTHON) -c 'import platform; print(platform.python_version())' 2>/dev/null); \
	have=$$($(BIN)/python -c 'import platform; print(platform.python_version())'); \
	[ "$$want" = "$$have" ] || echo "note: $(VENV) already exists with Python $$have, not $(PYTHON) ($$want); 'make clean-venv' first to rebuild it" >&2
endif

# The host agent (agents/) is installed beside the server: the demo runs a simulated one.
$(STAMP_RUN): pyproject.toml $(wildcard agents/pyproject.toml) | venv
	$(PIP) install --quiet -e . -e ./agents
	@touch $@

$(STAMP_DEV): pyproject.toml $(wildcard agents/pyproject.toml) | venv
	$(PIP) install --quiet -e '.[dev]' -e ./agents
	@touch $@ $(STAMP_RUN)

install: $(STAMP_RUN)
install-dev: $(STAMP_DEV)

demo: install
	$(BIN)/accelboard demo $(ARGS)

# The server's suite, then the agent's own (plain pytest, no Django: agents/pyproject.toml).
test: install-dev
	$(BIN)/python -m pytest $(PYTEST_ARGS)
	cd agents && ../$(BIN)/python -m pytest -q

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/python manage.py makemigrations --check --dry-run

format: install-dev
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean-venv:
	rm -rf $(VENV)
