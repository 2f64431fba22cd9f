# Two entry points (see README): `make ask Q="..."` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
STAMP  := $(VENV)/.installed-stamp
Q      ?= why is NCCL hanging

.PHONY: ask test index lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

ask: $(STAMP)
	$(VENV)/bin/traindoc index
	$(VENV)/bin/ask "$(Q)"

index: $(STAMP)
	$(VENV)/bin/traindoc index

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(VENV)/bin/ruff check agent corpus tools ui tests benchmarks
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(VENV)/bin/python benchmarks/run_all.py

clean:
	rm -rf .traindoc .pytest_cache
