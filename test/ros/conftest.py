"""Fixtures for ROS integration tests with real nodes over real DDS.

* The ROS domain is isolated per test session: ROS_DOMAIN_ID is chosen from the process id (1..100) unless
  CONTACT_SIM_TEST_DOMAIN_ID is set, and discovery stays on this host, so concurrent test runs of other
  engineers (or CI jobs) on the same machine do not hear each other.
* ``start_node(...)`` starts the simulation node in a subprocess (the console entry point, as a user would) and
  stops it with SIGINT at the end of the module.
* ``ros`` is an in-process rclpy node with a background executor and helpers to collect messages and call
  services.
"""

from __future__ import annotations

import os
import pytest

_DOMAIN = os.environ.get("CONTACT_SIM_TEST_DOMAIN_ID") or str(1 + os.getpid() % 100)
os.environ["ROS_DOMAIN_ID"] = _DOMAIN
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.pop("ROS_LOCALHOST_ONLY", None)

from ros_testing import NodeProcess, RosProbe  # noqa: E402  (after the environment is set)


@pytest.fixture(scope="module")
def ros():
    probe = RosProbe()
    yield probe
    probe.close()


@pytest.fixture(scope="module")
def start_node():
    """Factory: start_node(*flags) -> NodeProcess; every node started is stopped at module end."""
    started = []

    def start(*args, env=None) -> NodeProcess:
        proc = NodeProcess(list(args), env)
        started.append(proc)
        return proc
    yield start
    for proc in started:
        proc.stop()
