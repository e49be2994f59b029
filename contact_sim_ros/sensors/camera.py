"""camera: an RGB-D camera of the scene or the robot's URDF (sensor_msgs/Image, CameraInfo, PointCloud2).

Registered here so that every sensor type has one place: a scene's cameras are its ``camera`` sensors
(sim/scene.py: ``Scene.sensors``, built by sensors/base.scene_sensors from its ``cameras:`` entries and its
``sensors:`` entries of type camera; ``Scene.cameras`` is their parsed specs), and the node's cameras are those
(ros/sim_node.py). Measured off the stepping thread: the camera process (ros/camera_process.py, cameras/) renders a
state snapshot, never steps the simulation. Spec parameters: a ``cameras:`` entry's keys but its name
(cameras/spec.parse_camera: parent, pose, width, height, fov or fx/fy/cx/cy, ...; a camera named like one of the
robot's URDF is that one); ``camera`` keeps the parsed cameras/spec.CameraSpec.
"""

from __future__ import annotations

from ..cameras.spec import CameraSpec, parse_camera_entry
from .base import Sensor, SensorSpec, register_sensor


@register_sensor
class Camera(Sensor):
    type_name = "camera"
    message_type = "sensor_msgs/msg/Image"
    interfaces = ()
    off_thread = True

    def __init__(self, spec: SensorSpec, model, camera: CameraSpec | None = None):
        super().__init__(spec, model)
        self.camera = camera if camera is not None else parse_camera_entry(
            {"name": spec.name, **spec.params}, 0, model, spec.source, where=spec.source or f"sensor {spec.name!r}")

    @classmethod
    def of(cls, camera: CameraSpec, model, source: str = "") -> "Camera":
        """The sensor of an already parsed camera (cameras/spec.parse_cameras)."""
        return cls(SensorSpec(camera.name, cls.type_name, {}, source), model, camera)

    def measure(self, sim, v_prev=None):
        raise RuntimeError(f"camera {self.name!r} is measured off the stepping thread, by the camera process "
                           f"(ros/camera_process.py)")
