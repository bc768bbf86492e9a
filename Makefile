# Every target works on a fresh clone: it creates .venv (unless a virtualenv is active) and
# installs the project with all extras before running anything.
SHELL := /bin/bash
VENV ?= .venv
ifdef VIRTUAL_ENV
PYTHON := python
STAMP := $(VIRTUAL_ENV)/.readonly-rag-installed
else
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.readonly-rag-installed
endif
PYTEST_ARGS ?=

.PHONY: install test lint format demo bench bench-quick clean

$(STAMP): pyproject.toml
	@if [ -z "$$VIRTUAL_ENV" ] && [ ! -x "$(VENV)/bin/python" ]; then python3 -m venv $(VENV); fi
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -e ".[all,dev]"
	@touch $(STAMP)

install: $(STAMP)

test: install
	$(PYTHON) -m pytest $(PYTEST_ARGS)

lint: install
	$(PYTHON) -m ruff check persistence rag_agent tests
	$(PYTHON) -m ruff format --check persistence rag_agent tests
	$(PYTHON) -m mypy --strict persistence rag_agent
	$(PYTHON) -c "from importlinter.cli import lint_imports_command; lint_imports_command()"

format: install
	$(PYTHON) -m ruff format persistence rag_agent tests
	$(PYTHON) -m ruff check --fix persistence rag_agent tests

demo: install
	$(PYTHON) -m rag_agent.cli demo

bench: install
	$(PYTHON) -m pip install --quiet -e ".[all,dev,bench]"
	$(PYTHON) -m tests.benchmarks.run

bench-quick: install
	$(PYTHON) -m pip install --quiet -e ".[all,dev,bench]"
	$(PYTHON) -m tests.benchmarks.run --quick

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
