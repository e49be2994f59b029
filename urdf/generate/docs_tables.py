#!/usr/bin/env python3
"""Print the per-robot joint and link tables of docs/robots.md from the URDFs (paste them into the doc).

    python urdf/generate/docs_tables.py > /tmp/tables.md

test/test_robot_descriptions.py parses the committed tables back and checks them against the URDFs, so a URDF
change that is not reflected in the docs fails the tests.
"""

from __future__ import annotations

import math
from pathlib import Path

from urdf_parser_py.urdf import URDF

URDF_DIR = Path(__file__).resolve().parents[1]
ROBOTS = ["iiwa_wsg", "franka", "allegro", "barrett"]


def fmt(x, angular):
    if x is None:
        return "-"
    if angular:
        return f"{x:.4f} ({math.degrees(x):.1f} deg)"
    return f"{x:.4f}"


def tables(name: str) -> str:
    robot = URDF.from_xml_file(str(URDF_DIR / f"{name}.urdf"))
    out = [f"#### {name}: joints", "",
           "| joint | type | lower | upper | velocity | effort | mimic of (multiplier) |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for j in robot.joints:
        if j.type == "fixed":
            continue
        ang = j.type in ("revolute", "continuous")
        mimic = f"{j.mimic.joint} ({j.mimic.multiplier:g})" if j.mimic is not None else "-"
        out.append(f"| {j.name} | {j.type} | {fmt(j.limit.lower, ang)} | {fmt(j.limit.upper, ang)} | "
                   f"{j.limit.velocity:g} | {j.limit.effort:g} | {mimic} |")
    n_mimic = sum(1 for j in robot.joints if j.type != "fixed" and j.mimic is not None)
    n_dof = sum(1 for j in robot.joints if j.type != "fixed") - n_mimic
    out += ["", f"nq = {n_dof}, nv = {n_dof} (mimic joints are not degrees of freedom). Units: rad, rad/s, N m "
            "for revolute joints; m, m/s, N for prismatic joints.", "",
            f"#### {name}: links", "", "| link | mass (kg) |", "| --- | --- |"]
    total = 0.0
    for link in robot.links:
        if link.inertial is None:
            continue
        total += link.inertial.mass
        out.append(f"| {link.name} | {link.inertial.mass:.4f} |")
    out += [f"| **total** | **{total:.3f}** |", ""]
    frames = [link.name for link in robot.links if link.inertial is None]
    out += [f"Frames (massless links): {', '.join(frames)}.", ""]
    return "\n".join(out)


if __name__ == "__main__":
    for n in ROBOTS:
        print(tables(n))
