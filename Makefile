# aifabric: the two commands users need are `make demo` and `make test`;
# each installs what it needs first (scripts/bootstrap.sh is idempotent).
VENV    ?= .venv
PY      := $(VENV)/bin/python
P4C     ?= p4c-bm2-ss
P4_MAIN := p4src/fabric.p4

.PHONY: setup demo test test-bmv2 p4 p4names bench clean

setup:
	@bash scripts/bootstrap.sh

demo: setup
	$(VENV)/bin/aifabric demo

# pytest-xdist workers, one a core; the tests that bring up labs share one of them
# (tests/conftest.py). One more (TEST_WORKERS=3 on 2 cores) took 22 min instead of 28, but left
# timing checks of the busy-machine kind failing when a build ran beside it.
TEST_WORKERS ?= $(shell nproc)

test: setup
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup -ra --durations=30 $(PYTEST_ARGS)

# The BMv2 whole-fabric modules too (tests/targets.py: minutes each, where BMv2 is installed).
test-bmv2: setup
	AIFABRIC_BMV2_FULL=1 $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup -ra --durations=30 -m bmv2 $(PYTEST_ARGS)

# Rebuild the committed P4 outputs (needs p4c on PATH) and controller/p4names.py; see p4src/README.md.
p4:
	$(PY) -m aifabric.p4build

# controller/p4names.py alone, from the committed p4src/build (no p4c needed).
p4names:
	$(PY) -m aifabric.p4build --names

bench: setup
	$(PY) -m benchmarks.target_pps
	$(PY) -m benchmarks.softswitch_path
	$(PY) -m benchmarks.bringup
	$(PY) -m benchmarks.int_collector_rate
	$(PY) -m benchmarks.p4runtime_hostile
	$(PY) -m benchmarks.teardown
	$(PY) -m benchmarks.allreduce
	$(PY) -m benchmarks.load_balance
	$(PY) -m benchmarks.congestion_control
	$(PY) -m benchmarks.load_balance_te_placement
	$(PY) -m benchmarks.scale
	$(PY) -m benchmarks.failover
	$(PY) -m benchmarks.failover_load
	$(PY) -m benchmarks.workload_estimates

clean:
	-$(VENV)/bin/aifabric clean 2>/dev/null
	rm -rf .pytest_cache build dist *.egg-info
