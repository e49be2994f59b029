#!/usr/bin/env bash
# Run a command inside the project's venv with the ROS 2 environment set:
#   scripts/venv_run.sh [--isolated] CMD [ARGS...]
# Creates or refreshes .venv first (scripts/ensure_venv.sh; quick when nothing changed).
# --isolated: use a ROS_DOMAIN_ID unique to this run (1..100), so concurrent test runs do not hear each other.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${CONTACT_SIM_VENV:-$ROOT/.venv}"

isolated=0
if [[ "${1:-}" == "--isolated" ]]; then
    isolated=1
    shift
fi
if [[ $# -eq 0 ]]; then
    echo "usage: $0 [--isolated] CMD [ARGS...]" >&2
    exit 2
fi

"$ROOT/scripts/ensure_venv.sh" >&2

# shellcheck source=scripts/venv_env.sh
source "$ROOT/scripts/venv_env.sh"
contact_sim_venv_env "$VENV"
if [[ $isolated -eq 1 ]]; then
    export ROS_DOMAIN_ID=$(( ( $$ + $(date +%s) ) % 100 + 1 ))
    echo "[venv_run] isolated ROS_DOMAIN_ID=$ROS_DOMAIN_ID" >&2
fi
exec "$@"
