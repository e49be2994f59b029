"""Depth as a sensor measures it, from the renderer's exact optical z.

``ideal``: the exact depth (m) where a surface lies between near and far, 0 elsewhere.

``stereo``: an active-stereo RealSense D4xx-like model (parameters: spec.DepthModelSpec, figures from the D400
datasheet). The depth imager pair has baseline B (m) and focal length f (px: its own, from the depth imagers'
field of view, 87 deg on a D435: 337 px at 640 px width, not the color camera's); a point at depth z has disparity
d = f B / z (px of the depth imager). The matcher's disparity error is Gaussian with standard deviation ``subpixel``
(px), so

    z_measured = f B / (d + N(0, subpixel^2)),   std(z) ~= z^2 * subpixel / (f * B)

(first order in subpixel / d: Intel's RMS error formula, RMS(mm) = z(mm)^2 * subpixel / (focal(px) * B(mm)),
"Tuning depth cameras for best performance"). Then: no depth (0) below min_z or beyond max_z; no depth where the
second imager, B to the right (optical +x), cannot see the point: outside its image (u - d < -0.5) or behind a
nearer surface along the same epipolar row (a pixel u is hidden when some u' > u has u' - d(u') < u - d(u); here
u and d in the rendered image's pixels, d = fx B / z, where the geometry is); the
result quantised to ``depth_unit`` (m), as the 16-bit output is.

Noise is drawn from numpy's PCG64 seeded with (camera seed, the state's step time in ns): the same seed and the
same state give the same image, whatever thread renders it and in whatever order.
"""

from __future__ import annotations

import numpy as np

from .spec import CameraSpec


def frame_rng(seed: int, t: float) -> np.random.Generator:
    """The generator of the image of sim time ``t`` (s) of a camera seeded ``seed``."""
    return np.random.Generator(np.random.PCG64([int(seed), int(round(t * 1e9))]))


def stereo_occlusion(disparity: np.ndarray) -> np.ndarray:
    """(H, W) bool: pixels the second imager (to the right) cannot see. ``disparity`` (px), 0 = no surface."""
    h, w = disparity.shape
    seen = disparity > 0
    # where each point lands in the second image (u - d); no surface: +inf (hides nothing)
    right_u = np.where(seen, np.arange(w, dtype=disparity.dtype) - disparity, np.inf).astype(disparity.dtype)
    # min over u' > u of right_u(u'): reverse cumulative minimum, shifted by one column
    later = np.empty_like(right_u)
    later[:, -1] = np.inf
    np.minimum.accumulate(right_u[:, :0:-1], axis=1, out=later[:, -2::-1])
    hidden = later < right_u - 0.25                   # a nearer surface lands left of it in the second image
    hidden |= right_u < -0.5                          # outside the second image
    hidden &= seen
    return hidden


def measured_depth(spec: CameraSpec, depth: np.ndarray, t: float) -> np.ndarray:
    """The depth image (float32 m, 0 = no depth) that ``spec``'s depth model reports for the exact depth
    ``depth`` (float32 m, 0 = nothing) of the state at sim time ``t``. ``depth`` is not modified."""
    model = spec.depth_model
    if model.kind == "ideal":
        return depth
    fb = np.float32(model.focal(spec) * model.baseline)    # px (of the depth imager) * m
    valid = depth > 0
    disparity = np.divide(fb, depth, out=np.zeros(depth.shape, np.float32), where=valid)
    noisy = frame_rng(spec.seed, t).standard_normal(depth.shape, dtype=np.float32)
    noisy *= np.float32(model.subpixel)
    noisy += disparity
    out = np.divide(fb, noisy, out=np.zeros(depth.shape, np.float32), where=valid & (noisy > 0))
    out[(out < model.min_z) | (out > model.max_z)] = 0.0
    if model.occlusion:
        # the shadow in the rendered image's pixels: its disparity is fx B / z
        disparity *= np.float32(spec.fx / model.focal(spec))
        out[stereo_occlusion(disparity)] = 0.0
    unit = np.float32(model.depth_unit)
    np.rint(out / unit, out=out)
    out *= unit
    return out


def noisy_color(spec: CameraSpec, color: np.ndarray, t: float) -> np.ndarray:
    """``color`` (uint8) with additive Gaussian noise of std ``spec.color_noise`` (8-bit units), clipped."""
    if spec.color_noise <= 0:
        return color
    rng = frame_rng(spec.seed + 1_000_003, t)         # independent of the depth noise
    noisy = color + rng.standard_normal(color.shape) * spec.color_noise
    return np.clip(np.round(noisy), 0, 255).astype(np.uint8)


def depth_mm(depth_m: np.ndarray) -> np.ndarray:
    """16UC1 millimetres of a depth image in metres, as realsense2_camera publishes depth: round(1000 z), 0 = no
    depth (and beyond 65.535 m)."""
    mm = np.rint(depth_m * 1000.0)
    mm[(mm > 65535) | ~(depth_m > 0)] = 0
    return mm.astype(np.uint16)
