#!/usr/bin/env bash
# Create (or refresh) the project's pinned Python venv in .venv/ and build the ROS 2 interface packages of
# msgs/ into it. Idempotent: quick when nothing changed.
#
#   1. system tools: python3.11 (with venv + headers), cmake, gcc, g++, make, chromium (viewer tests), Mesa EGL +
#      llvmpipe (camera rendering: libegl1 libegl-mesa0 libgl1 libgl1-mesa-dri);
#      apt-get installs missing ones (root only, non-interactive);
#   2. python3.11 -m venv .venv; pip install -r requirements.txt (exact pins, incl. the ros-jazzy-* wheels);
#   3. fix the wheels' CMake config files, which name include dirs of the machine that built the wheels
#      (/opt/python/cp311-cp311/...), to this venv's Python and numpy include dirs;
#   4. cmake/make/make install each package of msgs/ (tf2_msgs, control_msgs, controller_manager_msgs,
#      simulation_interfaces, franka_msgs, contact_sim_msgs) into the venv prefix;
#   5. pip install -e . (editable: tests and tools run on the source tree);
#   6. compile the engines' numba kernels into the venv's shared cache <venv>/.cache/numba
#      (python -m contact_sim_ros.jit = contact-sim compile-kernels; contact_sim_ros/jit.py), so that the first
#      step of every process loads them instead of compiling for 15-60 s, and build the contact query's compiled
#      narrow phase (contact_sim_ros/geometry/narrow_phase.cpp, g++, ~30-90 s) into <cache>/native.
#
# Stamps: .venv/.stamp-env holds the hash of requirements.txt + msgs/ + these scripts; on a change the venv is
# rebuilt from scratch. .venv/.stamp-project holds the hash of setup.py/setup.cfg/package.xml; on a change
# only step 5 runs again. .venv/.stamp-kernels holds the hash of the kernel modules' sources (the files that
# import contact_sim_ros.jit.njit, jit.py and the narrow phase's source); on a change only step 6 runs again.
#
# Environment: CONTACT_SIM_VENV (venv path, default <repo>/.venv), PYTHON (interpreter, default python3.11).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${CONTACT_SIM_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3.11}"
MSG_PACKAGES=(tf2_msgs control_msgs controller_manager_msgs simulation_interfaces franka_msgs contact_sim_msgs)   # build order

log() { echo "[ensure_venv] $*" >&2; }
die() { echo "[ensure_venv] ERROR: $*" >&2; exit 1; }

hash_files() {
    # sha256 over the given files' paths (relative to ROOT) and contents, in a stable order
    (cd "$ROOT" && for f in "$@"; do [[ -e "$f" ]] && find "$f" -type f; done | LC_ALL=C sort \
        | while read -r f; do echo "$f"; sha256sum < "$f"; done) | sha256sum | cut -d' ' -f1
}

env_hash() {
    # the venv's location is part of it: a venv is not relocatable (shebangs, CMake paths)
    { echo "$VENV"; hash_files requirements.txt msgs scripts/ensure_venv.sh scripts/venv_env.sh; } \
        | sha256sum | cut -d' ' -f1
}
project_hash() {
    hash_files setup.py setup.cfg package.xml resource
}
kernel_hash() {
    # numba keys its cache entries by the kernel modules' content; NUMBA_CACHE_DIR moves the cache
    { echo "${NUMBA_CACHE_DIR:-}"
      hash_files contact_sim_ros/jit.py contact_sim_ros/native_build.py \
          $(cd "$ROOT" && find contact_sim_ros -name '*.cpp' | LC_ALL=C sort) \
          $(cd "$ROOT" && grep -rl --include='*.py' 'from \.\.jit import njit' contact_sim_ros | LC_ALL=C sort || true)
    } | sha256sum | cut -d' ' -f1
}

# ---- serialise concurrent runs (make demo and make test started together) --------------------------------
if command -v flock > /dev/null 2>&1; then
    lock="/tmp/contact_sim_venv.$(echo "$VENV" | sha256sum | cut -c1-16).lock"
    exec 9> "$lock"
    if ! flock -n 9; then
        log "another ensure_venv.sh is working on $VENV; waiting for it"
        flock 9
    fi
fi

want_env="$(env_hash)"
want_project="$(project_hash)"
have_env="$(cat "$VENV/.stamp-env" 2>/dev/null || true)"
have_project="$(cat "$VENV/.stamp-project" 2>/dev/null || true)"
want_kernels="$(kernel_hash)"
have_kernels="$(cat "$VENV/.stamp-kernels" 2>/dev/null || true)"

