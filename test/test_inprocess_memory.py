"""An in-process run frees its world when it ends, by reference counting (issue 19: campaign memory flat).

A campaign worker runs hundreds of trials in one process. Before, each trial's controllers and stepping loop
referred to each other (subscription callbacks, publish hooks, the controllers' context), so a finished trial's
whole world - Simulator, Pinocchio and coal data, ~1.3 MB - stayed until Python's full garbage collection, which
runs only every few dozen trials: each worker's memory rose by ~60 MB over its first ~150 trials. These tests run
with the cyclic garbage collector off and count what a finished run leaves alive.
"""

from __future__ import annotations

import gc

import pinocchio as pin
import pytest

from contact_sim_ros.scenarios.campaign import load_campaign, run_trial
from contact_sim_ros.sim.scene import load_scene
from contact_sim_ros.sim.simulator import Simulator

from test_campaign import campaign_file


def _alive(cls) -> int:
    """Objects of ``cls`` the garbage collector tracks: live ones and unreachable ones not yet collected. By their
    type, not ``isinstance``: a weakref proxy forwards ``__class__`` to its referent (a live one would count its
    referent twice, a dead one raises ReferenceError: llvmlite's ModuleRef objects keep dead ones after an earlier
    test compiled kernels of a module it then removed, test_kernel_cache's stamp probe)."""
    return sum(issubclass(type(o), cls) for o in gc.get_objects())


@pytest.fixture
def no_cyclic_gc():
    """The cyclic collector off for the test; every object alive at its start held until its end.

    Holding them keeps what an earlier test on this xdist worker left (an in-process node whose executor thread
    drops its last references while this test runs) out of the garbage this test counts: only objects made during
    the test can turn up there."""
    gc.collect()
    gc.disable()
    alive_before = gc.get_objects()
    try:
        yield
    finally:
        del alive_before
        gc.enable()


def _our_cyclic_garbage() -> list[str]:
    """Type names of this package's objects (and Pinocchio's model data) that only the cyclic collector frees."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = sorted({type(o).__qualname__ for o in gc.garbage
                        if type(o).__module__.startswith("contact_sim_ros")
                        or issubclass(type(o), (pin.Data, pin.GeometryData, pin.GeometryModel))})
        # (type(o), not isinstance: isinstance asks a dead weakref.proxy in the garbage its __class__, which raises)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return found


def test_a_campaign_trial_frees_its_world_when_it_ends(tmp_path, no_cyclic_gc):
    spec = load_campaign(campaign_file(tmp_path))
    before = _alive(Simulator)    # (0 alone; an earlier test's module fixture on this xdist worker may hold one)
    row = run_trial(spec, 1, "tamsi")
    assert row["sim_time_s"] > 0.5 and row["solver_failures"] == 0, row
    assert _alive(Simulator) <= before, "a finished trial's Simulator is still alive"
    assert _our_cyclic_garbage() == []


def test_repeated_scene_loads_leave_no_pinocchio_objects_behind(no_cyclic_gc):
    """Loading a scene (URDF parsing included) three more times leaves no more Pinocchio geometry models than once:
    pin 4.1.0's buildGeomFromUrdfString keeps an extra GeometryModel alive per call unless it is given the model to
    fill."""
    from contact_sim_ros.scenarios.runner import REPO, SCENARIOS
    scene_file = REPO / SCENARIOS["pick_shake_place"].scene
    load_scene(scene_file)            # first load: what stays for the process (caches)
    gc.collect()
    before, simulators = _alive(pin.GeometryModel), _alive(Simulator)
    for _ in range(3):
        sim = Simulator(load_scene(scene_file), engine="tamsi", time_step=0.002)
        sim.step()
        del sim
    assert _alive(Simulator) <= simulators
    gc.collect()
    assert _alive(pin.GeometryModel) == before


def test_a_multi_robot_run_in_process_frees_its_world(no_cyclic_gc):
    from contact_sim_ros.scenarios.runner import run_scenario
    before = _alive(Simulator)
    result = run_scenario("two_arm_handover", "tamsi", transport="inprocess", duration=0.2)
    assert result.log["q"].shape[0] > 0
    assert _alive(Simulator) <= before, "the two-robot world's Simulator is still alive"
    assert _our_cyclic_garbage() == []
