# shellcheck shell=bash
# Sourced by ensure_venv.sh and venv_run.sh: the environment in which the venv's ROS 2 wheels run.
#
# The ros-* wheels ship shared libraries in $VENV/lib and site-packages/ros_*.libs and a .pth bootstrapper
# that re-executes Python with LD_LIBRARY_PATH set. We set the same variables here up front (our dirs FIRST,
# so that another ROS venv's libraries on an inherited LD_LIBRARY_PATH are never picked up) and mark the
# bootstrap as done, which also saves one exec per Python start.

contact_sim_venv_env() {
    local venv="$1"
    local pyver libs d
    export VIRTUAL_ENV="$venv"
    export PATH="$venv/bin:$PATH"
    pyver="$(ls -d "$venv"/lib/python3.* 2>/dev/null | head -n1)"
    libs="$venv/lib"
    if [[ -n "$pyver" ]]; then
        for d in "$pyver"/site-packages/ros_*.libs; do
            [[ -d "$d" ]] && libs="$libs:$d"
        done
    fi
    export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export _ROS_WHEELS_BOOTSTRAP_COMPLETE=1
    # ament index: the wheels and the interface packages built from msgs/ are installed into the venv prefix
    export AMENT_PREFIX_PATH="$venv"
    export CMAKE_PREFIX_PATH="$venv"
    export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
    # DDS discovery stays on this machine unless the user asked otherwise
    export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
    unset ROS_LOCALHOST_ONLY   # deprecated in Jazzy; the range above replaces it
    export MPLBACKEND="${MPLBACKEND:-Agg}"
    # one BLAS thread: the per-step matrices are small, and on 2 cores OpenBLAS threads only contend with the
    # stepping loop (default scene, TAMSI: 1.35 ms vs 1.68 ms per step; Lagged 2.65 vs 3.93 ms)
    export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
    export PYTHONNOUSERSITE=1
    export PIP_NO_INPUT=1
}
