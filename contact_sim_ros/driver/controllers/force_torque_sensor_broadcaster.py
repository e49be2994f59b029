"""force_torque_sensor_broadcaster/ForceTorqueSensorBroadcaster: ``<name>/wrench`` (geometry_msgs/
WrenchStamped) of a 6-axis force/torque sensor, in the sensor frame ``frame_id``.

The sensor is ``sensor_name`` (a ``<sensor>`` of the ``<ros2_control>`` block, or the robot preset's
``ft_sensor`` frame): a sensors/force_torque.ForceTorque (the wrench transmitted between two links), its spec
from the ``<sensor>`` block's ``parent_link`` / ``child_link`` parameters or the preset's ``ft_sensor``
(force_torque.broadcaster_spec). The broadcaster reads the sensor's six state interfaces, as ros2_controllers'
reads its semantic component. ``interface_names.*`` of single force
components are accepted when they all name one sensor (``<sensor>/force.x`` ...). Rate: ``update_rate`` (Hz;
default the node's ``wrench_rate``). The wrench is a state interface of the hardware System (system.py computes
it); the publisher is the transport's (ros/controller_io.py).
"""

from __future__ import annotations

from ...errors import ConfigError
from ...sensors.force_torque import AXES, broadcaster_spec
from ..parameters import Parameter, ParameterTable
from .base import UPDATE_RATE
from .sensor_broadcaster import SensorBroadcaster


class ForceTorqueSensorBroadcaster(SensorBroadcaster):
    TYPES = ("force_torque_sensor_broadcaster/ForceTorqueSensorBroadcaster",)
    PARAMETERS = ParameterTable(
        Parameter("sensor_name", "string", "", description="the <sensor> of the <ros2_control> block (or the "
                  "robot preset's ft_sensor frame)"),
        Parameter("frame_id", "string", "", description="the sensor frame of the wrench (required)"),
        *(Parameter(f"interface_names.{a}", "string", "", description=f"<sensor>/{a} (all of one sensor)")
          for a in AXES),
        UPDATE_RATE,
    )

    def __init__(self, name, ctype, params, ctx):
        super().__init__(name, ctype, params, ctx)
        p = self.parameters()
        sensor = p["sensor_name"]
        if not sensor:
            names = {str(p[f"interface_names.{a}"]).split("/")[0] for a in AXES} - {""}
            if len(names) != 1:
                raise ConfigError(f"{self.where}: give 'sensor_name' (or interface_names.force.x ... of one "
                                  f"sensor)")
            sensor = names.pop()
        self.frame_id = frame = p["frame_id"]
        if not frame:
            raise ConfigError(f"{self.where}: parameter 'frame_id' is required (the sensor frame of the wrench)")
        spec = broadcaster_spec(sensor, frame, ctx.command.hardware_info, ctx.robot, self.where)
        self.attach_sensor(sensor, spec)        # ConfigError: unknown links (named with the sensor)
        rate = p["update_rate"]
        self.publish_every = ctx.decimation(rate if rate else ctx.default_rates.get("wrench", 0.0))

    # reading(): the wrench (fx, fy, fz, tx, ty, tz; N, N*m in the sensor frame) of the sensor's state interfaces
