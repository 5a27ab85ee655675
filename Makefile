# Two entry points: `make run` starts the lab, `make test` runs every test.
# Both use one virtual environment in .venv, (re)built when a requirements file changes.
# For the inner loop: `make test-fast` (tests/unit without the slow ones, under a minute)
# and `make lint`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.runtime-installed
DEV := $(VENV)/.dev-installed

.PHONY: run test test-fast lint bench recipes screenshots

$(RUNTIME): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	# The project itself, editable, for the `optlab` command (same as `python -m core`).
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

$(DEV): $(RUNTIME) requirements-dev.txt
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

run: $(RUNTIME)
	$(BIN)/python -m ui.serve run app.py --server.address 127.0.0.1

# Two passes: most tests two at a time (pytest-xdist, each file on one worker, handed out
# in the order tests/conftest.py sorts them: the longest first), then the tests that time
# training while it is watched (marked `serial`) alone, so that the other pass's load
# cannot bend what they measure. The second pass collects only the files that hold them
# (tests/unit/test_make_test_passes.py checks that no other file marks a test `serial`).
TEST_WORKERS ?= 2
SERIAL_FILES := tests/system/test_watching.py

test: $(DEV)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not serial"
	$(BIN)/python -m pytest -m serial $(SERIAL_FILES)

test-fast: $(DEV)
	$(BIN)/python -m pytest tests/unit -m "not slow" -q

bench: $(DEV)
	$(BIN)/python -m bench

# Every recipe (core/recipes) and its negative control at SEEDS seeds: recipes/results.md, and docs/recipes.md's table.
SEEDS ?= 5
recipes: $(DEV)
	$(BIN)/python -m bench.recipes --seeds $(SEEDS)

# The README's tour: a short real race and sweep on a fresh store, each page shot in
# Chromium at 1280x800 into docs/images/ (a few minutes; not part of `make test`).
screenshots: $(DEV)
	$(BIN)/python -m bench.screenshots

lint: $(DEV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	# Engine and EngineClient both satisfy core.engine.api.Runs ([tool.mypy] in pyproject.toml).
	$(BIN)/python -m mypy
