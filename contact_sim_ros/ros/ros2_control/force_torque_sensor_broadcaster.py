"""force_torque_sensor_broadcaster/ForceTorqueSensorBroadcaster: ``<name>/wrench`` (geometry_msgs/
WrenchStamped) of a 6-axis force/torque sensor, in the sensor frame ``frame_id``.

The sensor is ``sensor_name`` (a ``<sensor>`` of the ``<ros2_control>`` block, or the robot preset's
``ft_sensor`` frame). What it measures: the wrench transmitted between two links (contact_sim_ros.sim.sensors.
ForceTorqueSensor), taken from the robot preset's ``ft_sensor`` (parent_link, child_link) or from the
``<sensor>`` block's ``parent_link`` / ``child_link`` parameters. ``interface_names.*`` of single force
components are accepted when they all name one sensor (``<sensor>/force.x`` ...). Rate: ``update_rate`` (Hz;
default the node's ``wrench_rate``).
"""

from __future__ import annotations

from geometry_msgs.msg import WrenchStamped

from ...errors import ConfigError
from ..state_messages import has_readers
from .base import Controller

AXES = ("force.x", "force.y", "force.z", "torque.x", "torque.y", "torque.z")


class ForceTorqueSensorBroadcaster(Controller):
    TYPES = ("force_torque_sensor_broadcaster/ForceTorqueSensorBroadcaster",)
    PARAMETERS = ("sensor_name", "frame_id", "interface_names")

    def __init__(self, name, ctype, params, ctx):
        super().__init__(name, ctype, params, ctx)
        from ...sim.sensors import ForceTorqueSensor
        from ..state_messages import stamp
        self._stamp = stamp
        sensor = self.param("sensor_name", "", str)
        if not sensor:
            names = {str(self.params.get(f"interface_names.{a}", "")).split("/")[0] for a in AXES} - {""}
            if len(names) != 1:
                raise ConfigError(f"{self.where}: give 'sensor_name' (or interface_names.force.x ... of one "
                                  f"sensor)")
            sensor = names.pop()
        self.sensor = sensor
        frame = self.param("frame_id", "", str)
        if not frame:
            raise ConfigError(f"{self.where}: parameter 'frame_id' is required (the sensor frame of the wrench)")
        robot = ctx.robot
        ft = (robot.ft_sensor if robot is not None else None) or {}
        info = ctx.hardware.hardware_info
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
        self._links = (parent, child, measured)
        try:
            self.ft = ForceTorqueSensor(ctx.model, parent, child, measured)
        except (KeyError, ValueError) as exc:
            raise ConfigError(f"{self.where}: sensor '{sensor}': {exc}") from None
        self._msg = WrenchStamped()
        self._msg.header.frame_id = (ctx.node.config.frame_prefix if ctx.frame_prefix is None
                                     else ctx.frame_prefix) + frame
        self.pub = ctx.node.create_publisher(WrenchStamped, f"{name}/wrench", 10)
        rate = self.param("update_rate", None, float)
        self.publish_every = ctx.decimation(rate if rate else ctx.node.config.wrench_rate)

    def state_interfaces(self):
        return [f"{self.sensor}/{a}" for a in AXES]

    def on_model_changed(self, model):
        from ...sim.sensors import ForceTorqueSensor
        self.ft = ForceTorqueSensor(model, *self._links)     # the robot's links are unchanged: cannot fail

    def publish(self, sim):
        if not has_readers(self.pub):
            return
        node = self.ctx.node
        forces = node.contact_forces(sim)
        a = (sim.v - self.ctx.loop.v_prev) / sim.time_step
        reading = self.ft.compute(sim.q, sim.v, a, sim.contacts if forces.shape[0] else None, forces)
        w = self._msg
        self._stamp(sim.t, w.header.stamp)
        fx, fy, fz, tx, ty, tz = reading.tolist()
        w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = fx, fy, fz
        w.wrench.torque.x, w.wrench.torque.y, w.wrench.torque.z = tx, ty, tz
        self.pub.publish(w)


