# Two commands do everything: `make demo` and `make test`. Both set up first (idempotent).
VENV    ?= .venv
PY      := $(VENV)/bin/python
PIP     := $(PY) -m pip install -q --disable-pip-version-check -c constraints.txt
PYTHON3 ?= python3

.PHONY: setup setup-test demo test test-fast clean

$(PY):
	$(PYTHON3) -m venv $(VENV)

# Re-install only when the declared or pinned dependencies change.
$(VENV)/.setup-runtime: pyproject.toml constraints.txt | $(PY)
	$(PIP) -e . 2>&1 | grep -v "is ignored: it is neither" || true
	$(PY) -c "import engine, loadgen, warehouse, rca, flows"
	touch $@

$(VENV)/.setup-test: $(VENV)/.setup-runtime
	$(PIP) -e '.[test,eval]' 2>&1 | grep -v "is ignored: it is neither" || true
	$(PY) -c "import pytest, transformers, triton"
	bash scripts/setup-browser.sh
	touch $@

setup: $(VENV)/.setup-runtime
setup-test: $(VENV)/.setup-test

demo: setup
	$(VENV)/bin/spikelens demo

test: setup-test
	$(VENV)/bin/pytest -q

# Unit tests only (no end-to-end runs): the inner loop while developing.
test-fast: setup-test
	$(VENV)/bin/pytest -q -m "not e2e"

clean:
	rm -rf $(VENV) .spikelens
