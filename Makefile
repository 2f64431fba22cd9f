# Two entry points (see README): `make ask Q="..."` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
STAMP  := $(VENV)/.installed-stamp
Q      ?= why is NCCL hanging

.PHONY: ask test index lint bench clean browser

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

# Browser tests use Debian's chromium and CJK fonts (never `playwright install`).
browser:
	@command -v chromium >/dev/null && fc-list 2>/dev/null | grep -qi "noto.*cjk" || \
	  { SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); $$SUDO apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium fonts-noto-cjk >/dev/null; }

test: $(STAMP) browser
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(VENV)/bin/ruff check common agent corpus tools jobs ui tests benchmarks
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(VENV)/bin/python benchmarks/run_all.py

clean:
	rm -rf .traindoc .pytest_cache
