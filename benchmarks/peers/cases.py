"""The shared scenes of the peer benchmark (issue 18): imported by ours_case.py (project venv) and drake_case.py
(Drake's venv), so it imports nothing but the standard library."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@dataclass(frozen=True)
class Case:
    name: str            # key on the command line
    title: str           # row label
    scene: Path          # our scene file; drake_case.py builds the same scene from it
    dt: float            # s
    duration: float      # s of sim time (default; --quick shortens)
    engines: tuple       # our engine names == Drake's DiscreteContactApproximation names
    sample: float = 0.01  # s between recorded positions (trajectory deviation)
    compare: str = "bodies"   # "bodies": free-body positions (m); "joints": joint positions (rad / m)


CASES = {
    "box": Case("box", "box stick-slip", HERE / "scenes" / "box_stick_slip.yaml", 1e-3, 5.0, ("tamsi", "lagged")),
    "sphere": Case("sphere", "sphere rolling", ROOT / "scenes" / "icf_falling_sphere.yaml", 2e-3, 1.0,
                   ("tamsi", "lagged")),
    "iiwa": Case("iiwa", "iiwa 14 + WSG held by PD", HERE / "scenes" / "iiwa_wsg_pd.yaml", 1e-3, 2.0,
                 ("tamsi", "lagged"), compare="joints"),
    "clutter": Case("clutter", "40-object clutter", ROOT / "scenes" / "icf_clutter.yaml", 2e-3, 1.0,
                    ("tamsi", "lagged", "similar", "sap")),
}

# Drake's settings that mirror our engines' defaults (contact_sim_ros/engines/tamsi.py, lagged.py)
STICTION_TOLERANCE = 1e-4    # m/s: TAMSI v_s, ICF regularized stiction floor
SAP_RELAXATION_TIME = 1e-3   # s: pair tau_d of our 'sap' (Drake adds the two geometries' values)
