# contact_sim_ros: the two commands (make demo, make test) and helpers.
# Every target runs inside the pinned venv .venv/, created on first use by scripts/ensure_venv.sh.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

RUN      := scripts/venv_run.sh
SCENARIO ?= pick_shake_place
ENGINE   ?= tamsi
SCENE    ?= scenes/default.yaml
# per-test time limit in seconds (pytest-timeout); FULL=1 also runs the tests marked slow
TIMEOUT  ?= 300
FULL     ?=
PYTEST_ARGS ?=
# JOBS=N: the test files on N pytest-xdist workers (a file's tests stay on one worker: its module fixtures, its
# nodes; 14.8 -> 9.3 min on 2 cores). Not the default: on 2 cores the extra load fails two wall-clock-sensitive
# ROS tests about one run in three (README, make test). JOBS=0: one process, in file order.
JOBS     ?= 0
XDIST    := $(if $(filter 0,$(JOBS)),-p no:xdist,-n $(JOBS) --dist loadfile)
MARK     := $(if $(filter 1 yes true,$(FULL)),,-m "not slow")

.PHONY: help venv demo demo-headless test bench clean

help:
	@echo "make demo    the simulation node + scenario $(SCENARIO) over ROS 2 (ENGINE=$(ENGINE)); progress, real-time factor, verdict"
	@echo "make demo-headless  run $(SCENE) headless through the Python API (no ROS)"
	@echo "make test    run the test suite (pytest, $(TIMEOUT) s per-test limit; FULL=1 adds slow tests; JOBS=2: on 2 workers)"
	@echo "make bench   run every benchmarks/<area>/run.py (BENCH=<area> for one area, BENCH_ARGS=... passed on)"
	@echo "make venv    create/refresh the pinned venv .venv/ (done automatically by the others)"
	@echo "make clean   remove .venv/ and build outputs"

venv:
	scripts/ensure_venv.sh

# make demo keeps a ROS_DOMAIN_ID the user set (environment or make demo ROS_DOMAIN_ID=N: the node and the
# scenario's controller are then visible to the user's ros2 tools); only when it is unset does the demo get a
# domain of its own (--isolated), so that it does not hear concurrent test runs. make test is always isolated.
DEMO_DOMAIN := $(if $(strip $(ROS_DOMAIN_ID)),,--isolated)

demo:
	@$(if $(DEMO_DOMAIN),,echo "[make demo] ROS_DOMAIN_ID=$(ROS_DOMAIN_ID) (yours)")
	$(RUN) $(DEMO_DOMAIN) python -m contact_sim_ros.scenarios.runner $(SCENARIO) --engine $(ENGINE)

demo-headless:
	$(RUN) contact-sim run $(SCENE) --engine $(ENGINE)

test:
	$(RUN) --isolated python -m pytest test -q --timeout=$(TIMEOUT) $(XDIST) $(MARK) $(PYTEST_ARGS)

# Convention: benchmarks/<area>/run.py runs that area's benchmarks in one command, prints a table and saves
# its PNG plots (matplotlib Agg backend).
BENCH ?= *
BENCH_ARGS ?=
bench:
	@scripts/ensure_venv.sh
	@shopt -s nullglob; scripts=(benchmarks/$(BENCH)/run*.py); \
	for d in benchmarks/$(BENCH)/; do \
		runs=($${d}run*.py); \
		[[ $${#runs[@]} -gt 0 ]] || echo "note: $$d has no run.py (convention: benchmarks/<area>/run.py)"; \
	done; \
	if [[ $${#scripts[@]} -eq 0 ]]; then echo "no benchmarks/$(BENCH)/run*.py found"; exit 1; fi; \
	echo "benchmarks: $${scripts[*]}"; \
	status=0; \
	for s in "$${scripts[@]}"; do \
		echo "=== $$s"; \
		$(RUN) python "$$s" $(BENCH_ARGS) || { echo "FAILED: $$s"; status=1; }; \
	done; \
	exit $$status

clean:
	rm -rf .venv build install log out .pytest_cache *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
