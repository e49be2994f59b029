"""The TF tree of a scene model (pure Pinocchio, no rclpy): which link-to-link transforms are static and which
move, as robot_state_publisher would publish them from the URDF."""

from __future__ import annotations

from dataclasses import dataclass

import pinocchio as pin

from ..model.multibody_model import parent_link_frame


@dataclass(frozen=True)
class TfEdge:
    parent: str        # frame id (prefixed; the universe is the world frame)
    child: str
    parent_frame: int  # Pinocchio frame index (0 = universe)
    child_frame: int
    static: bool       # True when no degree of freedom lies between parent and child


def tf_edges(model, frame_prefix: str = "", world_frame: str = "world",
             link_prefixes: dict | None = None) -> list[TfEdge]:
    """One edge per link (BODY frame) and free object: parent link -> link. Links attached to the universe by
    a fixed joint (the robot base, static environment links) are static; so are links merged by fixed joints.
    ``link_prefixes``: link name -> its frame prefix (the robots of a multi-robot scene); other frames get
    ``frame_prefix``."""
    link_prefixes = link_prefixes or {}

    def frame_id(name):
        return link_prefixes.get(name, frame_prefix) + name
    pm = model.pin_model
    free_frames = {}
    for body in model.free_bodies:
        if pm.existFrame(body.frame_name, pin.FrameType.BODY):
            free_frames[pm.getFrameId(body.frame_name, pin.FrameType.BODY)] = body.name
    edges = []
    seen = set()
    for fid, frame in enumerate(pm.frames):
        if fid == 0 or frame.type != pin.FrameType.BODY or frame.name in seen:
            continue
        seen.add(frame.name)
        parent = parent_link_frame(pm, fid)
        static = pm.frames[parent].parentJoint == frame.parentJoint
        pname = world_frame if parent == 0 else frame_id(pm.frames[parent].name)
        cname = frame_id(free_frames.get(fid, frame.name))
        edges.append(TfEdge(pname, cname, parent, fid, static))
    return edges
