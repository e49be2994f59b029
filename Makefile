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
# make test runs the tests by size (test/conftest.py: unit, node, process, campaign): first the unit and node tests
# (in the pytest process: no process start), then the process and campaign tests (they start processes: sim_node,
# runners, colcon, Ray), each phase on JOBS pytest-xdist workers (a file's tests stay on one worker: its module
# fixtures; each worker its own ROS domain). Four workers on two cores: the tests wait on DDS, processes and
# conditions about half of the time (2 workers kept the cores ~55 % busy; 9.6 -> 7.3 min). The process and
# campaign tests keep both cores busy (vmstat: 0-5 % idle) with their colcon, Ray, Chromium and node processes: there
# four workers only made each test slower (the second phase 302-305 s with 4, 277 s with 3: PROCESS_JOBS). JOBS=0: one pytest
# process per phase. SIZES=...: only those sizes
# (e.g. SIZES=unit).
JOBS     ?= 4
PROCESS_JOBS ?= $(if $(filter 0,$(JOBS)),0,3)
SIZES    ?= unit node process campaign
XDIST    := $(if $(filter 0,$(JOBS)),-p no:xdist,-n $(JOBS) --dist loadfile)
PROCESS_XDIST := $(if $(filter 0,$(PROCESS_JOBS)),-p no:xdist,-n $(PROCESS_JOBS) --dist loadfile)
NOT_SLOW := $(if $(filter 1 yes true,$(FULL)),,and not slow)
IN_PROCESS_SIZES := $(filter unit node,$(SIZES))
PROCESS_SIZES    := $(filter process campaign,$(SIZES))
# pytest's exit code 5 (no test selected: PYTEST_ARGS="-k ..." matching one phase only) is not a failure
PYTEST_PHASE = rc=0; $(RUN) --isolated python -m pytest test -q --timeout=$(TIMEOUT) $(1) \
	-m "($(subst $(eval) , or ,$(strip $(2)))) $(NOT_SLOW)" $(PYTEST_ARGS) || rc=$$?; [[ $$rc -eq 5 ]] && rc=0

.PHONY: help venv demo demo-headless test bench clean

help:
	@echo "make demo    the simulation node + scenario $(SCENARIO) over ROS 2 (ENGINE=$(ENGINE)); progress, real-time factor, verdict"
	@echo "make demo-headless  run $(SCENE) headless through the Python API (no ROS)"
	@echo "make test    run the test suite (pytest, $(TIMEOUT) s per-test limit; unit+node tests on JOBS=$(JOBS) workers, then process+campaign on PROCESS_JOBS=$(PROCESS_JOBS); FULL=1 adds slow tests)"
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
	@status=0; \
	$(if $(IN_PROCESS_SIZES),$(call PYTEST_PHASE,$(XDIST),$(IN_PROCESS_SIZES)); status=$$rc;) \
	$(if $(PROCESS_SIZES),$(call PYTEST_PHASE,$(PROCESS_XDIST),$(PROCESS_SIZES)); [[ $$status -ne 0 ]] || status=$$rc;) \
	exit $$status

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
