"""Issue 29: the iiwa + WSG 50 grasps and lifts a decomposed object of the mesh set (meshes/bottle.obj at half its
height: its neck makes it non-convex, so CoACD gives convex pieces) with each dynamic engine (scenario 1's
controller in lock-step, the scenario's robot and floor with the mesh bottle), run until the shake would begin:
approach, descend, close with the force loop, lift 15 cm, static hold. The wrist F/T sensor weighs the held object;
its pose is the simulator's. Once over ROS (TAMSI): the simulation node built in the test's process from sim_node's
command line (NodeInThisProcess), the controller over DDS, the bottle's height from /tf; the other engines in
process (transport 'inprocess': the ROS run's bit-identical twin, test_scenarios.py).

The bottle is scaled to 9 cm so that the fingers close on its cylindrical body (grasp centre 4 cm above the floor)
under the palm; at full height the grasp centre (13 cm) lies on the shoulder, a cone across the seam of two pieces,
where lcp_minimal's Lemke pivoting ends on a ray (no solution) during the lift.
"""

from __future__ import annotations

import os

import pytest
import trimesh
import yaml

from contact_sim_ros.clients.pick_shake_place import PickShakePlaceParams
from contact_sim_ros.engines.registry import engine_class, engine_names
from contact_sim_ros.model.loader import meshes_dir
from contact_sim_ros.model.mesh_object import MeshSpec, mesh_body
from contact_sim_ros.ros.node_in_process import NodeInThisProcess
from contact_sim_ros.scenarios.runner import run_scenario
from inprocess_sim_node import no_graph_look  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("no_graph_look")     # the node built in this process: no 3 s graph look

DYNAMIC_ENGINES = [n for n in engine_names() if engine_class(n).dynamic]
# scenario 1's durations shortened (as test_scenarios.py), stopped when the shake begins (after the hold is weighed)
FAST = dict(motion_time=0.5, hold_time=0.45, shake_cycles=2, stop_at="shake", grasp_z=0.04)
MASS = 0.5                # kg
PICK = PickShakePlaceParams().pick_xy      # m, where the controller picks


@pytest.fixture(scope="module")
def mesh_scene(tmp_path_factory):
    """The scene file, and a decomposition cache of this module: the first run decomposes the bottle (~0.5 CPU s),
    the others reuse its pieces."""
    d = tmp_path_factory.mktemp("mesh_grasp")
    old = os.environ.get("CONTACT_SIM_MESH_CACHE")
    os.environ["CONTACT_SIM_MESH_CACHE"] = str(d / "cache")
    scene = d / "wsg_mesh_bottle.yaml"
    scene.write_text(yaml.safe_dump({
        "robot": "iiwa_wsg", "contact_margin": 0.002,
        "environment": [{"name": "ground", "shape": "halfspace"}],
        "objects": [{"name": "bottle", "mesh": "bottle.obj", "scale": [1.0, 1.0, 0.5], "mass": MASS,
                     "pose": {"xyz": [PICK[0], PICK[1], 0.0]}}]}))
    yield scene
    if old is None:
        os.environ.pop("CONTACT_SIM_MESH_CACHE", None)
    else:
        os.environ["CONTACT_SIM_MESH_CACHE"] = old


def test_the_set_bottle_is_not_convex():
    """The premise: the bottle of the set, at half its height, is not its hull (so 'auto' decomposes it)."""
    mesh = trimesh.load(meshes_dir() / "bottle.obj", force="mesh").apply_scale([1.0, 1.0, 0.5])
    assert mesh.is_watertight and mesh.volume < 0.97 * mesh.convex_hull.volume


def check_lift(r, engine: str) -> None:
    detail = f"{engine}: {r.reason}\nnumbers: {r.numbers}\nnode output (tail):\n{r.node_output[-1500:]}"
    assert r.success and r.reason.endswith("(stop_at)"), detail
    assert "solver_failures" not in r.numbers, detail
    # the wrist F/T sensor weighs it while it hangs in the fingers
    assert r.numbers["held_mass_kg"] == pytest.approx(MASS, rel=0.05), detail
    # its pose (over ROS: from /tf): it rose with the hand (lift_height above the floor), upright between the fingers
    p = PickShakePlaceParams(**FAST)
    x, y, z = r.object_poses["bottle"]
    assert z == pytest.approx(p.lift_height, abs=0.01), detail
    assert abs(x - PICK[0]) < 0.01 and abs(y - PICK[1]) < 0.01, detail


@pytest.mark.timeout(300)
def test_wsg_grasps_and_lifts_the_decomposed_bottle_over_dds(mesh_scene):
    """TAMSI over ROS: the node built in this process (its Simulator loads the bottle as the 2 convex pieces of
    CoACD: mesh_object's memo, the same pieces this process's later loads reuse), the controller over DDS, the
    bottle's pose from /tf."""
    r = run_scenario("pick_shake_place", "tamsi", params=FAST, scene=mesh_scene, timeout=60.0,
                     node_factory=NodeInThisProcess)
    check_lift(r, "tamsi")
    body = mesh_body(MeshSpec(str(meshes_dir() / "bottle.obj"), (1.0, 1.0, 0.5)), mass=MASS, quiet=True)
    assert body.decomposed and len(body.pieces) == 2 and body.method.startswith("coacd"), body.report()
    assert body.mass == pytest.approx(MASS)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("engine", [e for e in DYNAMIC_ENGINES if e != "tamsi"])
def test_wsg_grasps_and_lifts_the_decomposed_bottle(mesh_scene, engine):
    """Each other dynamic engine in process (no DDS)."""
    r = run_scenario("pick_shake_place", engine, params=FAST, scene=mesh_scene, timeout=60.0, transport="inprocess")
    check_lift(r, engine)
