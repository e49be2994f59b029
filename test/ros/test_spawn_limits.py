"""Spawns the simulation cannot carry, or that would stall it (issue 44: fuzz finding 8 and the wrong list). The
simulation node in this process (inprocess_sim_node.py), iiwa_wsg, served simulation_interfaces; requests over the
node's own context.

* A mesh beyond MAX_SPAWN_TRIANGLES is refused before it is loaded, naming its triangles and the bound (1.3M
  triangles stopped the stepping for 7.1 s; 2M stalled 5.4 s and kept 1.4-2.3 GB).
* A mesh within the bound is prepared (loaded, decomposed) in a child process at low priority (niceness +10): while
  it is, the simulation keeps stepping (steps counted), ~/pause and set_simulation_state are answered; the entity
  appears when it is ready and the service answers then.
"""

from __future__ import annotations

import os
import struct

import pytest
from simulation_interfaces.msg import SimulationState
from simulation_interfaces.srv import GetEntities, SetSimulationState, SpawnEntity
from std_srvs.srv import SetBool

from contact_sim_ros.ros import simulation_interfaces as si
from inprocess_sim_node import InProcessSimNode
from ros_testing import wait_until

OK = 1


def _node(monkeypatch, *flags):
    return InProcessSimNode.from_command_line(monkeypatch, "--robot", "iiwa_wsg", "--engine", "tamsi", *flags)


def _call_async(sim, srv, name, request):
    client = sim.client.create_client(srv, name)
    assert client.wait_for_service(timeout_sec=30.0), name
    return client.call_async(request)


def _call(sim, srv, name, request, timeout=120.0):
    future = _call_async(sim, srv, name, request)
    wait_until(future.done, timeout, what=f"{name}'s answer")
    return future.result()


def _spawn_request(name, uri, xyz=(0.6, 0.0, 0.05)):
    req = SpawnEntity.Request(name=name, uri=uri)
    req.initial_pose.pose.position.x, req.initial_pose.pose.position.y, req.initial_pose.pose.position.z = xyz
    req.initial_pose.pose.orientation.w = 1.0
    return req


def _entities(sim):
    return set(_call(sim, GetEntities, "/get_entities", GetEntities.Request()).entities)


