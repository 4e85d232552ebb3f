# `make run` starts a broker, `make test` runs every test; each sets up what it needs first
# (scripts/setup.sh is idempotent and a near no-op when nothing changed):
#   make run     the venv with odradek and its runtime deps only (under a minute on a fresh
#                machine): `scripts/setup.sh run`
#   make test, make lint, make bench
#                everything else too: the test extra, kcat, java, zookeeper, and the pipelines
#                extra (pyspark, apache-flink) unless ODRADEK_PIPELINES=0:
#                `make test ODRADEK_PIPELINES=0` (the Spark and Flink tests then skip)
VENV   := .venv
# (not PYTHON: scripts/setup.sh takes PYTHON from the environment, the interpreter for .venv)
VENV_PYTHON := $(VENV)/bin/python

.PHONY: setup setup-run run test bench bench-scale lint

setup:
	@ODRADEK_PIPELINES=$(ODRADEK_PIPELINES) bash scripts/setup.sh test

setup-run:
	@bash scripts/setup.sh run

run: setup-run
	@echo "make run: the odradek command is $(VENV)/bin/odradek; in another shell: source $(VENV)/bin/activate"
	$(VENV)/bin/odradek serve $(ARGS)

# Every test, every marker. Extra pytest arguments: make test PYTEST_ARGS='-k fetch -x'
test: setup
	$(VENV_PYTHON) -m pytest $(PYTEST_ARGS)

# make bench: the native and Python-client rows with the machine's ceilings, then odradek and
# Kafka 4.4 side by side (bench/against.py, ~25 minutes), then the scale rows;
# the scale part alone takes 5-8 minutes: make bench-scale
bench: setup
	$(VENV_PYTHON) -m bench $(ARGS)
	$(VENV_PYTHON) -m bench --against kafka $(AGAINST_ARGS)
	$(VENV_PYTHON) -m bench.scale $(SCALE_ARGS)

bench-scale: setup  # 10,000 partitions, 2,000 connections + 1,000 groups, idle fetch
	$(VENV_PYTHON) -m bench.scale $(SCALE_ARGS)

# The packages the type checker runs clean over ([tool.mypy] in pyproject.toml).
MYPY_PATHS := odradek/wire odradek/log odradek/coordinator odradek/broker odradek/testing odradek/security \
              odradek/cli_commands odradek/cli.py odradek/registry

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy $(MYPY_PATHS)
	$(VENV)/bin/lint-imports
