"""Settings of the whole test run.

* Bytecode is cached. The suite starts some hundred Python processes (sim_node, scenario runners, camera and viewer
  processes, Ray workers), each importing ~1100 modules (rclpy, numpy, scipy, numba, pinocchio, this package). The
  venv is installed without precompiled bytecode (scripts/ensure_venv.sh: Python writes it on first use), but an
  environment with PYTHONDONTWRITEBYTECODE=1 (as this machine's does) never writes it: every process
  then compiled every module from source, ~2 s of CPU per process start (a node refusing a bad file: 3.1 s of CPU,
  1.0 s with the bytecode cached). Here this process and every process it starts write and read the cache; where
  it goes (``__pycache__`` beside the sources, or PYTHONPYCACHEPREFIX) is left to the environment.
"""

import os
import sys

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
