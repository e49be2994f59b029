"""Simulated sensors behind one seam (sensors/base.py): a spec, a ``measure`` into preallocated state interfaces,
a message type, and a registry of types (one module per type)."""

from .base import (Sensor, SensorSpec, make_sensor, register_sensor, scene_sensors, sensor_class,  # noqa: F401
                   sensor_types, spec_from_hardware, spec_from_mapping, spec_from_preset)
