# One Makefile that people and CI call. `make demo` and `make test` work on a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: demo demo-bridge test lint fmt bench sysdeps clean docs

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

## Run the demo: agents leave each other messages, a blocked waiter wakes up.
demo: $(STAMP)
	$(PY) examples/demo.py

## The bridge demo: one exchange across two hosts on this machine, the link cut and healed.
demo-bridge: $(STAMP) sysdeps
	$(PY) examples/bridge_demo.py

## System packages the tests drive for real (chromium for the board page, nats-server for the
## bridge, fswatch and wrk for bench).
sysdeps:
	@scripts/sysdeps.sh

## Set up and run the whole test suite.
test: $(STAMP) sysdeps
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

fmt: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

## Benchmarks: prints a table, writes bench/results/latest.json.
bench: $(STAMP) sysdeps
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) bench/results .pytest_cache .mypy_cache .ruff_cache

## Regenerate docs/cli.md from the commands' --help (a test fails when it is stale).
docs: $(STAMP)
	$(PY) scripts/gen_cli_ref.py