def test_a_mesh_beyond_the_triangle_bound_is_refused_before_it_is_loaded(monkeypatch, tmp_path):
    n = si.MAX_SPAWN_TRIANGLES + 1
    obj = tmp_path / "dense.obj"
    obj.write_text("v 0 0 0\nv 0.1 0 0\nv 0 0.1 0\nv 0 0 0.1\n" + "f 1 2 3\nf 1 3 4\n" * (n // 2 + 1))
    stl = tmp_path / "dense.stl"                   # a binary STL's header: 2M triangles (the file is as long)
    m = 2_000_000
    with open(stl, "wb") as f:
        f.write(b"\0" * 80 + struct.pack("<I", m))
        f.truncate(84 + 50 * m)
    loaded = []
    monkeypatch.setattr(si, "_prepare_mesh_child", lambda *a: loaded.append(a))
    sim = _node(monkeypatch, "--paused")
    try:
        before = _entities(sim)
        for path, count in ((obj, n + 1), (stl, m)):
            res = _call(sim, SpawnEntity, "/spawn_entity", _spawn_request("dense", f"mesh://{path}?mass=0.5"))
            assert res.result.result == SpawnEntity.Response.UNSUPPORTED_ASSETS, res.result.error_message
            msg = res.result.error_message
            assert str(path) in msg and f"{count:,} triangles" in msg and f"{si.MAX_SPAWN_TRIANGLES:,}" in msg, msg
        assert _entities(sim) == before and not loaded
    finally:
        sim.close()


@pytest.mark.process
def test_steps_go_on_and_pause_is_answered_while_a_spawned_mesh_is_prepared(monkeypatch, tmp_path):
    monkeypatch.setenv("CONTACT_SIM_MESH_CACHE", str(tmp_path / "cache"))     # decomposed anew (CoACD, seconds)
    sim = _node(monkeypatch, "--real-time-factor", "1.0")
    try:
        node, interfaces = sim.node, sim.node.simulation_interfaces
        loop = node.loop
        assert not loop.paused
        spawned = _call_async(sim, SpawnEntity, "/spawn_entity",
                              _spawn_request("bracket", "mesh://l_bracket.obj?density=2700&collision=decompose"))
        wait_until(lambda: interfaces.preparing is not None or spawned.done(), 60, what="the mesh being prepared")
        assert interfaces.preparing is not None, spawned.result().result.error_message
        steps = loop.steps_done
        wait_until(lambda: loop.steps_done >= steps + 50 or interfaces.preparing is None, 60,
                   what="steps while the mesh is prepared")
        pause = _call_async(sim, SetBool, f"{node.get_fully_qualified_name()}/pause", SetBool.Request(data=True))
        wait_until(lambda: pause.done() or interfaces.preparing is None, 60, what="~/pause's answer")
        assert loop.steps_done >= steps + 50 and pause.result().success and loop.paused
        # simulation_interfaces' own state change too (it waited for the spawn's preparation before)
        state = SetSimulationState.Request()
        state.state.state = SimulationState.STATE_PLAYING
        played = _call_async(sim, SetSimulationState, "/set_simulation_state", state)
        wait_until(lambda: played.done() or interfaces.preparing is None, 60, what="set_simulation_state's answer")
        assert interfaces.preparing is not None and not spawned.done(), \
            "the preparation ended before the steps, ~/pause and set_simulation_state could be observed during it"
        pid = interfaces.preparing[1]          # the child runs at niceness +10 once started (not load-dependent)

        def niceness():
            try:
                return os.getpriority(os.PRIO_PROCESS, pid)
            except OSError:                     # it ended meanwhile
                return None
        base = os.getpriority(os.PRIO_PROCESS, 0)
        wait_until(lambda: niceness() == base + si.PREPARATION_NICENESS or interfaces.preparing is None, 60,
                   what="the preparation process at niceness +10")
        assert niceness() == base + si.PREPARATION_NICENESS and interfaces.preparing is not None, \
            "the preparation ended before its priority could be observed"
        try:                                    # not SCHED_IDLE: it must run on a machine other work keeps busy
            assert os.sched_getscheduler(pid) == os.SCHED_OTHER
        except ProcessLookupError:              # it ended meanwhile
            pass
        assert played.result().result.result == OK and not loop.paused
        wait_until(spawned.done, 120, what="the spawn's answer")
        res = spawned.result()
        assert res.result.result == OK, res.result.error_message
        assert res.entity_name == "bracket" and "bracket" in _entities(sim)
    finally:
        sim.close()


@pytest.mark.process
def test_spawns_the_next_step_could_not_carry_are_refused_with_the_reason(monkeypatch):
    """Wrong list: a 1e6 m box, a 1e12 kg mesh and a box inside the robot's base were accepted, then the next step
    failed and the simulation paused itself. Now each is refused at the service with its reason, nothing is added,
    and the simulation plays on; an ordinary box is still spawned."""
    sim = _node(monkeypatch, "--real-time-factor", "1.0")
    try:
        loop = sim.node.loop
        before = _entities(sim)
        R = SpawnEntity.Response
        cases = [("huge", "primitive://box?size=1e6,1e6,1e6&density=1000", (0.6, 0.0, 0.05), R.RESOURCE_PARSE_ERROR,
                  "is 1e+06 m across, larger than the 10 m"),
                 ("heavy", "mesh://l_bracket.obj?mass=1e12&collision=hull", (0.6, 0.0, 0.05), R.RESOURCE_PARSE_ERROR,
                  "beyond any solid"),
                 ("inside", "primitive://box?size=0.1,0.1,0.1&mass=0.5", (0.0, 0.0, 0.08), R.INVALID_POSE,
                  "'inside' would start inside 'iiwa_link_0")]
        for name, uri, xyz, code, words in cases:
            res = _call(sim, SpawnEntity, "/spawn_entity", _spawn_request(name, uri, xyz))
            assert (res.result.result, words in res.result.error_message) == (code, True), \
                (name, res.result.result, res.result.error_message)
        assert _entities(sim) == before
        steps = loop.steps_done
        wait_until(lambda: loop.steps_done > steps + 100 or loop.paused, 60, what="steps after the refusals")
        assert not loop.paused and loop.steps_done > steps + 100
        res = _call(sim, SpawnEntity, "/spawn_entity",
                    _spawn_request("box", "primitive://box?size=0.05,0.05,0.05&mass=0.2", (0.6, 0.0, 0.025)))
        assert res.result.result == OK, res.result.error_message
        assert _entities(sim) == before | {"box"}
    finally:
        sim.close()


def _spawned_meshes_status(received):
    """The last '<node>: spawned meshes' status received on /diagnostics (None before one): (level (bytes, as
    DiagnosticStatus.OK), message, values as a dict)."""
    for arr in reversed(received):
        for st in arr.status:
            if st.name.endswith(": spawned meshes"):
                return st.level, st.message, {kv.key: kv.value for kv in st.values}
    return None


@pytest.mark.process
def test_a_killed_preparation_process_is_reported_and_nothing_is_spawned(monkeypatch, tmp_path, capfd):
    """Issue 44 (item 6): a child process's failure is noticed and reported, never silent. The process preparing a
    mesh killed (SIGKILL, as the kernel's OOM killer would): the spawn is answered FAILED with its exit code, the
    node logs it, /diagnostics' 'spawned meshes' status turns WARN naming the process and its exit code, nothing is
    added, and the next spawn of the same mesh works (the status OK again, the failure still counted)."""
    import signal
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    monkeypatch.setenv("CONTACT_SIM_MESH_CACHE", str(tmp_path / "cache"))
    sim = _node(monkeypatch, "--paused")
    try:
        received = []
        sim.client.create_subscription(DiagnosticArray, "/diagnostics", received.append, 10)
        wait_until(lambda: _spawned_meshes_status(received), 30, what="the spawned meshes' diagnostics")
        assert _spawned_meshes_status(received)[:2] == (DiagnosticStatus.OK, "no mesh being prepared")
        interfaces = sim.node.simulation_interfaces
        before = _entities(sim)
        uri = "mesh://l_bracket.obj?density=2700&collision=decompose"
        spawned = _call_async(sim, SpawnEntity, "/spawn_entity", _spawn_request("bracket", uri))
        wait_until(lambda: interfaces.preparing is not None or spawned.done(), 60, what="the mesh being prepared")
        assert interfaces.preparing is not None, spawned.result().result.error_message
        os.kill(interfaces.preparing[1], signal.SIGKILL)
        wait_until(spawned.done, 60, what="the spawn's answer")
        res = spawned.result().result
        assert res.result == si.FAILED and "ended with code -9 without an answer" in res.error_message, \
            res.error_message
        assert _entities(sim) == before and interfaces.preparing is None
        del received[:]
        wait_until(lambda: _spawned_meshes_status(received), 30, what="the diagnostics after the failure")
        level, message, values = _spawned_meshes_status(received)
        assert level == DiagnosticStatus.WARN and "ended with code -9 without an answer" in message, message
        assert (values["preparations"], values["preparation_failures"]) == ("1", "1"), values
        res = _call(sim, SpawnEntity, "/spawn_entity", _spawn_request("bracket", uri))
        assert res.result.result == OK, res.result.error_message
        del received[:]
        wait_until(lambda: _spawned_meshes_status(received), 30, what="the diagnostics after the spawn")
        level, message, values = _spawned_meshes_status(received)
        assert level == DiagnosticStatus.OK and values["preparation_failures"] == "1", (message, values)
    finally:
        sim.close()
    err = capfd.readouterr().err
    assert "spawn_entity 'bracket': the process preparing" in err and "ended with code -9" in err