compile_kernels() {
    # step 6: run each engine with kernels on a small scene so that numba's cache holds their machine code
    # (quick when it already does). A failure is not fatal: processes then compile on their first step.
    local t0 status=0
    t0=$(date +%s)
    log "compiling the engines' kernels into the shared cache (first time 30-60 s; python -m contact_sim_ros.jit)"
    ( # shellcheck source=scripts/venv_env.sh
      source "$ROOT/scripts/venv_env.sh" && contact_sim_venv_env "$VENV" && unset PYTHONPATH \
          && "$VENV/bin/python" -m contact_sim_ros.jit ) > "$VENV/.kernels.log" 2>&1 || status=$?
    if [[ $status -eq 0 ]]; then
        log "kernels cached ($(( $(date +%s) - t0 )) s): $(grep -m1 'compiling the kernels into' "$VENV/.kernels.log" \
            | sed 's/compiling the kernels into //')"
    else
        tail -n 15 "$VENV/.kernels.log" >&2
        log "WARNING: compiling the kernels failed (log: $VENV/.kernels.log); processes compile on their first step"
    fi
    echo "$want_kernels" > "$VENV/.stamp-kernels"
}

if [[ -x "$VENV/bin/python" && "$have_env" == "$want_env" && "$have_project" == "$want_project" ]]; then
    [[ "$have_kernels" == "$want_kernels" ]] || compile_kernels
    exit 0   # up to date
fi

# shellcheck source=scripts/venv_env.sh
source "$ROOT/scripts/venv_env.sh"
export PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1
unset PYTHONPATH

install_project() {
    log "pip install -e $ROOT (editable, no dependencies: they come from requirements.txt)"
    (cd "$ROOT" && "$VENV/bin/python" -m pip install --quiet --no-deps --no-build-isolation -e .) \
        || die "pip install -e . failed"
    "$VENV/bin/python" -c "import contact_sim_ros" || die "contact_sim_ros does not import from the venv"
    echo "$want_project" > "$VENV/.stamp-project"
}

if [[ -x "$VENV/bin/python" && "$have_env" == "$want_env" ]]; then
    log "project metadata changed: reinstalling the project into $VENV"
    contact_sim_venv_env "$VENV"
    install_project
    [[ "$have_kernels" == "$want_kernels" ]] || compile_kernels
    log "venv ready: $VENV"
    exit 0
fi

t_start=$(date +%s)
if [[ -e "$VENV" ]]; then
    log "requirements.txt, msgs/ or the set-up scripts changed (or an earlier build failed): rebuilding $VENV"
else
    log "creating the project venv $VENV (first use; takes 1-3 minutes)"
fi

# ---- 1. system tools ----------------------------------------------------------------------------------------
missing_pkgs=()
command -v "$PYTHON" > /dev/null 2>&1 || missing_pkgs+=(python3.11 python3.11-venv python3.11-dev)
command -v cmake > /dev/null 2>&1 || missing_pkgs+=(cmake)
command -v gcc > /dev/null 2>&1 || missing_pkgs+=(gcc)
command -v g++ > /dev/null 2>&1 || missing_pkgs+=(g++)
command -v make > /dev/null 2>&1 || missing_pkgs+=(make)
# headless browser for the viewer's tests (test/test_viewer.py renders the viser page)
command -v chromium > /dev/null 2>&1 || command -v chromium-browser > /dev/null 2>&1 || missing_pkgs+=(chromium)
# headless OpenGL for the simulated cameras (contact_sim_ros/cameras: moderngl on an EGL context, Mesa's llvmpipe
# on the CPU when there is no GPU): the EGL/GL dispatch libraries, Mesa's EGL vendor library and its DRI drivers
have_lib() { ldconfig -p 2> /dev/null | grep -q "$1"; }
have_lib 'libEGL\.so\.1 ' || missing_pkgs+=(libegl1)
have_lib 'libEGL_mesa\.so\.0 ' || missing_pkgs+=(libegl-mesa0)
have_lib 'libGL\.so\.1 ' || missing_pkgs+=(libgl1)
compgen -G "/usr/lib/*/dri/swrast_dri.so" > /dev/null || missing_pkgs+=(libgl1-mesa-dri)
if command -v "$PYTHON" > /dev/null 2>&1; then
    "$PYTHON" -c "import venv, ensurepip" > /dev/null 2>&1 || missing_pkgs+=(python3.11-venv)
    pyinc="$("$PYTHON" -c "import sysconfig; print(sysconfig.get_paths()['include'])")"
    [[ -f "$pyinc/Python.h" ]] || missing_pkgs+=(python3.11-dev)
