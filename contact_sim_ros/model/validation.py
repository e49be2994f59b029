"""Physical checks of a loaded URDF's mass properties (called by ``loader.load_urdf``).

A *moving link* is a URDF link that a joint moves: its Pinocchio body is attached to a joint other than the
universe (fixed-base links welded to the world are not checked, every link of a free object is). Two levels:

* every moving link's own ``<inertial>`` (read from the XML, because Pinocchio silently turns an unparsable,
  NaN or infinite mass into 0): mass and the six inertia entries finite numbers, mass >= 0;
* every moving rigid body as Pinocchio composes it (the link and every link fixed to it, which is what the
  dynamics sees): mass > 0 and finite, rotational inertia about the centre of mass finite, positive definite
  and satisfying the triangle inequality, I1 + I2 >= I3 for every permutation of the principal moments.

The inertia conditions are checked on the composed body, not on each welded link: published URDFs carry
non-physical inertias on links that are welded to heavier ones (example-robot-data's Allegro ``link_3.0``
violates the triangle inequality by 20 %, its composed fingertip body does not), and such a model steps
correctly. A massless link (a tool frame) welded to a moving link is fine; a moving joint whose body has no
mass is not.

Without these checks such a model loads and then fails in the first step ("singular Newton Jacobian") or
accelerates the wrong way. Errors are ``ModelError`` naming the URDF file and the link.
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

from ..errors import ModelError

# relative tolerance (of the trace) on the triangle inequality and on positive definiteness: URDF
# inertias are printed with a few digits, so a thin rod or a flat plate sits on the bound up to round-off
INERTIA_TOLERANCE = 1e-6

_INERTIA_KEYS = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")


def validate_mass_properties(model: pin.Model, urdf_root, source: str) -> None:
    """ModelError naming ``source`` and the link if a moving link's mass or inertia is not physical.
    ``urdf_root``: the parsed ``<robot>`` element (xml.etree) the ``model`` was built from."""
    moving = _moving_links(model)
    for link in urdf_root.findall("link"):
        name = link.get("name")
        inertial = link.find("inertial")
        if name in moving and inertial is not None:
            _check_link_inertial(inertial, name, source)
    for jid in range(1, model.njoints):
        link = _body_link(model, jid)
        if link is None:
            continue
        inertia = model.inertias[jid]
        where = f"{source}: moving link {link!r} (joint {model.names[jid]!r}, with the links fixed to it)"
        mass = float(inertia.mass)
        if not (math.isfinite(mass) and mass > 0.0):
            raise ModelError(f"{where}: mass must be > 0 kg and finite, got {mass!r} (a moving link needs an "
                             f"<inertial> with a positive <mass>)")
        _check_rotational_inertia(np.asarray(inertia.inertia), where)


def _moving_links(model: pin.Model) -> set[str]:
    return {f.name for f in model.frames if f.type == pin.FrameType.BODY and f.parentJoint != 0}


def _body_link(model: pin.Model, jid: int) -> str | None:
    """The URDF link a joint moves directly (its first body frame), None for a joint without a body."""
    for f in model.frames:
        if f.type == pin.FrameType.BODY and f.parentJoint == jid:
            return f.name
    return None


def _number(element, attribute: str, where: str) -> float:
    text = element.get(attribute) if element is not None else None
    if text is None:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ModelError(f"{where}: {attribute} must be a finite number, got {text!r}")
    return value


def _check_link_inertial(inertial, link: str, source: str) -> None:
    where = f"{source}: moving link {link!r}"
    mass = _number(inertial.find("mass"), "value", f"{where}: <mass>")
    if mass < 0.0:
        raise ModelError(f"{where}: mass must be >= 0 kg, got {mass!r}")
    element = inertial.find("inertia")
    for key in _INERTIA_KEYS:
        _number(element, key, f"{where}: <inertia>")


def _check_rotational_inertia(matrix: np.ndarray, where: str) -> None:
    """Finite, symmetric positive definite and I1 + I2 >= I3 for the principal moments (kg*m^2)."""
    if not np.all(np.isfinite(matrix)):
        raise ModelError(f"{where}: inertia must be finite, got {matrix.tolist()}")
    moments = np.linalg.eigvalsh(0.5 * (matrix + matrix.T))          # ascending
    scale = max(float(np.abs(moments).sum()), np.finfo(float).tiny)
    tol = INERTIA_TOLERANCE * scale
    shown = ", ".join(f"{m:.6g}" for m in moments)
    if not moments[0] > tol:
        raise ModelError(f"{where}: inertia must be positive definite, principal moments {shown} kg*m^2")
    if moments[0] + moments[1] < moments[2] - tol:
        raise ModelError(f"{where}: inertia violates the triangle inequality I1 + I2 >= I3 (principal moments "
                         f"{shown} kg*m^2): no rigid body has it")
