# The two commands a new machine needs: `make demo` and `make test`. Each sets up what is missing first.
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo demo-s3 demo-kafka test test-fast lint format golden differential property chaos bench bench-cluster cluster-queries race airflow lock clean

# make differential N=300 SEED=7: random cases, lockstep against Flink SQL (tests/differential).
# STATE_STORE=memory|rocksdb: the same cases with one of Spark's state stores (stream.state_store;
# default lockstep, its own).
N ?= 300
SEED ?= 1
STATE_STORE ?= lockstep
# ENGINE=spark: the same cases on the spark engine (stream.engine; docs/engines.md).
# CLUSTER=1: lockstep on a standalone cluster started for the run (spark engine unless ENGINE says).
# SOURCES=kafka: lockstep reads the changelogs from Kafka topics on a broker started for the run.
ENGINE ?=
CLUSTER ?=

setup:
	@scripts/setup.sh

demo: setup
	$(BIN)/lockstep demo

# The demo with sources, sinks and run folders on a local S3 server (SeaweedFS) started for it.
demo-s3: setup
	$(BIN)/lockstep demo --local-store

# The demo over Kafka topics: a local broker (KRaft) started for it, each changelog produced to a topic.
demo-kafka: setup
	$(BIN)/lockstep demo --local-kafka

test: setup
	$(BIN)/python -m pytest -q --durations=60

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow"

# ruff (lint and format check) and mypy, as CI runs them; `make format` rewrites the files.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Rewrite the golden explain plans (tests/golden/explain) after an intended planner change.
golden: setup
	$(BIN)/python -m tests.golden.update

differential: setup
	$(BIN)/python -m tests.differential.run --n $(N) --seed $(SEED) --state-store $(STATE_STORE) \
		$(if $(ENGINE),--engine $(ENGINE)) $(if $(CLUSTER),--cluster) $(if $(SOURCES),--sources $(SOURCES))

# make property SCALE=10 SEED=n: the stream-equals-batch properties (aggregates, joins, windows) on
# ten times the examples make test runs, drawn at random from SEED (a new one each run unless
# given; the run's header prints it). make test draws the same, fewer, examples every time.
SCALE ?= 10
PROPERTY_SEED := $(if $(filter command line,$(origin SEED)),$(SEED),$(shell od -An -N4 -tu4 /dev/urandom | tr -d ' '))

property: setup
	@echo "hypothesis seed $(PROPERTY_SEED): make property SCALE=$(SCALE) SEED=$(PROPERTY_SEED) draws these examples again"
	LOCKSTEP_PROPERTY_SCALE=$(SCALE) LOCKSTEP_HYPOTHESIS_PROFILE=property $(BIN)/python -m pytest -q \
		--hypothesis-seed=$(PROPERTY_SEED) tests/integration/test_property.py \
		tests/integration/test_property_joins.py tests/integration/test_windows.py

# make chaos KILLS=10: the kill -9 test with more kills (make test runs 1), and the fuzzer.
KILLS ?= 10

chaos: setup
	CHAOS_KILLS=$(KILLS) $(BIN)/python -m pytest -q tests/chaos

bench: setup
	$(BIN)/python -m tests.benchmarks.bench_stream
	$(BIN)/python -m tests.benchmarks.bench_staging
	$(BIN)/python -m tests.benchmarks.bench_incremental
	$(BIN)/python -m tests.benchmarks.bench_spill
	$(BIN)/python -m tests.benchmarks.bench_fold
	$(BIN)/python -m tests.benchmarks.bench_microbatch
	$(BIN)/python -m tests.benchmarks.bench_check
	$(BIN)/python -m tests.benchmarks.bench_hostile_specs
	$(BIN)/python -m tests.benchmarks.bench_engines
	$(BIN)/python -m tests.benchmarks.bench_store
	$(BIN)/python -m tests.benchmarks.bench_kafka
	$(BIN)/python -m tests.benchmarks.bench_interval_join
	$(BIN)/python -m tests.benchmarks.race $(RACE_ARGS)

# make race RACE_ARGS="--sizes 100000,400000 --classes group_aggregate,inner_join": lockstep's
# stream step and Flink SQL side by side on the same changelog files.
race: setup
	$(BIN)/python -m tests.benchmarks.race $(RACE_ARGS)

# make bench-cluster BENCH_CLUSTER_ARGS="--sizes 200000,800000": both engines at two sizes, the
# spark engine on a standalone cluster (a master and two workers on this machine); time, marginal
# rate, the driver's and the executors' peak memory, the bytes returned to the driver. Then a run
# folder on a local S3 server against a local one, on the same cluster.
bench-cluster: setup
	$(BIN)/python -m tests.benchmarks.bench_cluster $(BENCH_CLUSTER_ARGS)
	$(BIN)/python -m tests.benchmarks.bench_store_cluster

# make cluster-queries: every demo query on a standalone cluster under the spark engine, against
# the local engine (tests/cluster/every_query.py); the generator's classes: make differential CLUSTER=1.
cluster-queries: setup
	$(BIN)/python -m tests.cluster.every_query

airflow: setup
	scripts/airflow.sh

lock:
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^lockstep' > constraints.txt.new
	@echo "review constraints.txt.new and move it over constraints.txt"

clean:
	rm -rf state runs
