# letterlog — two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast install-servers venv lint typecheck services bench bench-all clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,postgres,hbase,kafka,spark,bench,ops,directory]'
	touch $(STAMP)

# the lda's compiled hand-off client, beside the letterlog it falls back to (ADR 0087)
LDA_CLIENT := $(VENV)/bin/letterlog-lda
CC ?= cc
$(LDA_CLIENT): adapters/startup/lda_client.c $(STAMP)
	$(CC) -O2 -Wall -Wextra -Werror -o $@ adapters/startup/lda_client.c

venv: $(STAMP) $(LDA_CLIENT)

demo: $(STAMP) $(LDA_CLIENT)
	rm -rf demo-data
	$(VENV)/bin/letterlog --data demo-data init
	$(VENV)/bin/letterlog --data demo-data demo

# the whole suite on every core and then some (pytest-xdist: most server tests wait, they do
# not compute); tests that share a server run on one worker (tests/conftest.py, docs/testing.md)
TEST_WORKERS ?= 4
PYTEST_ARGS  ?=
test: $(STAMP) $(LDA_CLIENT) install-servers
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# PostgreSQL, Postfix, Dovecot, slapd (Debian packages), HBase, Kafka (Maven jars): once
install-servers: $(STAMP)
	$(PY) -m devtools.devservers install

# the unit, property and integration tests, without servers (PostgreSQL, HBase, Kafka, Spark,
# Postfix, Dovecot, slapd), slow tests (a second process, seconds of waiting) or the benchmark
# harness, on both cores: about a minute, for the edit-test loop; `make test` is the suite
FAST_WORKERS ?= 2
test-fast: $(STAMP)
	$(PY) -m pytest -q -n $(FAST_WORKERS) --dist loadgroup \
	  -m "not services and not spark and not slow and not bench and not wallclock" \
	  tests/unit tests/property tests/integration

lint: $(STAMP)
	$(VENV)/bin/ruff check domain projections adapters spark_replay devtools tests
	$(VENV)/bin/mypy domain projections adapters spark_replay devtools
	$(VENV)/bin/lint-imports --no-cache

services: $(STAMP)
	$(PY) -m devtools.devservers up

bench: $(STAMP)
	$(VENV)/bin/letterlog bench ingest --json

# every benchmark, JSON and a plot each in bench-results/ (stream starts Kafka and HBase)
bench-all: $(STAMP)
	$(PY) -m devtools.devservers install
	mkdir -p bench-results
	for b in ingest project rebuild query stream; do \
	  $(VENV)/bin/letterlog bench $$b --json --plot bench-results/$$b.png \
	    | tee bench-results/$$b.json || exit 1; \
	done

clean:
	rm -rf $(VENV) demo-data letterlog-data .pytest_cache .mypy_cache .ruff_cache
