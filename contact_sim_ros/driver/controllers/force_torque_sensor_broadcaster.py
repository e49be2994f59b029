"""force_torque_sensor_broadcaster/ForceTorqueSensorBroadcaster: ``<name>/wrench`` (geometry_msgs/
WrenchStamped) of a 6-axis force/torque sensor, in the sensor frame ``frame_id``.

The sensor is ``sensor_name`` (a ``<sensor>`` of the ``<ros2_control>`` block, or the robot preset's
``ft_sensor`` frame). What it measures: the wrench transmitted between two links (contact_sim_ros.sim.sensors.
ForceTorqueSensor), taken from the robot preset's ``ft_sensor`` (parent_link, child_link) or from the
``<sensor>`` block's ``parent_link`` / ``child_link`` parameters. ``interface_names.*`` of single force
components are accepted when they all name one sensor (``<sensor>/force.x`` ...). Rate: ``update_rate`` (Hz;
default the node's ``wrench_rate``). The wrench is a state interface of the hardware System (system.py computes
it); the publisher is the transport's (ros/controllers.py).
"""

from __future__ import annotations

from ...errors import ConfigError
from ..parameters import Parameter, ParameterTable
from .base import UPDATE_RATE, Controller

AXES = ("force.x", "force.y", "force.z", "torque.x", "torque.y", "torque.z")


class ForceTorqueSensorBroadcaster(Controller):
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
        self.sensor = sensor
        self.frame_id = frame = p["frame_id"]
        if not frame:
            raise ConfigError(f"{self.where}: parameter 'frame_id' is required (the sensor frame of the wrench)")
        robot = ctx.robot
        ft = (robot.ft_sensor if robot is not None else None) or {}
        info = ctx.command.hardware_info
        block = info.sensor(sensor) if info is not None else None
        if block is not None and "parent_link" in block.params:
            parent, child = block.params["parent_link"], block.params.get("child_link")
            measured = block.params.get("frame_id", frame)
        elif ft and sensor in (ft.get("frame"), ft.get("name")):
            parent, child, measured = ft["parent_link"], ft["child_link"], ft.get("frame") or frame
        else:
            known = [s.name for s in info.sensors] if info is not None else []
            raise ConfigError(f"{self.where}: unknown sensor '{sensor}': no <sensor> with parent_link/child_link "
                              f"parameters in the <ros2_control> block and not the robot preset's ft_sensor "
                              f"({ft.get('frame') if ft else 'none'}); sensors: {known}")
        self._key = f"{name}:{sensor}"
        try:
            ctx.state.add_sensor(self._key, parent, child, measured)
        except (KeyError, ValueError) as exc:
            raise ConfigError(f"{self.where}: sensor '{sensor}': {exc}") from None
        rate = p["update_rate"]
        self.publish_every = ctx.decimation(rate if rate else ctx.default_rates.get("wrench", 0.0))

    def state_interfaces(self):
        return [f"{self.sensor}/{a}" for a in AXES]

    def reading(self):
        """The wrench (fx, fy, fz, tx, ty, tz; N, N*m in the sensor frame) of the sensor's state interfaces."""
        return self.ctx.state.wrench(self._key)