fi
if [[ ${#missing_pkgs[@]} -gt 0 ]]; then
    if [[ "$(id -u)" != 0 ]]; then
        die "missing system packages: ${missing_pkgs[*]}; install them (apt-get install ${missing_pkgs[*]}) and rerun"
    fi
    log "installing missing system packages: ${missing_pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q || die "apt-get update failed"
    apt-get install -y -q --no-install-recommends "${missing_pkgs[@]}" || die "apt-get install ${missing_pkgs[*]} failed"
fi
command -v "$PYTHON" > /dev/null 2>&1 || die "$PYTHON not found after installing it"
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' \
    || die "$PYTHON is not Python 3.11 (the ros-jazzy wheels are cp311); set PYTHON=/path/to/python3.11"

# ---- 2. venv + pinned requirements -------------------------------------------------------------------------
if [[ -e "$VENV" && ! -f "$VENV/pyvenv.cfg" && "$VENV" != "$ROOT/.venv" ]]; then
    die "$VENV exists but is not a venv (no pyvenv.cfg); refusing to delete it"
fi
# rename first, so that an interrupted deletion never leaves a half-deleted venv under the real name
if [[ -e "$VENV" ]]; then
    trash="$VENV.old.$$"
    mv "$VENV" "$trash"
    rm -rf "$trash"
fi
rm -rf "$VENV".old.* 2> /dev/null || true
log "$PYTHON -m venv $VENV"
"$PYTHON" -m venv "$VENV" || die "could not create the venv $VENV"
log "pip install -r requirements.txt (about 150 pinned packages)"
# the ROS wheels' bootstrapper must not be skipped by a guard inherited from another venv
# --no-compile: Python compiles what it imports on first use; compiling all ~150 packages up front costs
# more CPU than the whole test suite uses of it
env -u _ROS_WHEELS_BOOTSTRAP_COMPLETE "$VENV/bin/python" -m pip install --quiet --no-compile \
    -r "$ROOT/requirements.txt" \
    2> >(grep -v "^WARNING: Location 'file://" >&2) \
    || die "pip install -r requirements.txt failed (see the messages above)"

contact_sim_venv_env "$VENV"   # now that the ros_*.libs dirs exist

# ---- 3. CMake config fix-ups --------------------------------------------------------------------------------
py_include="$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['include'])")"
np_include="$("$VENV/bin/python" -c "import numpy; print(numpy.get_include())")"
[[ -f "$py_include/Python.h" ]] || die "Python.h not found in $py_include (install python3.11-dev)"
mapfile -t cmake_files < <(grep -rl "/opt/python/cp3" "$VENV"/share/*/cmake 2>/dev/null || true)
log "fixing the build machine's include paths in ${#cmake_files[@]} CMake config files -> $py_include, $np_include"
for f in "${cmake_files[@]}"; do
    sed -i -E \
        -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+/lib/python3\.[0-9]+/site-packages/numpy/_?core/include#${np_include}#g" \
        -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+/include/python3\.[0-9]+#${py_include}#g" \
        "$f"
done
if left="$(grep -rl "/opt/python/cp3" "$VENV"/share/*/cmake 2>/dev/null)"; then
    die "paths of the wheels' build machine are left in: $left"
fi

# ---- 4. interface packages ----------------------------------------------------------------------------------
for pkg in "${MSG_PACKAGES[@]}"; do
    src="$ROOT/msgs/$pkg"
    build="$VENV/.build/$pkg"
    [[ -f "$src/CMakeLists.txt" ]] || die "interface package source $src/CMakeLists.txt missing"
    log "building interface package $pkg (msgs/$pkg) into $VENV"
    rm -rf "$build" && mkdir -p "$build"
    if ! (cd "$build" \
          && cmake "$src" -DCMAKE_INSTALL_PREFIX="$VENV" -DCMAKE_PREFIX_PATH="$VENV" \
                -DPython3_EXECUTABLE="$VENV/bin/python" -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release \
          && make -j"$(nproc)" && make install) > "$build/build.log" 2>&1; then
        tail -n 40 "$build/build.log" >&2
        die "building $pkg failed; full log: $build/build.log"
    fi
done

# ---- 5. the project ----------------------------------------------------------------------------------------
install_project

log "checking the venv: rclpy, interface packages, pinocchio, coal"
"$VENV/bin/python" - << 'PYEOF' || die "the venv does not import what the project needs"
import rclpy, pinocchio, coal, yaml, scipy, numpy            # noqa: F401
from tf2_msgs.msg import TFMessage                          # noqa: F401
from contact_sim_msgs.msg import Contact, ContactArray      # noqa: F401
from control_msgs.action import FollowJointTrajectory, GripperCommand   # noqa: F401
from controller_manager_msgs.srv import ListControllers, ListHardwareComponents, SwitchController   # noqa: F401
from simulation_interfaces.srv import SpawnEntity, GetSimulatorFeatures     # noqa: F401
from franka_msgs.msg import FrankaRobotState                # noqa: F401
from franka_msgs.action import Grasp, Homing, Move          # noqa: F401
import xacro, rosbags                                       # noqa: F401
import moderngl, glcontext                                  # noqa: F401
from rosgraph_msgs.msg import Clock                         # noqa: F401
from sensor_msgs.msg import JointState                      # noqa: F401
PYEOF

# ---- 6. compiled kernels -------------------------------------------------------------------------------------
compile_kernels

echo "$want_env" > "$VENV/.stamp-env"
log "venv ready: $VENV ($(( $(date +%s) - t_start )) s)"
