"""The scene's simulated RGB-D cameras on realsense2_camera's topics (docs/cameras.md).

Per camera ``C`` (relative to the node's namespace, as the driver's ``<camera_namespace>/<camera_name>``):

    C/C/color/image_raw                   sensor_msgs/Image rgb8
    C/C/color/camera_info                 sensor_msgs/CameraInfo (plumb_bob, no distortion)
    C/C/depth/image_rect_raw              sensor_msgs/Image 16UC1, millimetres, 0 = no depth
    C/C/depth/camera_info
    C/C/aligned_depth_to_color/image_raw  16UC1 in the color optical frame
    C/C/aligned_depth_to_color/camera_info
    C/C/depth/color/points                sensor_msgs/PointCloud2 x y z (float32) rgb (float32, bytes b g r 0),
                                          point_step 20, unordered (height 1), only points with depth
    C/C/segmentation/image_raw            sensor_msgs/Image 16UC1 labels (0 = nothing)
    C/C/segmentation/labels               std_msgs/String, JSON {label: {name, kind, robot}}, transient local

QoS as the driver's defaults: images SYSTEM_DEFAULT, camera_info and the point cloud DEFAULT (reliable, volatile,
depth 10); sources in ros/camera_topics.py.
TF (static, REP 103): parent -> C_link (the scene pose) -> C_color_frame / C_depth_frame (identity: color and
depth are rendered from one viewpoint) -> C_color_optical_frame / C_depth_optical_frame (rpy -pi/2, 0, -pi/2).
Stamps are the sim time of the rendered state.

Where they are rendered: the stepping thread only hands a copy of (t, q) over, at each camera's rate in sim time
(``hooks``: a PublishHook per camera). With ``camera_sync`` (default) it waits for the camera process to take a
camera's previous state before handing over the next (every frame rendered; the simulation slows down when
rendering cannot keep up); without it, a camera's newer state replaces its untaken older one. By default a process of
its own renders and publishes them
(ros/camera_process.py: node ``<node>_cameras`` in the node's namespace; the stepping thread shares no interpreter
lock with it). When the node records a bag (``record``), a render thread of the node does (cameras/
render_thread.py), so that the recorder, which taps the node's own publishers, records the camera topics too.
Nothing is rendered for a camera none of whose topics has a reader and no browser watches.
"""

from __future__ import annotations

from diagnostic_msgs.msg import DiagnosticStatus, KeyValue

from ..cameras.render_thread import RenderThread
from ..driver.loop import PublishHook
from ..errors import ContactSimError
from .camera_process import CameraProcess
from .camera_topics import LATCHED, CameraTopics, camera_static_transforms

try:
    from tf2_msgs.msg import TFMessage
except ImportError:   # built into the venv by scripts/ensure_venv.sh; without it the cameras' TF is not published
    TFMessage = None


