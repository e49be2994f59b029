#!/bin/bash
# The speed benchmarks of issues 18 and 19 back to back, one log: what docs/benchmarks.md's first section is
# written from (one fresh run on one machine, with the date, commit, CPU and load). About 20 minutes quiet.
#
#   bash benchmarks/speed_run.sh [LOG]          # default benchmarks/out/speed_run.log
#
# 1. ours vs Drake 1.51.1 on the shared scenes + the TAMSI speed-target scenes, interleaved (benchmarks/peers)
# 2. the ROS node, iiwa_wsg + TAMSI, real time and as fast as possible (benchmarks/node)
# 3. per-step cost of the contact query and the whole step on four scenes (benchmarks/contact_query/steps.py)
# 4. this machine's two-process efficiency (benchmarks/campaign/machine_scaling.py)
# 5. the simulator step on the Panda + table scene, the viewer's overhead (no browser), the node's start-up
# 6. campaign throughput with 1 and 2 local Ray workers on the full pick_shake_place task (benchmarks/campaign)
# The 1000-trial campaign (issue 19) is its own command: python benchmarks/campaign/run.py --help.
set -uo pipefail
cd "$(dirname "$0")/.."
log=${1:-benchmarks/out/speed_run.log}
mkdir -p "$(dirname "$log")"
run() { echo; echo "### $* ($(date -u '+%F %T') UTC, load $(cut -d' ' -f1-3 /proc/loadavg))"; "$@"; }
{
  echo "# speed run: $(date -u '+%F %T') UTC, commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- contact_sim_ros || echo ' + local changes')"
  echo "# CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; $(free -g | awk '/Mem/{print $2}') GiB; load $(cut -d' ' -f1-3 /proc/loadavg)"
  run scripts/venv_run.sh python benchmarks/peers/run.py --rounds 3 --json benchmarks/peers/out/peers_speed_run.json
  run scripts/venv_run.sh --isolated python benchmarks/node/run.py --engines tamsi --duration 8 --warmup 3
  run scripts/venv_run.sh python benchmarks/contact_query/steps.py --baseline none
  run scripts/venv_run.sh python benchmarks/campaign/machine_scaling.py --rounds 3
  run scripts/venv_run.sh python benchmarks/simulator/run.py --steps 200 --repeats 3 --engines semi_implicit tamsi lagged
  run scripts/venv_run.sh python benchmarks/viewer/run.py --seconds 3 --repeats 3 --engine tamsi --no-browser
  run scripts/venv_run.sh --isolated python benchmarks/node/run.py --startup --engines tamsi lagged --startup-repeats 3
  run env RAY_AUTH_MODE=disabled scripts/venv_run.sh python benchmarks/campaign/run.py --full-task --time-step 0.001 --trials 16 --workers 1,2
  echo; echo "# end $(date -u '+%F %T') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
} 2>&1 | tee "$log"
