# The two commands of the README: `make eval` runs the main job, `make test` runs the tests.
# Both install what they need first (scripts/install.sh is idempotent and fast when up to date).
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: install eval test test-fast test-readme doctor bench
install:
	@scripts/install.sh

eval: install
	$(VENV)/bin/sgvla eval --config config/eval/default.yaml

# everything, on two workers; the tests of a module that share a module fixture on one (tests/tiers.py)
test: install
	$(PY) -m pytest -n 2 --dist loadgroup

# day-to-day: the tests that start no process, ROS context, Ray or launch and take under a minute, in parallel
# (tests/tiers.py says which; `make test` runs them and all the others)
test-fast: install
	$(PY) -m pytest -n 2 --dist loadgroup -m 'not integration and not slow and not readme'

# every command of README.md in order, in a fresh folder (long: see README, "Testing")
test-readme: install
	$(PY) -m pytest -m readme tests/readme

doctor: install
	$(VENV)/bin/sgvla doctor

bench: install
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done
