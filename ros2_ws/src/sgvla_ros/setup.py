"""ament_python package installing the sgvla nodes (nodes/), launch files, config, URDF and calibration.

The package directories are symlinks to the repository's top-level folders, so the nodes, launch files and data
that `colcon build` installs are the files `sgvla launch` runs. Console scripts come from the one executables
table, `sgvla/launch/nodes.py`, read by path (this file may run where sgvla is not importable yet).
"""

import os
import runpy
from pathlib import Path

from setuptools import setup

PACKAGE = "sgvla_ros"
HERE = Path(__file__).resolve().parent
TABLE = runpy.run_path(str(HERE.parents[2] / "sgvla" / "launch" / "nodes.py"))
DATA = ("config", "launch", "urdf", "calibration")  # installed under share/sgvla_ros, subfolders kept


def data_files() -> list[tuple[str, list[str]]]:
    """(share/sgvla_ros/<folder>, [files]) for every folder of DATA that holds files, recursively."""
    out = []
    for top in DATA:
        for folder, dirs, files in os.walk(top, followlinks=True):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            keep = sorted(os.path.join(folder, f) for f in files if not f.endswith((".pyc", ".md")))
            if keep:
                out.append((f"share/{PACKAGE}/{folder}", keep))
    return out


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=[PACKAGE],
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        *data_files(),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    description="ROS 2 nodes of sgvla",
    license="Apache-2.0",
    entry_points={"console_scripts": TABLE["console_scripts"]()},
)
