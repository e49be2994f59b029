"""contact_sim_ros: an ament_python ROS 2 package that is also a plain pip-installable Python package.

Works under `colcon build` (ament_python: share/ files from data_files, executables in lib/contact_sim_ros via
setup.cfg) and `pip install -e .` (console scripts in the venv's bin/; run-time data is read from the source
tree through contact_sim_ros.resources.share_dir()).
"""

import os
from glob import glob

from setuptools import find_packages, setup

PACKAGE_NAME = "contact_sim_ros"
HERE = os.path.dirname(os.path.abspath(__file__))

# Folders installed recursively into share/contact_sim_ros/<folder>/... (they may not exist yet).
SHARE_FOLDERS = ("launch", "config", "urdf", "scenes", "meshes")


def tree_data_files(folder):
    """(share/contact_sim_ros/<dir>, [files]) for every directory below `folder` that holds files."""
    entries = []
    root = os.path.join(HERE, folder)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
        files = sorted(
            os.path.relpath(os.path.join(dirpath, f), HERE)
            for f in filenames
            if not f.startswith(".") and not f.endswith((".pyc", ".pyo"))
        )
        if files:
            rel_dir = os.path.relpath(dirpath, HERE)
            entries.append((os.path.join("share", PACKAGE_NAME, rel_dir), files))
    return entries


# build outputs and editor files: never package data
NOT_PACKAGE_DATA = (".py", ".pyc", ".pyo", ".so", ".o")


def package_data():
    """{package: [file names]}: every file below the package's folders that is not Python source or a build
    output, so that whatever the code reads next to its modules is installed (test/test_packaging.py checks it
    against the source tree)."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(os.path.join(HERE, PACKAGE_NAME)):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
        files = sorted(f for f in filenames if not f.startswith(".") and not f.endswith(NOT_PACKAGE_DATA))
        if files:
            found[os.path.relpath(dirpath, HERE).replace(os.sep, ".")] = files
    return found


data_files = [
    ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE_NAME]),
    ("share/" + PACKAGE_NAME, ["package.xml"]),
]
for _folder in SHARE_FOLDERS:
    data_files += tree_data_files(_folder)

setup(
    name=PACKAGE_NAME,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*", "benchmarks", "benchmarks.*", "msgs", "msgs.*"]),
    data_files=data_files,
    # every file of the package's folders that is not Python: the C++ sources of the compiled modules
    # (geometry/narrow_phase.cpp, sim/rigid_body_dynamics.cpp), which the warm-up (contact-sim compile-kernels)
    # builds and the Simulator reads at start, wherever the package is installed
    package_data=package_data(),
    # Dependencies are pinned in requirements.txt (pip) or declared in package.xml (rosdep); not repeated here
    # so that colcon builds do not try to pip-install ROS packages.
    install_requires=["setuptools"],
    zip_safe=False,
    maintainer="contact_sim_ros developers",
    maintainer_email="dev@contact-sim.invalid",
    description="Contact-rich manipulation simulation (TAMSI, ICF, quasistatic MIQP, LCP) as a ROS 2 node",
    license="BSD-3-Clause",
    python_requires=">=3.10",
    entry_points={
        "console_scripts": [
            "contact-sim = contact_sim_ros.cli:main",
            "sim_node = contact_sim_ros.ros.sim_node_entry:main",
        ],
    },
)
