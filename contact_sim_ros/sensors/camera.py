"""camera: an RGB-D camera of the scene or the robot's URDF (sensor_msgs/Image, CameraInfo, PointCloud2).

Registered here so that every sensor type has one place; measured off the stepping thread: the camera process
(ros/camera_process.py, cameras/) renders a state snapshot, never steps the simulation. Spec parameters: a scene's
``cameras:`` entry (cameras/spec.parse_camera: parent, pose, width, height, fov or fx/fy/cx/cy, ...); ``spec``
keeps the parsed cameras/spec.CameraSpec.
"""

from __future__ import annotations

from ..cameras.spec import CameraSpec, parse_camera
from ..model.multibody_model import model_body_names
from .base import Sensor, SensorSpec, register_sensor


@register_sensor
class Camera(Sensor):
    type_name = "camera"
    message_type = "sensor_msgs/msg/Image"
    interfaces = ()
    off_thread = True

    def __init__(self, spec: SensorSpec, model, camera: CameraSpec | None = None):
        super().__init__(spec, model)
        self.camera = camera if camera is not None else parse_camera(
            {"name": spec.name, **spec.params}, 0, set(model_body_names(model)), spec.source)

    @classmethod
    def of(cls, camera: CameraSpec, model, source: str = "") -> "Camera":
        """The sensor of an already parsed camera (cameras/spec.parse_cameras)."""
        return cls(SensorSpec(camera.name, cls.type_name, {}, source), model, camera)

    def measure(self, sim, v_prev=None):
        raise RuntimeError(f"camera {self.name!r} is measured off the stepping thread, by the camera process "
                           f"(ros/camera_process.py)")
