#!/usr/bin/env python3
"""Write every robot and object URDF of the package from the data tables below (sources in docs/robots.md).

    python urdf/generate/generate_urdfs.py            # rewrite urdf/*.urdf and urdf/objects/*.urdf

The URDFs are self-contained: collision AND visual geometry are primitives (box, cylinder, sphere; capsules
are written as a cylinder + two spheres because urdf_parser_py 0.0.4 rejects <capsule>). For the robots whose
meshes ship with example-robot-data (franka, allegro) a `<name>_mesh_visuals.urdf` variant is written too: same
kinematics, inertia and collision primitives, visual meshes as package://example-robot-data/... URIs (load it
with package_dirs = [.../site-packages/cmeel.prefix/share]).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from urdf_writer import (Joint, Link, Part, body_link, box, capsule_parts, cylinder, given_link,  # noqa: E402
                         mesh, relative_origin, robot_xml, rpy_matrix, sphere, transform)

PI = math.pi
HALF_PI = math.pi / 2
URDF_DIR = Path(__file__).resolve().parents[1]
ERD = "package://example-robot-data/robots"


def deg(x):
    return x * PI / 180.0


# ==========================================================================================================
# KUKA LBR iiwa 14 R820 + Schunk WSG 50
# ==========================================================================================================

# Joint placements: KUKA LBR iiwa 14 R820 kinematics as in Drake's iiwa14 description / iiwa_stack:
# 0.1575 + 0.2025 = 0.36, 0.2045 + 0.2155 = 0.42, 0.1845 + 0.2155 = 0.40, 0.081 + 0.045 (flange) = 0.126.
IIWA_JOINT_ORIGINS = [
    ((0, 0, 0.1575), (0, 0, 0)),
    ((0, 0, 0.2025), (HALF_PI, 0, PI)),
    ((0, 0.2045, 0), (HALF_PI, 0, PI)),
    ((0, 0, 0.2155), (HALF_PI, 0, 0)),
    ((0, 0.1845, 0), (-HALF_PI, PI, 0)),
    ((0, 0, 0.2155), (HALF_PI, 0, 0)),
    ((0, 0.081, 0), (-HALF_PI, PI, 0)),
]
IIWA_FLANGE_OFFSET = 0.045
# KUKA spec sheet (LBR iiwa 14 R820): range deg, max speed deg/s, max torque N m.
IIWA_RANGE_DEG = [170, 120, 170, 120, 170, 120, 175]
IIWA_SPEED_DEG_S = [85, 85, 100, 75, 130, 135, 135]
IIWA_TORQUE_NM = [320, 320, 176, 176, 110, 40, 40]
# Link inertial parameters (mass kg, COM m, principal inertia kg m^2 about the COM), Drake iiwa14 description
# (iiwa_stack-derived values updated for the 14 kg variant; total 30.61 kg vs KUKA's 29.9 kg).
IIWA_INERTIA = [
    (5.0, (-0.1, 0, 0.07), (0.05, 0.06, 0.03)),
    (5.76, (0, -0.03, 0.12), (0.033, 0.0333, 0.0123)),
    (6.35, (0.0003, 0.059, 0.042), (0.0305, 0.0304, 0.011)),
    (3.5, (0, 0.03, 0.13), (0.025, 0.0238, 0.0076)),
    (3.5, (0, 0.067, 0.034), (0.017, 0.0164, 0.006)),
    (3.5, (0.0001, 0.021, 0.076), (0.01, 0.0087, 0.00449)),
    (1.8, (0, 0.0006, 0.0004), (0.0049, 0.0047, 0.0036)),
    (1.2, (0, 0, 0.02), (0.001, 0.001, 0.001)),
]
# Collision/visual primitives per link (cylinders after Drake's iiwa14_primitive_collision; wrist ours).
IIWA_PARTS = [
    [Part(cylinder(0.12, 0.14), (-0.01, 0, 0.075), name="iiwa_link_0_base")],
    [Part(cylinder(0.1, 0.25), (0, -0.014, 0.14), name="iiwa_link_1_body", color="orange")],
    [Part(cylinder(0.1, 0.25), (0, 0.056, 0.035), (HALF_PI, 0, 0), name="iiwa_link_2_body", color="orange")],
    [Part(cylinder(0.09, 0.25), (0, 0.025, 0.137), name="iiwa_link_3_body")],
    [Part(cylinder(0.09, 0.22), (0, 0.056, 0.025), (HALF_PI, 0, 0), name="iiwa_link_4_body", color="orange")],
    [Part(cylinder(0.07, 0.2), (0, 0.03, 0.1), (-0.3, 0, 0), name="iiwa_link_5_body")],
    [Part(sphere(0.075), (0, 0, 0), name="iiwa_link_6_wrist", color="orange"),
     Part(cylinder(0.065, 0.05), (0, 0.045, 0), (HALF_PI, 0, 0), name="iiwa_link_6_neck", color="orange")],
    [Part(cylinder(0.05, 0.06), (0, 0, 0.015), name="iiwa_link_7_flange", color="dark")],
]

# Schunk WSG 50-110: stroke 110 mm (55 mm per finger), grip force 80 N, jaw speed 420 mm/s (opening rate,
# 210 mm/s per finger), 1.2 kg. Housing 146 x 50 x 72.5 mm (Drake's wsg_50 box: 0.146 x 0.0725 x 0.05).
WSG_BODY = (0.05, 0.146, 0.0725)         # x (width), y (stroke direction), z (height along the approach axis)
WSG_MASS_BODY = 1.1
WSG_MASS_FINGER = 0.05
WSG_STROKE_PER_FINGER = 0.055
WSG_FORCE = 80.0
WSG_SPEED_PER_FINGER = 0.21
# Finger (own frame at the top of the housing, inner face at y = 0 when q = 0, fingers open along +-y):
WSG_FINGER_BODY = (0.02, 0.014, 0.09)     # behind the pad
WSG_PAD = (0.02, 0.003, 0.04)             # thin rubber pad on the inner face, near the tip
WSG_PAD_CENTER_Z = 0.065                  # m above the housing top


def iiwa(tool="the tool"):
    """The bare arm (flange, tool0 and F/T sensor frames, no gripper): mount a hand of your choice on
    ``iiwa_link_7`` / ``iiwa_tool0`` (e.g. the Allegro hand, scenes/iiwa_allegro_mug.yaml)."""
    links, joints = [], []
    for i, ((mass, com, inertia), parts) in enumerate(zip(IIWA_INERTIA, IIWA_PARTS)):
        links.append(given_link(f"iiwa_link_{i}", mass, com, inertia, parts))
    for i, ((xyz, rpy), rng, spd, tq) in enumerate(zip(IIWA_JOINT_ORIGINS, IIWA_RANGE_DEG, IIWA_SPEED_DEG_S,
                                                       IIWA_TORQUE_NM)):
        joints.append(Joint(f"iiwa_joint_{i + 1}", "revolute", f"iiwa_link_{i}", f"iiwa_link_{i + 1}", xyz, rpy,
                            (0, 0, 1), -deg(rng), deg(rng), tq, deg(spd), damping=0.5, friction=0.05))
    flange = (0, 0, IIWA_FLANGE_OFFSET)
    for frame in ("iiwa_flange", "iiwa_tool0", "iiwa_ft_sensor"):
        links.append(Link(frame))
    joints.append(Joint("iiwa_flange_joint", "fixed", "iiwa_link_7", "iiwa_flange", flange,
                        comment="mounting flange: 1.306 m above the base at q = 0"))
    joints.append(Joint("iiwa_tool0_joint", "fixed", "iiwa_flange", "iiwa_tool0",
                        comment="ROS-Industrial tool0 = flange frame"))
    joints.append(Joint("iiwa_ft_sensor_joint", "fixed", "iiwa_link_7", "iiwa_ft_sensor", flange,
                        comment=f"wrist F/T sensor frame: the wrench transmitted from {tool} to iiwa_link_7"))
    return "iiwa", links, joints


def iiwa_wsg():
    _, links, joints = iiwa("wsg_base")
    wsg_links, wsg_joints = wsg50("wsg", "iiwa_link_7", (0, 0, IIWA_FLANGE_OFFSET))
    return "iiwa_wsg", links + wsg_links, joints + wsg_joints


def wsg50(prefix, parent, xyz):
    sx, sy, sz = WSG_BODY
    body = body_link(f"{prefix}_base", [Part(box(sx, sy, sz), (0, 0, sz / 2), name=f"{prefix}_housing",
                                             color="grey")], mass=WSG_MASS_BODY)
    links = [body]
    joints = [Joint(f"{prefix}_mount_joint", "fixed", parent, f"{prefix}_base", xyz,
                    comment="Schunk WSG 50 on the flange (through the F/T sensor)")]
    for side, sign in (("left", 1.0), ("right", -1.0)):
        name = f"{prefix}_finger_{side}"
        fb, pad = WSG_FINGER_BODY, WSG_PAD
        parts = [Part(box(*fb), (0, sign * (pad[1] + fb[1] / 2), fb[2] / 2), name=f"{name}_body", color="dark"),
                 Part(box(*pad), (0, sign * pad[1] / 2, WSG_PAD_CENTER_Z), name=f"{name}_pad", color="pad")]
        links.append(body_link(name, parts, mass=WSG_MASS_FINGER))
        joints.append(Joint(f"{name}_joint", "prismatic", f"{prefix}_base", name, (0, 0, sz), (0, 0, 0),
                            (0, sign, 0), 0.0, WSG_STROKE_PER_FINGER, WSG_FORCE, WSG_SPEED_PER_FINGER,
                            damping=2.0, friction=0.5,
                            comment="q = distance of the pad face from the gripper centre plane (m)"))
        links.append(Link(f"{name}_tip"))
        joints.append(Joint(f"{name}_tip_joint", "fixed", name, f"{name}_tip", (0, 0, WSG_PAD_CENTER_Z),
                            comment="fingertip frame: centre of the pad's contact face"))
    links.append(Link(f"{prefix}_tcp"))
    joints.append(Joint(f"{prefix}_tcp_joint", "fixed", f"{prefix}_base", f"{prefix}_tcp",
                        (0, 0, sz + WSG_PAD_CENTER_Z), comment="tool centre point between the pads"))
    return links, joints


# ==========================================================================================================
# Franka Emika Panda + Franka Hand
# ==========================================================================================================

# Franka's published kinematics (franka_description / FCI docs, modified DH: a4 = 0.0825, a5 = -0.0825,
# a7 = 0.088, d1 = 0.333, d3 = 0.316, d5 = 0.384, flange d = 0.107) and joint limits (FCI "Limits for Panda").
PANDA_JOINT_ORIGINS = [
    ((0, 0, 0.333), (0, 0, 0)),
    ((0, 0, 0), (-HALF_PI, 0, 0)),
    ((0, -0.316, 0), (HALF_PI, 0, 0)),
    ((0.0825, 0, 0), (HALF_PI, 0, 0)),
    ((-0.0825, 0.384, 0), (-HALF_PI, 0, 0)),
    ((0, 0, 0), (HALF_PI, 0, 0)),
    ((0.088, 0, 0), (HALF_PI, 0, 0)),
]
PANDA_LOWER = [-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973]
PANDA_UPPER = [2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973]
PANDA_VELOCITY = [2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61]
PANDA_TORQUE = [87, 87, 87, 87, 12, 12, 12]
PANDA_FLANGE = 0.107
# Link 1-7: Gaz, Cognetti, Oliva, Robuffo Giordano, De Luca, "Dynamic identification of the Franka Emika
# Panda robot with retrieval of feasible parameters using penalty-based optimization", RA-L 2019 (the values
# of example-robot-data's panda.urdf). Link 0 and the hand: franka_ros description. (mass, com, ixx ixy ixz
# iyy iyz izz)
PANDA_INERTIA = [
    (0.629769, (-0.041018, -0.00014, 0.049974), (0.00315, 8.2904e-07, 0.00015, 0.00388, 8.2299e-06, 0.004285)),
    (4.970684, (0.003875, 0.002081, -0.04762), (0.70337, -0.000139, 0.006772, 0.70661, 0.019169, 0.009117)),
    (0.646926, (-0.003141, -0.02872, 0.003495), (0.007962, -0.003925, 0.010254, 0.02811, 0.000704, 0.025995)),
    (3.228604, (0.027518, 0.039252, -0.066502), (0.037242, -0.004761, -0.011396, 0.036155, -0.012805, 0.01083)),
    (3.587895, (-0.05317, 0.104419, 0.027454), (0.025853, 0.007796, -0.001332, 0.019552, 0.008641, 0.028323)),
    (1.225946, (-0.011953, 0.041065, -0.038437), (0.035549, -0.002117, -0.004037, 0.029474, 0.000229, 0.008627)),
    (1.666555, (0.060149, -0.014117, -0.010517), (0.001964, 0.000109, -0.001158, 0.004354, 0.000341, 0.005433)),
    (0.735522, (0.010517, -0.004252, 0.061597), (0.012516, -0.000428, -0.001196, 0.010027, -0.000741, 0.004815)),
]
PANDA_HAND_MASS = 0.73
PANDA_FINGER_MASS = 0.015
PANDA_FINGER_STROKE = 0.04       # per finger: 0-80 mm opening
PANDA_FINGER_FORCE = 70.0        # N continuous grasp force
PANDA_FINGER_SPEED = 0.05        # m/s per finger (0.1 m/s opening rate)
PANDA_FINGER_Z = 0.0584          # finger joint above the hand frame
PANDA_PAD = (0.0175, 0.0152, 0.0185)   # rubber fingertip (franka_description collision box)
PANDA_PAD_Z = 0.04525
PANDA_TCP = 0.1034


def _panda_parts():
    white = "white"
    return [
        [Part(cylinder(0.075, 0.11), (-0.04, 0, 0.055), name="panda_link0_base", color=white)],
        capsule_parts(0.06, 0.16, (0, 0, -0.16), name="panda_link1_body", color=white),
        capsule_parts(0.06, 0.12, (0, 0, 0), name="panda_link2_body", color=white),
        capsule_parts(0.06, 0.15, (0, 0, -0.145), name="panda_link3_body", color=white),
        capsule_parts(0.06, 0.12, (0, 0, 0), name="panda_link4_body", color=white),
        capsule_parts(0.06, 0.1, (0, 0, -0.26), name="panda_link5_body", color=white)
        + capsule_parts(0.04, 0.12, (0, 0.08, -0.13), name="panda_link5_forearm", color=white),
        capsule_parts(0.055, 0.06, (0, 0, -0.03), name="panda_link6_body", color=white),
        capsule_parts(0.05, 0.1, (0, 0, 0.02), name="panda_link7_body", color="dark"),
    ]


def franka():
    links, joints = [], []
    parts = _panda_parts()
    visual_meshes = [f"{ERD}/panda_description/meshes/visual/link{i}.dae" for i in range(8)]
    for i, ((mass, com, inertia), p) in enumerate(zip(PANDA_INERTIA, parts)):
        links.append(given_link(f"panda_link{i}", mass, com, inertia, p,
                                mesh_visuals=[(mesh(visual_meshes[i]), (0, 0, 0), (0, 0, 0))]))
    for i, (xyz, rpy) in enumerate(PANDA_JOINT_ORIGINS):
        joints.append(Joint(f"panda_joint{i + 1}", "revolute", f"panda_link{i}", f"panda_link{i + 1}", xyz, rpy,
                            (0, 0, 1), PANDA_LOWER[i], PANDA_UPPER[i], PANDA_TORQUE[i], PANDA_VELOCITY[i],
                            damping=0.1, friction=0.05))
    links += [Link("panda_link8"), Link("panda_ft_sensor")]
    joints.append(Joint("panda_joint8", "fixed", "panda_link7", "panda_link8", (0, 0, PANDA_FLANGE),
                        comment="flange frame: (0.088, 0, 0.926) m in the base frame at q = 0"))
    joints.append(Joint("panda_ft_sensor_joint", "fixed", "panda_link8", "panda_ft_sensor",
                        comment="wrist F/T frame at the flange (Franka estimates the external wrench here)"))
    hand_parts = [Part(box(0.06, 0.2, 0.05), (0, 0, 0.03), name="panda_hand_body", color="white"),
                  Part(box(0.04, 0.06, 0.02), (0, 0, 0.01), name="panda_hand_mount", color="dark")]
    m, com, inertia = PANDA_HAND_MASS, (-0.01, 0, 0.03), (0.001, 0.0025, 0.0017)
    links.append(given_link("panda_hand", m, com, inertia, hand_parts,
                            mesh_visuals=[(mesh(f"{ERD}/panda_description/meshes/visual/hand.dae"), (0, 0, 0),
                                           (0, 0, 0))]))
    joints.append(Joint("panda_hand_joint", "fixed", "panda_link8", "panda_hand", (0, 0, 0), (0, 0, -PI / 4)))
    links.append(Link("panda_hand_tcp"))
    joints.append(Joint("panda_hand_tcp_joint", "fixed", "panda_hand", "panda_hand_tcp", (0, 0, PANDA_TCP)))
    for side, sign, jname in (("left", 1.0, "panda_finger_joint1"), ("right", -1.0, "panda_finger_joint2")):
        name = f"panda_{side}finger"
        fparts = [Part(box(0.022, 0.02, 0.036), (0, sign * 0.0175, 0.018), name=f"{name}_body", color="dark"),
                  Part(box(*PANDA_PAD), (0, sign * PANDA_PAD[1] / 2, PANDA_PAD_Z), name=f"{name}_pad",
                       color="pad")]
        flink = body_link(name, fparts, mass=PANDA_FINGER_MASS,
                          mesh_visuals=[(mesh(f"{ERD}/panda_description/meshes/visual/finger.dae"), (0, 0, 0),
                                         (0, 0, 0 if sign > 0 else PI))])
        links.append(flink)
        mimic = None if sign > 0 else ("panda_finger_joint1", 1.0, 0.0)
        joints.append(Joint(jname, "prismatic", "panda_hand", name, (0, 0, PANDA_FINGER_Z), (0, 0, 0),
                            (0, sign, 0), 0.0, PANDA_FINGER_STROKE, PANDA_FINGER_FORCE, PANDA_FINGER_SPEED,
                            damping=1.0, friction=0.2, mimic=mimic,
                            comment="q = distance of the pad face from the hand's centre plane (m)"))
        links.append(Link(f"{name}_tip"))
        joints.append(Joint(f"{name}_tip_joint", "fixed", name, f"{name}_tip", (0, 0, PANDA_PAD_Z)))
    return "franka", links, joints


# ==========================================================================================================
# Allegro hand v4, right
# ==========================================================================================================

# Kinematics, vendor joint limits and link masses: SimLab allegro_hand_description (example-robot-data 6.0.0,
# allegro_right_hand.urdf). Inertias recomputed from the collision boxes (uniform density).
ALLEGRO_FINGER_BASES = {  # finger index -> (first joint index, origin xyz, origin rpy)
    0: (0, (0, 0.0435, -0.001542), (-0.08726646255, 0, 0)),      # index
    1: (4, (0, 0, 0.0007), (0, 0, 0)),                              # middle
    2: (8, (0, -0.0435, -0.001542), (0.08726646255, 0, 0)),       # ring
}
ALLEGRO_FINGER_LIMITS = [(-0.47, 0.47), (-0.196, 1.61), (-0.174, 1.709), (-0.227, 1.618)]
ALLEGRO_FINGER_LENGTHS = [0.0164, 0.054, 0.0384, 0.0267]
ALLEGRO_FINGER_MASSES = [0.0119, 0.065, 0.0355, 0.0096]
ALLEGRO_THUMB_LIMITS = [(0.263, 1.396), (-0.105, 1.163), (-0.189, 1.644), (-0.162, 1.719)]
ALLEGRO_THUMB_MASSES = [0.0176, 0.0119, 0.038, 0.0388]
ALLEGRO_TIP_RADIUS = 0.012
ALLEGRO_TIP_MASS = 0.0168
ALLEGRO_TOTAL_MASS = 1.08  # kg, SimLab Allegro hand v4 specification
# The description's palm (0.4154 kg) leaves the hand 0.125 kg short of the vendor's total: the palm takes the rest.
ALLEGRO_PALM_MASS = ALLEGRO_TOTAL_MASS - 3 * (sum(ALLEGRO_FINGER_MASSES) + ALLEGRO_TIP_MASS) - (
    sum(ALLEGRO_THUMB_MASSES) + ALLEGRO_TIP_MASS)
ALLEGRO_EFFORT = 0.7        # N m (SimLab Allegro v4 spec: 0.7 N m per joint)
ALLEGRO_VELOCITY = 7.0      # rad/s (allegro_hand_description)
ALLEGRO_WIDTH = (0.0196, 0.0275)


def _allegro_mesh(name):
    return [(mesh(f"{ERD}/allegro_hand_description/meshes/{name}.STL"), (0, 0, 0), (0, 0, 0))]


def allegro():
    links, joints = [], []
    palm = [Part(box(0.0408, 0.113, 0.095), (-0.0093, 0, -0.0475), name="palm_link_box", color="black")]
    links.append(body_link("palm_link", palm, mass=ALLEGRO_PALM_MASS, mesh_visuals=_allegro_mesh("base_link")))
    wx, wy = ALLEGRO_WIDTH
    axes = [(0, 0, 1), (0, 1, 0), (0, 1, 0), (0, 1, 0)]
    damping, friction = 0.01, 0.005
    for _, (j0, xyz, rpy) in ALLEGRO_FINGER_BASES.items():
        parent = "palm_link"
        for k in range(4):
            idx = j0 + k
            name = f"link_{idx}.0"
            length = ALLEGRO_FINGER_LENGTHS[k]
            parts = [Part(box(wx, wy, length), (0, 0, length / 2), name=f"{name}_box", color="black")]
            links.append(body_link(name, parts, mass=ALLEGRO_FINGER_MASSES[k],
                                   mesh_visuals=_allegro_mesh(f"link_{k}.0")))
            origin = (xyz, rpy) if k == 0 else ((0, 0, ALLEGRO_FINGER_LENGTHS[k - 1]), (0, 0, 0))
            lo, hi = ALLEGRO_FINGER_LIMITS[k]
            joints.append(Joint(f"joint_{idx}.0", "revolute", parent, name, origin[0], origin[1], axes[k], lo, hi,
                                ALLEGRO_EFFORT, ALLEGRO_VELOCITY, damping, friction))
            parent = name
        tip = f"link_{j0 + 3}.0_tip"
        links.append(body_link(tip, [Part(sphere(ALLEGRO_TIP_RADIUS), name=f"{tip}_sphere", color="white")],
                               mass=ALLEGRO_TIP_MASS, mesh_visuals=_allegro_mesh("link_3.0_tip")))
        joints.append(Joint(f"joint_{j0 + 3}.0_tip", "fixed", parent, tip, (0, 0, ALLEGRO_FINGER_LENGTHS[3])))
    # thumb
    thumb_origins = [((-0.0182, 0.019333, -0.045987), (0, -1.65806278845, -1.5707963259)),
                     ((-0.027, 0.005, 0.0399), (0, 0, 0)), ((0, 0, 0.0177), (0, 0, 0)), ((0, 0, 0.0514), (0, 0, 0))]
    thumb_axes = [(-1, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 0)]
    thumb_boxes = [((0.0358, 0.034, 0.0455), (-0.0179, 0.009, 0.0145)), ((wx, wy, 0.0177), (0, 0, 0.00885)),
                   ((wx, wy, 0.0514), (0, 0, 0.0257)), ((wx, wy, 0.0423), (0, 0, 0.02115))]
    thumb_meshes = ["link_12.0_right", "link_13.0", "link_14.0", "link_15.0"]
    parent = "palm_link"
    for k in range(4):
        idx = 12 + k
        name = f"link_{idx}.0"
        size, center = thumb_boxes[k]
        links.append(body_link(name, [Part(box(*size), center, name=f"{name}_box", color="black")],
                               mass=ALLEGRO_THUMB_MASSES[k], mesh_visuals=_allegro_mesh(thumb_meshes[k])))
        lo, hi = ALLEGRO_THUMB_LIMITS[k]
        joints.append(Joint(f"joint_{idx}.0", "revolute", parent, name, thumb_origins[k][0], thumb_origins[k][1],
                            thumb_axes[k], lo, hi, ALLEGRO_EFFORT, ALLEGRO_VELOCITY, damping, friction))
        parent = name
    tip = "link_15.0_tip"
    links.append(body_link(tip, [Part(sphere(ALLEGRO_TIP_RADIUS), name=f"{tip}_sphere", color="white")],
                           mass=ALLEGRO_TIP_MASS, mesh_visuals=_allegro_mesh("link_15.0_tip")))
    joints.append(Joint("joint_15.0_tip", "fixed", parent, tip, (0, 0, 0.0423)))
    return "allegro_hand_right", links, joints


# ==========================================================================================================
# BarrettHand BH8-282
# ==========================================================================================================

# Barrett BH8-series kinematics (BH8 user manual, kinematics section): Aw = 25 mm (spread axes of F1/F2 from
# the palm centre), A1 = 50 mm (spread axis -> J2), A2 = 70 mm (J2 -> J3), A3 = 50 mm (J3 -> tip), Dw = 84 mm
# (wrist -> J2 plane), Phi3 = 42 deg (angle of the fingertip point about J3, from the curved distal link; our
# distal primitive is a straight box aligned with the proximal link at q = 0, so Phi3 is not applied). Ranges: spread 0-180 deg, J2 0-140 deg,
# J3 0-48 deg. TorqueSwitch coupling: the distal joint follows the proximal joint at 48/140 = 0.343 (ratio of
# the ranges; the ROS barrett_hand_description uses 0.84/2.44 rad = 0.344).
BH_AW, BH_A1, BH_A2, BH_A3, BH_DW = 0.025, 0.05, 0.07, 0.05, 0.084
BH_PHI3 = 0.0   # see above
BH_SPREAD = (0.0, PI)
BH_J2 = (0.0, deg(140.0))
BH_J3_RATIO = 48.0 / 140.0
BH_PALM_TOP = 0.075
BH_MASSES = {"palm": 0.66, "knuckle": 0.05, "proximal": 0.08, "distal": 0.05}   # sum 1.20 kg (datasheet 1.2 kg)
BH_FINGER_W = 0.022      # finger width (m): F3 passes between F1 and F2 (50 mm apart) with 3 mm clearance per side
BH_PROX_T = 0.02         # proximal link thickness
BH_DIST_T = 0.018


def barrett():
    links, joints = [], []
    palm_parts = [Part(cylinder(0.045, BH_PALM_TOP), (0, 0, BH_PALM_TOP / 2), name="bh_palm_body", color="grey"),
                  Part(box(0.11, 0.125, 0.012), (0, 0, BH_PALM_TOP - 0.006), name="bh_palm_plate", color="dark"),
                  # finger 3's fixed knuckle
                  Part(box(BH_FINGER_W, BH_A1 * 0.6, BH_DW - BH_PALM_TOP + 0.01), (0, BH_A1 - 0.01,
                       (BH_DW + BH_PALM_TOP) / 2), name="bh_finger_3_knuckle", color="grey")]
    links.append(body_link("bh_base_link", palm_parts, mass=BH_MASSES["palm"] + BH_MASSES["knuckle"]))
    damping, friction = 0.02, 0.01
    world = {}  # link -> 4x4 world transform at q = 0
    world["bh_base_link"] = np.eye(4)

    def add_fixed_world(parent, child_link, t_child, jtype, jname, **kw):
        xyz, rpy = relative_origin(world[parent], t_child)
        world[child_link] = t_child
        joints.append(Joint(jname, jtype, parent, child_link, xyz, rpy, **kw))

    for finger in (1, 2, 3):
        # J2 location and the "outward" direction of the finger at spread 0 (F1, F2 at -y; F3 at +y).
        if finger == 3:
            p_j2 = np.array([0.0, BH_A1, BH_DW])
            outward = np.array([0.0, 1.0, 0.0])
            parent = "bh_base_link"
        else:
            x_axis = -BH_AW if finger == 1 else BH_AW
            p_j2 = np.array([x_axis, -BH_A1, BH_DW])
            outward = np.array([0.0, -1.0, 0.0])
            knuckle = f"bh_finger_{finger}_knuckle"
            # spread axis: F2 turns about +z, F1 about -z (its joint frame is flipped by roll = pi), so that one
            # spread angle opens both fingers symmetrically away from each other; F2 mimics F1 with multiplier 1.
            rot = rpy_matrix((PI, 0, 0)) if finger == 1 else np.eye(3)
            t_k = transform((x_axis, 0, BH_PALM_TOP), rot)
            kparts_world_center = np.array([x_axis, -BH_A1 / 2, (BH_PALM_TOP + BH_DW + 0.01) / 2])
            center_local = (np.linalg.inv(t_k) @ np.append(kparts_world_center, 1))[:3]
            kparts = [Part(box(BH_FINGER_W, BH_A1 + 0.02, BH_DW - BH_PALM_TOP + 0.01), tuple(center_local),
                           name=f"{knuckle}_box", color="grey")]
            links.append(body_link(knuckle, kparts, mass=BH_MASSES["knuckle"]))
            # urdfdom orders sibling joints by name and Pinocchio needs the primary before its mimic:
            # "bh_spread_joint" < "bh_spread_joint_f2".
            mimic = None if finger == 1 else ("bh_spread_joint", 1.0, 0.0)
            jname = "bh_spread_joint" if finger == 1 else "bh_spread_joint_f2"
            add_fixed_world("bh_base_link", knuckle, t_k, "revolute", jname, axis=(0, 0, 1), lower=BH_SPREAD[0],
                            upper=BH_SPREAD[1], effort=3.0, velocity=deg(360.0), damping=damping,
                            friction=friction, mimic=mimic,
                            comment="spread (F1 and F2 opposite, 0-180 deg); F2 is a mimic of F1")
            parent = knuckle
        # proximal joint frame: z along the finger (up at q = 0), y outward, x = y cross z; flexion = +x rotation
        # turns the finger inward (towards -y local).
        y = outward
        z = np.array([0.0, 0.0, 1.0])
        x = np.cross(y, z)
        t_prox = transform(p_j2, np.column_stack([x, y, z]))
        prox = f"bh_finger_{finger}_proximal"
        pparts = [Part(box(BH_FINGER_W, BH_PROX_T, BH_A2), (0, 0, BH_A2 / 2), name=f"{prox}_box", color="dark")]
        links.append(body_link(prox, pparts, mass=BH_MASSES["proximal"]))
        add_fixed_world(parent, prox, t_prox, "revolute", f"bh_finger_{finger}_proximal_joint", axis=(1, 0, 0),
                        lower=BH_J2[0], upper=BH_J2[1], effort=1.5, velocity=deg(140.0), damping=damping,
                        friction=friction)
        # distal joint: at A2 along the proximal link.
        t_dist = t_prox @ transform((0, 0, BH_A2), rpy_matrix((BH_PHI3, 0, 0)))
        dist = f"bh_finger_{finger}_distal"
        dparts = [Part(box(BH_FINGER_W, BH_DIST_T, BH_A3), (0, 0, BH_A3 / 2), name=f"{dist}_box", color="dark"),
                  Part(box(BH_FINGER_W * 0.9, 0.003, BH_A3 * 0.6), (0, -BH_DIST_T / 2 - 0.0015, BH_A3 * 0.55),
                       name=f"{dist}_pad", color="pad")]
        links.append(body_link(dist, dparts, mass=BH_MASSES["distal"]))
        add_fixed_world(prox, dist, t_dist, "revolute", f"bh_finger_{finger}_distal_joint", axis=(1, 0, 0),
                        lower=BH_J2[0] * BH_J3_RATIO, upper=BH_J2[1] * BH_J3_RATIO, effort=1.5,
                        velocity=deg(140.0) * BH_J3_RATIO, damping=damping, friction=friction,
                        mimic=(f"bh_finger_{finger}_proximal_joint", BH_J3_RATIO, 0.0),
                        comment="TorqueSwitch coupling: q3 = (48/140) q2")
        tip = f"bh_finger_{finger}_tip"
        links.append(Link(tip))
        joints.append(Joint(f"{tip}_joint", "fixed", dist, tip, (0, -BH_DIST_T / 2 - 0.003, BH_A3 * 0.55),
                            comment="fingertip frame: centre of the distal pad face"))
    links.append(Link("bh_palm_surface"))
    joints.append(Joint("bh_palm_surface_joint", "fixed", "bh_base_link", "bh_palm_surface", (0, 0, BH_PALM_TOP)))
    return "barrett_hand_bh282", links, joints


# ==========================================================================================================
# Objects: masses and inertias from geometry x density (table in urdf/objects/objects.yaml)
# ==========================================================================================================

def objects():
    out = {}
    meta = {}

    def add(name, parts, density, comment, shape_desc):
        link = body_link(name, parts, density=density, comment=comment)
        out[name] = (name, [link], [])
        meta[name] = {"density": density, "mass": round(link.mass, 9), "shape": shape_desc, "note": comment}

    add("box_10cm", [Part(box(0.1, 0.1, 0.1), name="box_10cm", color="red")], 1000.0,
        "10 cm cube of water density (ICF paper clutter test: 1.0 kg)", "box 0.1 x 0.1 x 0.1 m")
    add("box_5cm", [Part(box(0.05, 0.05, 0.05), name="box_5cm", color="blue")], 500.0,
        "5 cm cube, light wood (500 kg/m^3)", "box 0.05 m")
    add("box_flat", [Part(box(0.12, 0.06, 0.04), name="box_flat", color="green")], 700.0,
        "12 x 6 x 4 cm block, wood (700 kg/m^3)", "box 0.12 x 0.06 x 0.04 m")
    add("sphere_10cm", [Part(sphere(0.05), name="sphere_10cm", color="red")], 1000.0,
        "10 cm diameter sphere of water density (ICF paper clutter test: 0.524 kg)", "sphere r 0.05 m")
    add("sphere_5cm", [Part(sphere(0.025), name="sphere_5cm", color="blue")], 1000.0,
        "5 cm diameter sphere of water density", "sphere r 0.025 m")
    add("bottle", [Part(cylinder(0.03, 0.18), name="bottle", color="clear")], 1000.0,
        "0.5 l water bottle: cylinder r 3 cm, 18 cm tall, full of water", "cylinder r 0.03 m, 0.18 m")
    add("cylinder_4cm", [Part(cylinder(0.02, 0.12), name="cylinder_4cm", color="green")], 1000.0,
        "4 cm diameter cylinder, 12 cm tall, water density", "cylinder r 0.02 m, 0.12 m")
    add("bronze_rod", [Part(cylinder(0.01, 0.2), name="bronze_rod", color="bronze")], 8000.0,
        "bronze rod (ICF paper grasp stress test: 8000 kg/m^3), 2 cm diameter, 20 cm long",
        "cylinder r 0.01 m, 0.2 m")
    # Mug of the TAMSI paper: 10 cm tall, 4 cm radius, 100 g. Collision = solid outer cylinder + handle; mass
    # and inertia from a thin-walled plastic cup (wall and bottom thickness t, density 1000) + solid handle, t
    # solved so that the total mass is 100 g.
    out["mug"], meta["mug"] = mug()
    # Static environment pieces (fixed in a scene; as free bodies they are heavy but consistent).
    add("table", table_parts(), 700.0, "table, wood (700 kg/m^3): 1.0 x 0.6 m top 3 cm thick at 0.75 m, "
        "four 4 x 4 cm legs", "top box 1.0 x 0.6 x 0.03 m + 4 legs 0.04 x 0.04 x 0.72 m")
    add("ground", [Part(box(2.0, 2.0, 0.1), (0, 0, -0.05), name="ground", color="grey")], 2400.0,
        "ground slab, concrete (2400 kg/m^3), top face at z = 0 (scenes should prefer shape: halfspace)",
        "box 2 x 2 x 0.1 m, top at z = 0")
    return out, meta


MUG_R, MUG_H, MUG_MASS, MUG_DENSITY = 0.04, 0.10, 0.100, 1000.0
MUG_HANDLE = (0.012, 0.012, 0.06)   # x (radial), y, z


def mug_shell_parts(t):
    """Thin-walled cup (approximated as a set of solids for the inertia): side wall as 24 boxes around the
    circle, bottom disk; plus the handle box. Returns parts and the exact shell volume."""
    parts = []
    n = 24
    r_mid = MUG_R - t / 2
    chord = 2 * r_mid * math.tan(PI / n)
    for k in range(n):
        a = 2 * PI * k / n
        parts.append(Part(box(t, chord, MUG_H - t), (r_mid * math.cos(a), r_mid * math.sin(a), t / 2),
                          (0, 0, a), collision=False, visual=False))
    parts.append(Part(cylinder(MUG_R, t), (0, 0, -MUG_H / 2 + t / 2), collision=False, visual=False))
    parts.append(Part(box(*MUG_HANDLE), (MUG_R + MUG_HANDLE[0] / 2, 0, 0), collision=False, visual=False))
    exact = (math.pi * (MUG_R**2 - (MUG_R - t) ** 2) * (MUG_H - t) + math.pi * MUG_R**2 * t
             + MUG_HANDLE[0] * MUG_HANDLE[1] * MUG_HANDLE[2])
    return parts, exact


def mug_wall_thickness():
    lo, hi = 1e-4, 0.02
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if MUG_DENSITY * mug_shell_parts(mid)[1] > MUG_MASS:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


def mug():
    t = mug_wall_thickness()
    mass_parts, _ = mug_shell_parts(t)
    link = body_link("mug", mass_parts, mass=MUG_MASS)
    link.parts = [Part(cylinder(MUG_R, MUG_H), name="mug_body", color="white"),
                  Part(box(*MUG_HANDLE), (MUG_R + MUG_HANDLE[0] / 2, 0, 0), name="mug_handle", color="white")]
    link.comment = (f"TAMSI paper mug: {MUG_H * 100:g} cm tall, {MUG_R * 100:g} cm radius, {MUG_MASS * 1000:g} g. "
                    f"Inertia of a plastic ({MUG_DENSITY:g} kg/m^3) cup with {t * 1000:.2f} mm walls + handle.")
    meta = {"density": MUG_DENSITY, "mass": MUG_MASS, "wall_thickness": round(t, 9),
            "shape": "thin-walled cup r 0.04 m, 0.1 m tall + handle box 0.012 x 0.012 x 0.06 m",
            "note": "collision: solid outer cylinder + handle; mass = density * shell volume"}
    return ("mug", [link], []), meta


def table_parts():
    parts = [Part(box(1.0, 0.6, 0.03), (0, 0, 0.735), name="table_top", color="wood")]
    for sx in (-1, 1):
        for sy in (-1, 1):
            parts.append(Part(box(0.04, 0.04, 0.72), (sx * 0.45, sy * 0.25, 0.36),
                              name=f"table_leg_{'p' if sx > 0 else 'm'}{'p' if sy > 0 else 'm'}", color="wood"))
    return parts


# ==========================================================================================================
# Test rigs: a hand on a vertical linear stage (grasp-and-lift tests and benchmarks of the arm-less hands)
# ==========================================================================================================

RIG_STROKE = 0.3        # m
RIG_FORCE = 200.0       # N
RIG_SPEED = 0.5         # m/s
RIG_CARRIAGE_MASS = 0.5


def lift_rig(hand, mount_rpy):
    """``hand`` (name, links, joints) mounted on a carriage that slides along world z ("lift_joint",
    0-0.3 m); ``mount_rpy`` orients the hand's root link on the carriage."""
    rname, links, joints = hand
    root = links[0].name
    carriage = body_link("lift_carriage", [Part(box(0.04, 0.04, 0.02), (0, 0, 0.01), collision=False,
                                                color="dark")], mass=RIG_CARRIAGE_MASS)
    rig_links = [Link("lift_base"), carriage]
    rig_joints = [Joint("lift_joint", "prismatic", "lift_base", "lift_carriage", (0, 0, 0), (0, 0, 0), (0, 0, 1),
                        0.0, RIG_STROKE, RIG_FORCE, RIG_SPEED, damping=1.0, friction=0.1,
                        comment="test rig: vertical linear stage"),
                  Joint("lift_mount_joint", "fixed", "lift_carriage", root, (0, 0, 0), mount_rpy)]
    return f"{rname}_lift_rig", rig_links + links, rig_joints + joints


