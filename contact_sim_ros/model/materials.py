"""Contact materials: per-geometry compliance, Hunt & Crossley dissipation, friction, restitution."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from ..errors import ConfigError


@dataclass(frozen=True)
class ContactMaterial:
    """Material of one collision geometry.

    stiffness:    point-contact stiffness k (N/m); the normal force is k * penetration * (1 + d * rate)_+.
    dissipation:  Hunt & Crossley dissipation d (s/m).
    friction:     Coulomb friction coefficient mu (dimensionless; static = dynamic).
    restitution:  coefficient of restitution e in [0, 1] (used by impulsive engines such as the LCP engine).
    """

    stiffness: float = 1.0e5
    dissipation: float = 10.0
    friction: float = 0.5
    restitution: float = 0.0

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if not np.isfinite(value) or value < 0.0:
                raise ConfigError(f"contact material {f.name} must be finite and >= 0, got {value!r}")
        if self.stiffness <= 0.0:
            raise ConfigError(f"contact material stiffness must be > 0 N/m, got {self.stiffness!r}")
        if self.restitution > 1.0:
            raise ConfigError(f"contact material restitution must be in [0, 1], got {self.restitution!r}")

    @classmethod
    def from_dict(cls, values: dict, base: "ContactMaterial | None" = None, where: str = "material"):
        """Build from a config mapping; unknown keys are an error naming the valid keys."""
        base = base or cls()
        valid = {f.name for f in fields(cls)}
        if not isinstance(values, dict):
            raise ConfigError(f"{where}: expected a mapping with keys {sorted(valid)}, got {values!r}")
        unknown = set(values) - valid
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; valid keys: {sorted(valid)}")
        try:
            return replace(base, **{k: float(v) for k, v in values.items()})
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: {exc}") from None
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None


def combine_materials(stiffness_a, dissipation_a, friction_a, restitution_a,
                      stiffness_b, dissipation_b, friction_b, restitution_b):
    """Combine two materials into the pair's effective values (vectorised over pairs).

    Springs in series for stiffness, k = ka kb / (ka + kb); dissipation weighted as Drake does,
    d = (kb da + ka db) / (ka + kb); friction mu = 2 mua mub / (mua + mub) (0 if both are 0);
    restitution e = min(ea, eb).
    Returns (stiffness N/m, dissipation s/m, friction, restitution) arrays.
    """
    ka, kb = np.asarray(stiffness_a, float), np.asarray(stiffness_b, float)
    ksum = ka + kb
    stiffness = ka * kb / ksum
    dissipation = (kb * np.asarray(dissipation_a) + ka * np.asarray(dissipation_b)) / ksum
    mua, mub = np.asarray(friction_a, float), np.asarray(friction_b, float)
    musum = mua + mub
    friction = np.divide(2.0 * mua * mub, musum, out=np.zeros_like(musum), where=musum > 0)
    restitution = np.minimum(restitution_a, restitution_b)
    return stiffness, dissipation, friction, restitution
