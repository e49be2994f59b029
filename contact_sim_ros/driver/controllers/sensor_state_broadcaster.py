"""contact_sim_ros/SensorStateBroadcaster: the generic broadcaster of a sensor's readings, for the sensor types
that have no ros2_controllers broadcaster (a scene's ``contact_wrench`` and ``external_joint_torques``; a force/torque
sensor too). Parameters: ``sensor_name`` (a sensor of the scene's ``sensors:`` or a ``<sensor>`` of the
``<ros2_control>`` block, with its ``type`` parameter) and ``update_rate`` (Hz; default the node's ``wrench_rate``).

What it publishes follows the sensor type's ``message_type`` (sensors/base.Sensor), on ``<name>/<sensor type>``:

* geometry_msgs/msg/WrenchStamped: one message per reading row, ``<name>/<type>/<body>`` per body of a
  contact_wrench (force N, torque N*m about the body frame's origin, in the body frame: ``frame_id`` the body), one
  ``<name>/<type>`` of a force_torque sensor (in its ``frame_id``);
* sensor_msgs/msg/JointState: ``name`` the sensor's joints, ``effort`` its reading (an external_joint_torques'
  tau_ext, N*m or N), position and velocity empty.

The readings are the sensor's state interfaces (the hardware System measures it: sensor_broadcaster.py); the
publishers are the transport's (ros/controller_io.py SensorStateIO, clients/inprocess_link.py). Another message type
(an IMU: imu_sensor_broadcaster; a camera: its process) is a ConfigError naming the broadcaster for it."""

from __future__ import annotations

from ...errors import ConfigError
from ...sensors.base import spec_from_hardware
from ..parameters import Parameter, ParameterTable
from .base import UPDATE_RATE
from .sensor_broadcaster import SensorBroadcaster

WRENCH, JOINT_STATE = "geometry_msgs/msg/WrenchStamped", "sensor_msgs/msg/JointState"
OTHER_BROADCASTERS = {"sensor_msgs/msg/Imu": "imu_sensor_broadcaster/IMUSensorBroadcaster"}


class SensorStateBroadcaster(SensorBroadcaster):
    TYPES = ("contact_sim_ros/SensorStateBroadcaster",)
    PARAMETERS = ParameterTable(
        Parameter("sensor_name", "string", "", description="a sensor of the scene's 'sensors:' or of the "
                  "<ros2_control> block (required)"),
        UPDATE_RATE,
    )

    def __init__(self, name, ctype, params, ctx):
        super().__init__(name, ctype, params, ctx)
        p = self.parameters()
        sensor = p["sensor_name"]
        if not sensor:
            raise ConfigError(f"{self.where}: parameter 'sensor_name' is required (a sensor of the scene's "
                              f"'sensors:' or a <sensor> of the <ros2_control> block)")
        block, info = self.hardware_sensor(sensor)
        spec = spec_from_hardware(block, info.source)
        measured = self.attach_sensor(sensor, spec)      # ConfigError: bad parameters, unknown links
        self.message_type = measured.message_type
        if self.message_type not in (WRENCH, JOINT_STATE):
            other = OTHER_BROADCASTERS.get(self.message_type, "")
            raise ConfigError(f"{self.where}: sensor '{sensor}' ({spec.type}) publishes {self.message_type}, "
                              f"which this broadcaster does not" + (f"; use {other}" if other else ""))
        self.sensor_type = spec.type
        self.labels = measured.labels()
        self.frame_id = str(spec.params.get("frame_id") or sensor)
        rate = p["update_rate"]
        self.publish_every = ctx.decimation(rate if rate else ctx.default_rates.get("wrench", 0.0))

    def messages(self) -> list[tuple[str, str]]:
        """(topic suffix, frame_id) of each message a publication sends, the suffix after ``<name>/<type>``: per
        row of a labelled WrenchStamped sensor its label (a body; the transport makes it a topic token) with the
        label as frame, else one message ('' suffix) in ``frame_id``."""
        if self.message_type == WRENCH and self.labels is not None:
            return [(label, label) for label in self.labels]
        return [("", self.frame_id)]
