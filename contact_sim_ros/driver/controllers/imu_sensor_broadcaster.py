"""imu_sensor_broadcaster/IMUSensorBroadcaster: ``<name>/imu`` (sensor_msgs/Imu) of an IMU, in ``frame_id``.

The sensor is ``sensor_name``, a ``<sensor>`` of the ``<ros2_control>`` block with the IMU's state interfaces
(orientation.x ... linear_acceleration.z, or a ``type`` param ``imu``) and a ``frame_id`` param naming the link it is
mounted on (else the broadcaster's ``frame_id``): a sensors/imu.Imu. The covariances are the ``static_covariance_*``
parameters (row-major 3 x 3, as ros2_controllers'). Rate: ``update_rate`` (Hz; default the node's ``wrench_rate``).
The publisher is the transport's (ros/controller_io.py)."""

from __future__ import annotations

from ...errors import ConfigError
from ...sensors.base import SensorSpec, spec_from_hardware
from ...sensors.imu import Imu
from ..parameters import Parameter, ParameterTable
from .base import UPDATE_RATE
from .sensor_broadcaster import SensorBroadcaster

COVARIANCES = ("static_covariance_orientation", "static_covariance_angular_velocity",
               "static_covariance_linear_acceleration")


class IMUSensorBroadcaster(SensorBroadcaster):
    TYPES = ("imu_sensor_broadcaster/IMUSensorBroadcaster",)
    PARAMETERS = ParameterTable(
        Parameter("sensor_name", "string", "", description="the <sensor> of the <ros2_control> block (required)"),
        Parameter("frame_id", "string", "", description="the frame of the readings (required)"),
        *(Parameter(c, "double_array", [0.0] * 9, description="row-major 3 x 3 covariance") for c in COVARIANCES),
        UPDATE_RATE,
    )

    def __init__(self, name, ctype, params, ctx):
        super().__init__(name, ctype, params, ctx)
        p = self.parameters()
        sensor, frame = p["sensor_name"], p["frame_id"]
        if not sensor or not frame:
            raise ConfigError(f"{self.where}: parameters 'sensor_name' and 'frame_id' are required")
        self.frame_id = frame
        self.covariances = []
        for c in COVARIANCES:
            values = [float(x) for x in p[c]]
            if len(values) != 9:
                raise ConfigError(f"{self.where}: parameter '{c}' has {len(values)} values; expected 9 (3 x 3)")
            self.covariances.append(values)
        block, info = self.hardware_sensor(sensor)
        spec = spec_from_hardware(block, info.source, default_type=Imu.type_name)
        if spec.type != Imu.type_name:
            raise ConfigError(f"{self.where}: sensor '{sensor}' is of type {spec.type!r}, not imu")
        params = dict(spec.params)
        params.setdefault("frame_id", frame)
        self.attach_sensor(sensor, SensorSpec(sensor, spec.type, params, spec.source))
        rate = p["update_rate"]
        self.publish_every = ctx.decimation(rate if rate else ctx.default_rates.get("wrench", 0.0))
