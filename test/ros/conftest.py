"""Fixtures for ROS integration tests with real nodes over real DDS.

* The ROS domain is isolated per test session: ROS_DOMAIN_ID is chosen from the process id (1..100) unless
  CONTACT_SIM_TEST_DOMAIN_ID is set (under pytest-xdist: one domain per worker, consecutive), and discovery
  stays on this host, so concurrent test runs of other engineers (or CI jobs) on the same machine do not hear
  each other.
* ``start_node(...)`` starts the simulation node in a subprocess (the console entry point, as a user would) and
  stops it with SIGINT at the end of the test that started it (started by a module-scoped fixture: of the
  module).
* ``ros`` is an in-process rclpy node with a background executor and helpers to collect messages and call
  services.
"""

from __future__ import annotations

import os
import pytest

# pytest-xdist workers (PYTEST_XDIST_WORKER gw0, gw1, ...): consecutive domains from the controlling process's id,
# so that the workers of one run never share one
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0)
_BASE = int(os.environ.get("CONTACT_SIM_TEST_DOMAIN_ID") or 0) - 1
if _BASE < 0:
    _BASE = os.getppid() if "PYTEST_XDIST_WORKER" in os.environ else os.getpid()
_DOMAIN = str(1 + (_BASE + _WORKER) % 100)
os.environ["ROS_DOMAIN_ID"] = _DOMAIN
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.pop("ROS_LOCALHOST_ONLY", None)

from ros_testing import NodeProcess, RosProbe  # noqa: E402  (after the environment is set)


@pytest.fixture(scope="module")
def ros():
    probe = RosProbe()
    yield probe
    probe.close()


_STARTED: list = []    # every node start_node started in this session, in order


@pytest.fixture(scope="module")
def start_node():
    """Factory: start_node(*flags) -> NodeProcess. A node started by a test (its body or a function-scoped
    fixture) is stopped when that test ends (stop_the_nodes_a_test_started); one started by a module-scoped
    fixture at module end, or when the fixture's teardown stops it."""
    started = []

    def start(*args, env=None) -> NodeProcess:
        proc = NodeProcess(list(args), env)
        started.append(proc)
        _STARTED.append(proc)
        return proc
    yield start
    for proc in started:
        proc.stop()


@pytest.fixture(autouse=True)
def stop_the_nodes_a_test_started():
    """The nodes a test started stop when it ends: left running until the end of the module (as before), each kept
    stepping beside the module's later tests (an idle real-time iiwa node ~25 % of a core, one at
    real_time_factor 0 or a scene slower than real time a whole core), which slowed them and made them
    load-sensitive. Module-scoped fixtures are set up before this function-scoped one, so their nodes are not
    counted as the test's."""
    first = len(_STARTED)
    yield
    for proc in _STARTED[first:]:
        proc.stop()
