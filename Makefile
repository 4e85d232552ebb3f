# `make run` starts a broker, `make test` runs every test; both set up what they need first
# (scripts/setup.sh is idempotent and a near no-op when nothing changed).
VENV   := .venv
PYTHON := $(VENV)/bin/python

.PHONY: setup run test bench lint

setup:
	@bash scripts/setup.sh

run: setup
	$(VENV)/bin/odradek serve $(ARGS)

# Every test, every marker. Extra pytest arguments: make test PYTEST_ARGS='-k fetch -x'
test: setup
	$(PYTHON) -m pytest $(PYTEST_ARGS)

bench: setup
	$(PYTHON) -m bench $(ARGS)

# The packages the type checker runs clean over ([tool.mypy] in pyproject.toml; issue 12 item 5).
MYPY_PATHS := odradek/wire odradek/log odradek/coordinator odradek/broker odradek/testing \
              odradek/cli_commands odradek/cli.py

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy $(MYPY_PATHS)
