# Frame Governance: `make help` lists every target.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
# pytest-xdist workers for `make test` and `make test-fast`; each has its own test database
TEST_WORKERS ?= 2
PYTEST_PARALLEL := $(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadfile
# the inner loop: engine, corpus, service and API tests; no browser, no Celery worker, no bench,
# none of the deployment checks or the ONNX export that start processes or load a second runtime
FAST_TESTS := tests/selection tests/governance tests/backtest tests/api tests/test_foundation.py \
	--ignore=tests/selection/test_embedding_runtimes.py --ignore=tests/governance/test_deploy_settings.py
STAMP  := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help install services stop-services destroy-services migrate demo test test-fast test-engine lint import-fixtures worker beat serve evaluate bench clean

help: ## list every target
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  make %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP) ## create .venv and install the project with its test tools

services: $(STAMP) ## start the embedded PostgreSQL + pgvector and redis (data under .state/)
	$(PY) -m config.embedded start

stop-services: ## stop the embedded PostgreSQL and redis
	$(PY) -m config.embedded stop

destroy-services: ## stop the embedded servers and delete their data (.state/)
	$(PY) -m config.embedded destroy

migrate: $(STAMP) ## apply database migrations
	$(PY) manage.py migrate --no-input

import-fixtures: migrate ## import every corpus under fixtures/ (dev) and fixtures/test/ (test) not loaded yet
	$(PY) manage.py import_fixtures

demo: $(STAMP) ## set up everything, load fixtures, create demo accounts, run a worker and beat and serve http://127.0.0.1:8000
	$(PY) manage.py demo

worker: $(STAMP) ## run one Celery worker process in the foreground
	$(VENV)/bin/celery -A config worker --loglevel=INFO --concurrency=1

beat: $(STAMP) ## run Celery beat in the foreground: the daily retention (apply_retention) and frame health
	$(VENV)/bin/celery -A config beat --loglevel=INFO --schedule .state/celerybeat-schedule

serve: $(STAMP) ## serve the dashboard on http://127.0.0.1:8000 (no worker)
	$(PY) manage.py runserver 127.0.0.1:8000

test: $(STAMP) ## run the whole test suite (engine, services, worker and browser tests) on TEST_WORKERS=2 workers
	$(PYTEST_PARALLEL)

test-fast: $(STAMP) ## run the engine, corpus, service and API tests: no browser, no Celery worker, no bench
	$(PYTEST_PARALLEL) -m "not browser and not worker" $(FAST_TESTS)

test-engine: $(STAMP) ## run the engine tests alone (no Django, no database, seconds)
	$(VENV)/bin/pytest tests/selection/engine -p no:django -W ignore::pytest.PytestConfigWarning

lint: $(STAMP) ## ruff over the project and the import-layer contracts (lint-imports)
	$(VENV)/bin/ruff check config rules authority governance selection backtest bench tests scripts
	$(VENV)/bin/lint-imports

evaluate: $(STAMP) ## run the C0..C6 + oracle ladder on the fixture corpus
	$(PY) manage.py evaluate context-lab

bench: $(STAMP) ## run the performance benchmark at 10k units
	$(PY) manage.py bench --sizes 10000

clean: ## remove caches (keeps .venv and .state)
	find . -name __pycache__ -not -path './.venv/*' -prune -exec rm -rf {} +
	rm -rf .pytest_cache .ruff_cache