HEADERS = {
    "iiwa": "KUKA LBR iiwa 14 R820, bare arm (no tool). Sources: docs/robots.md.",
    "iiwa_wsg": "KUKA LBR iiwa 14 R820 + Schunk WSG 50-110. Sources: docs/robots.md.",
    "franka": "Franka Emika Panda + Franka Hand. Sources: docs/robots.md.",
    "allegro": "Wonik/SimLab Allegro hand v4, right. Sources: docs/robots.md.",
    "barrett": "BarrettHand BH8-282. Sources: docs/robots.md.",
}


def main():
    robots = {"iiwa": iiwa(), "iiwa_wsg": iiwa_wsg(), "franka": franka(), "allegro": allegro(), "barrett": barrett()}
    robots["allegro_lift_rig"] = lift_rig(robots["allegro"], (0, -HALF_PI, 0))     # palm up
    robots["barrett_lift_rig"] = lift_rig(robots["barrett"], (PI, 0, 0))           # fingers down
    HEADERS["allegro_lift_rig"] = HEADERS["allegro"] + " Test rig: palm up on a vertical linear stage."
    HEADERS["barrett_lift_rig"] = HEADERS["barrett"] + " Test rig: fingers down on a vertical linear stage."
    for fname, (rname, links, joints) in robots.items():
        (URDF_DIR / f"{fname}.urdf").write_text(robot_xml(rname, links, joints, HEADERS[fname]))
        if any(link.mesh_visuals for link in links) and not fname.endswith("_rig"):
            (URDF_DIR / f"{fname}_mesh_visuals.urdf").write_text(
                robot_xml(rname, links, joints, HEADERS[fname] + " Visual meshes from example-robot-data.",
                          use_mesh_visuals=True))
    objs, meta = objects()
    (URDF_DIR / "objects").mkdir(exist_ok=True)
    for name, (rname, links, joints) in objs.items():
        (URDF_DIR / "objects" / f"{name}.urdf").write_text(robot_xml(rname, links, joints))
    with open(URDF_DIR / "objects" / "objects.yaml", "w") as f:
        f.write("# GENERATED by urdf/generate/generate_urdfs.py: object densities (kg/m^3) and masses (kg).\n")
        yaml.safe_dump(meta, f, sort_keys=True)
    print("wrote", ", ".join(sorted(robots)), "and objects", ", ".join(sorted(objs)))


if __name__ == "__main__":
    main()
