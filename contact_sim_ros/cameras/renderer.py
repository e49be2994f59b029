"""One off-screen OpenGL pass per camera: color (RGB8), metric linear depth (float32 m, the optical z of the
surface under each pixel centre) and segmentation labels (uint16) as three color attachments of one framebuffer.

Projection without a GL camera convention: vertices go to the camera's OPTICAL frame (x right, y down, z forward)
and the vertex shader writes clip coordinates from K directly, with pixel centres at integer (u, v) (ROS
CameraInfo / OpenCV):  u = fx x / z + cx  ->  x_ndc = 2 (u + 0.5) / W - 1, and likewise v -> y_ndc, so that the
framebuffer's first row is the image's top row (v = 0) and the read-back needs no flip. GL depth maps z in
[near, far] to [-1, 1] (only for the depth test); the depth attachment stores the interpolated optical z itself
(perspective-correct interpolation of a quantity linear on the triangle: exact at the pixel centre's ray, to
float32 rounding).

Closed meshes (consistently wound, outward) are drawn with back-face culling (half the raster work); open meshes
(some URDF visual meshes, the halfspace square) without. Shading: flat Lambert with a light at the camera.

The GL context belongs to the thread that created the renderer (backend.py): render from that thread only.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from .backend import GLContext, create_context
from .spec import CameraSpec
from .visual_scene import VisualScene

VERTEX_SHADER = """
#version 330
uniform mat4 object_to_optical;   // column-major
uniform vec4 proj;                // (2 fx / W, 2 (cx + 0.5) / W - 1, 2 fy / H, 2 (cy + 0.5) / H - 1)
uniform vec2 depth_ab;            // z_clip = a z + b: z = near -> -1, z = far -> +1 after the divide by z
in vec3 in_position;
out vec3 v_position;
void main() {
    vec4 p = object_to_optical * vec4(in_position, 1.0);
    v_position = p.xyz;
    gl_Position = vec4(proj.x * p.x + proj.y * p.z, proj.z * p.y + proj.w * p.z, depth_ab.x * p.z + depth_ab.y, p.z);
}
"""

FRAGMENT_SHADER = """
#version 330
uniform vec3 color;
uniform uint label;
in vec3 v_position;
layout(location = 0) out vec4 out_color;
layout(location = 1) out float out_depth;
layout(location = 2) out uint out_label;
void main() {
    vec3 n = normalize(cross(dFdx(v_position), dFdy(v_position)));
    float lambert = abs(dot(n, normalize(v_position)));
    out_color = vec4(color * (0.3 + 0.7 * lambert), 1.0);
    out_depth = v_position.z;
    out_label = label;
}
"""


class RenderedImages:
    """The arrays of one render (owned by the caller: the renderer writes new arrays each time).

    color (H, W, 3) uint8 RGB; depth (H, W) float32 m, optical z, 0 where nothing lies between near and far;
    labels (H, W) uint16 (0 = nothing; ``VisualScene.labels``)."""

    __slots__ = ("color", "depth", "labels")

    def __init__(self, color, depth, labels):
        self.color, self.depth, self.labels = color, depth, labels


class _Target:
    """A camera's framebuffer: color RGBA8, depth R32F, label R16UI attachments + a depth buffer."""

    def __init__(self, ctx, spec: CameraSpec):
        w, h = spec.width, spec.height
        self.size = (w, h)
        self.color = ctx.renderbuffer((w, h), 4, dtype="f1")
        self.depth = ctx.renderbuffer((w, h), 1, dtype="f4")
        self.label = ctx.renderbuffer((w, h), 1, dtype="u2")
        self.zbuffer = ctx.depth_renderbuffer((w, h))
        self.fbo = ctx.framebuffer([self.color, self.depth, self.label], self.zbuffer)
        n, f = spec.near, spec.far
        self.proj = (2.0 * spec.fx / w, 2.0 * (spec.cx + 0.5) / w - 1.0,
                     2.0 * spec.fy / h, 2.0 * (spec.cy + 0.5) / h - 1.0)
        self.depth_ab = ((f + n) / (f - n), -2.0 * f * n / (f - n))
        self.rgba = np.empty((h, w, 4), np.uint8)      # read-back scratch (RGB is copied out of it)

    def release(self):
        for obj in (self.fbo, self.color, self.depth, self.label, self.zbuffer):
            obj.release()


