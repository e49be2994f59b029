"""Simulated sensors behind one seam (sensors/base.py): a spec, a ``measure`` into preallocated state interfaces,
a message type, and a registry of types (one module per type)."""

from .base import (Sensor, SensorSpec, make_sensor, register_sensor, sensor_class, sensor_types,  # noqa: F401
                   spec_from_hardware, spec_from_mapping, spec_from_preset)