class CameraPublisher:
    """The node's cameras: static TF, the stepping-thread hooks, and what renders and publishes them: a
    CameraProcess, or (``in_node``, when the node records) the node's own publishers fed by a RenderThread.

    ``node``: the SimNode (``node.world``, ``node.prefix``, ``node.link_prefixes`` name the parent frames);
    ``cameras``: the cameras/spec.CameraSpec of the scene's camera sensors (sensors/camera.py; the scene's
    ``cameras`` list, which its render process reads).
    Raises ContactSimError (the render back-end missing, a bad camera) at start-up, after the renderer tried to
    make its GL context."""

    def __init__(self, node, sim, cameras, viewer=None, in_node: bool = False, priority: str = "idle"):
        self.node = node
        self.sim = sim
        self.viewer = viewer          # the browser view (ViewerProcess): the frusta with their live images
        self.log = node.get_logger()
        self.specs = list(cameras)
        if [c.name for c in self.specs] != [c.name for c in sim.scene.cameras]:
            raise ContactSimError(f"cameras {[c.name for c in self.specs]}: not the scene's cameras "
                                  f"{[c.name for c in sim.scene.cameras]}, which its render process renders")
        for spec in self.specs:
            spec.check_rate(sim.time_step)
        self.topics = None
        self.process = None
        if in_node:
            self.topics = {s.name: CameraTopics(node, s, node.prefix) for s in self.specs}
            self.renderer = RenderThread(sim.scene, sim.time_step, on_frame=self._on_frame,
                                         on_ready=self._publish_labels, on_error=self._render_error, drop=True)
            description = self.renderer.description + " in a thread of the node (it records)"
        else:
            config = getattr(node, "config", None)
            self.process = CameraProcess(sim.scene, sim.time_step, node.get_name(), node.get_namespace(),
                                         node.prefix, viewer.cameras if viewer is not None else None, priority,
                                         log=self.log, sync=getattr(config, "camera_sync", True))
            description = self.process.description
        self.log.info(f"cameras {', '.join(s.name for s in self.specs)}: {description}")
        self._publish_static(sim.t)

    # ------------------------------------------------------------------------ stepping thread

    def hooks(self) -> list[PublishHook]:
        """A PublishHook per camera, every ``round(1 / (rate dt))`` steps: hands (t, copy of q) over."""
        return [PublishHook(f"camera {spec.name}", spec.decimation(self.sim.time_step),
                            lambda sim, name=spec.name: self.request(name, sim)) for spec in self.specs]

    def request(self, name: str, sim) -> None:
        """Stepping thread: hand camera ``name`` a copy of the current state; never waits for rendering."""
        watched = self.viewer is not None and self.viewer.watched
        if self.process is not None:
            if not self.process.request(name, sim, watched):      # the child looks at its topics' readers
                self.log.error(f"camera {name!r}: the configuration has {len(sim.q)} entries, more than the camera "
                               f"process takes ({self.process.q_capacity}): not rendered (a node that records "
                               f"renders in a thread of its own, without this limit)", throttle_duration_sec=10.0)
        elif self.topics[name].wanted() or watched:
            self.renderer.request(name, sim)

    def _on_frame(self, name: str, frame) -> None:
        """Render thread: the frame on the camera's topics, and in the browser view's frustum."""
        self.topics[name].publish(frame)
        if self.viewer is not None:
            self.viewer.publish_camera(name, frame.world_T_optical, frame.color)

    # ------------------------------------------------------------------------ render thread

    def _render_error(self, name: str, t: float, exc: Exception) -> None:
        self.log.error(f"camera {name!r} at t = {t:.6f} s: {exc!r}", throttle_duration_sec=5.0)

    def _publish_labels(self, rig) -> None:
        for topics in self.topics.values():
            topics.publish_label_map(rig.label_map())

    def _publish_static(self, t: float) -> None:
        if TFMessage is None:
            return
        node = self.node
        msgs = []
        for spec in self.specs:
            parent = spec.parent
            parent_frame = node.world if parent == "world" else node.link_prefixes.get(parent, node.prefix) + parent
            msgs += camera_static_transforms(spec, parent_frame, node.prefix, t)
        if not msgs:            # every camera frame is the URDF's: the node's robot TF has them
            return
        self._tf_static = node.create_publisher(TFMessage, "/tf_static", LATCHED)
        self._tf_static.publish(TFMessage(transforms=msgs))

    def diagnostic_status(self, node_name: str) -> DiagnosticStatus:
        """``<node_name>: cameras``: OK while they render, WARN rendering again after their process ended (why),
        ERROR while no process renders them (why, and whether it is being restarted); values: the process id,
        its restarts and failures, per camera the states rendered, dropped, skipped and failed."""
        status = DiagnosticStatus(name=f"{node_name}: cameras", hardware_id=", ".join(s.name for s in self.specs))
        values = []
        if self.process is None:
            level, message = 0, "rendering in a thread of the node (it records)"
        else:
            p = self.process
            level, message = p.status()
            values += [KeyValue(key="process_id", value=str(p.pid)), KeyValue(key="restarts", value=str(p.restarts)),
                       KeyValue(key="max_restarts", value=str(p.max_restarts)),
                       KeyValue(key="failures", value=str(p.failures)), KeyValue(key="last_failure", value=p.failure),
                       KeyValue(key="sync", value=str(p.sync).lower()),
                       KeyValue(key="sync_waits", value=str(p.waits)),
                       KeyValue(key="sync_wait_s", value=f"{p.wait_s:.3f}"),
                       KeyValue(key="sync_timeouts", value=str(p.timeouts))]
            for spec in self.specs:
                values += [KeyValue(key=f"{spec.name}_{k}", value=str(n)) for k, n in p.counts(spec.name).items()]
        status.level, status.message, status.values = bytes([level]), message, values
        return status

    def close(self, timeout: float = 2.0) -> None:
        if self.process is not None:
            self.process.close(timeout)
        else:
            self.renderer.close(timeout)