class Renderer:
    """Renders the ``VisualScene`` of a scene model into cameras. Create it in the thread that renders.

    ``render(spec, world_T_optical, frame_poses)``: ``world_T_optical`` the optical frame's world pose (SE3 or
    (4, 4)); ``frame_poses`` (F, 4, 4) world poses of the model's frames (``frame_poses_of``). ``render_q`` does
    the kinematics from a configuration ``q``."""

    def __init__(self, visual: VisualScene, pin_model: pin.Model, context: GLContext | None = None):
        self.gl = context or create_context()
        ctx = self.gl.ctx
        self.visual = visual
        self.pin_model = pin_model
        self.pin_data = pin.Data(pin_model)
        self.program = ctx.program(vertex_shader=VERTEX_SHADER, fragment_shader=FRAGMENT_SHADER)
        self._u_model = self.program["object_to_optical"]
        self._u_proj = self.program["proj"]
        self._u_depth = self.program["depth_ab"]
        self._u_color = self.program["color"]
        self._u_label = self.program["label"]
        self._draws = []        # (vao, closed, color, label) in mesh order, closed meshes first at draw time
        self._buffers = []
        for mesh in visual.meshes:
            vbo = ctx.buffer(np.ascontiguousarray(mesh.vertices, np.float32).tobytes())
            ibo = ctx.buffer(np.ascontiguousarray(mesh.faces, np.int32).tobytes())
            vao = ctx.vertex_array(self.program, [(vbo, "3f", "in_position")], index_buffer=ibo, index_element_size=4)
            self._buffers += [vbo, ibo]
            self._draws.append((vao, mesh.closed, tuple(mesh.color[:3]), int(mesh.label)))
        self._order = sorted(range(len(self._draws)), key=lambda i: not self._draws[i][1])
        self._frame_ids = np.array([max(m.frame_id, 0) for m in visual.meshes], dtype=int)
        self._static = np.array([m.frame_id < 0 for m in visual.meshes], dtype=bool)
        self._local = (np.stack([m.placement.homogeneous for m in visual.meshes]) if visual.meshes
                       else np.zeros((0, 4, 4)))
        self._targets: dict[str, _Target] = {}

    # -------------------------------------------------------------------------- kinematics

    def frame_poses(self, q: np.ndarray) -> np.ndarray:
        """(F, 4, 4) world poses of every frame of the model at configuration ``q`` (own Pinocchio Data)."""
        pm, data = self.pin_model, self.pin_data
        pin.framesForwardKinematics(pm, data, q)
        return np.stack([M.homogeneous for M in data.oMf])

    def camera_pose(self, spec: CameraSpec, frame_poses: np.ndarray) -> np.ndarray:
        """(4, 4) world pose of ``spec``'s optical frame given the model's frame poses."""
        parent = np.eye(4) if spec.parent == "world" else frame_poses[self._parent_frame(spec)]
        return parent @ spec.optical_pose.homogeneous

    def _parent_frame(self, spec: CameraSpec) -> int:
        pm = self.pin_model
        for body in getattr(self, "_free_bodies", ()):
            if body.name == spec.parent:
                return pm.getFrameId(body.frame_name, pin.FrameType.BODY)
        return pm.getFrameId(spec.parent, pin.FrameType.BODY)

    def set_free_bodies(self, free_bodies) -> None:
        """The model's free bodies (an object named as a camera's parent is its body frame)."""
        self._free_bodies = tuple(free_bodies)

    # -------------------------------------------------------------------------- rendering

    def render_q(self, spec: CameraSpec, q: np.ndarray) -> tuple[RenderedImages, np.ndarray]:
        """Render ``spec`` at configuration ``q``: (images, (4, 4) world pose of its optical frame)."""
        poses = self.frame_poses(q)
        T = self.camera_pose(spec, poses)
        return self.render(spec, T, poses), T

    def render(self, spec: CameraSpec, world_T_optical, frame_poses: np.ndarray) -> RenderedImages:
        self.gl.check_thread()
        T = world_T_optical.homogeneous if isinstance(world_T_optical, pin.SE3) else np.asarray(world_T_optical)
        target = self._targets.get(spec.name)
        if target is None or target.size != (spec.width, spec.height):
            target = self._targets[spec.name] = _Target(self.gl.ctx, spec)
        ctx = self.gl.ctx
        # object -> optical for every mesh, in one batch: inv(T) @ frame pose @ local placement
        optical_T_world = np.linalg.inv(T)
        world = frame_poses[self._frame_ids] @ self._local
        world[self._static] = self._local[self._static]
        mats = (optical_T_world @ world).astype(np.float32)
        target.fbo.use()
        ctx.viewport = (0, 0, spec.width, spec.height)
        target.fbo.clear(0.0, 0.0, 0.0, 0.0, depth=1.0)
        ctx.enable(ctx.DEPTH_TEST)
        # the optical frame is right-handed with y down; mapped to NDC without a mirror, so outward faces that are
        # counter-clockwise seen from outside stay counter-clockwise on screen... with y flipped to rows: clockwise
        ctx.front_face = "cw"
        self._u_proj.value = target.proj
        self._u_depth.value = target.depth_ab
        culling = None
        for i in self._order:
            vao, closed, color, label = self._draws[i]
            if closed != culling:
                (ctx.enable if closed else ctx.disable)(ctx.CULL_FACE)
                culling = closed
            self._u_model.write(mats[i].T.tobytes())       # column-major
            self._u_color.value = color
            self._u_label.value = label
            vao.render()
        ctx.disable(ctx.CULL_FACE)
        self.gl.finish()            # waits with the GIL released (llvmpipe rasterises here)
        w, h = spec.width, spec.height
        target.fbo.read_into(target.rgba, components=4, attachment=0, dtype="f1")
        depth = np.empty((h, w), np.float32)
        target.fbo.read_into(depth, components=1, attachment=1, dtype="f4")
        labels = np.empty((h, w), np.uint16)
        target.fbo.read_into(labels, components=1, attachment=2, dtype="u2")
        color = np.ascontiguousarray(target.rgba[:, :, :3])
        depth[labels == 0] = 0.0
        return RenderedImages(color, depth, labels)

    def release(self):
        for t in self._targets.values():
            t.release()
        for vao, *_ in self._draws:
            vao.release()
        for b in self._buffers:
            b.release()
        self.program.release()
        self._targets.clear()
