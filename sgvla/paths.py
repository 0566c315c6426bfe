"""Where sgvla's data folders are: the installed ROS package's share directory, else the source checkout.

`colcon build` (or any install of ``ros2_ws/src/sgvla_ros``) puts ``config/``, ``urdf/``, ``calibration/`` and
``launch/`` under ``<prefix>/share/sgvla_ros``; a node started from anywhere finds them through the ament
index (``AMENT_PREFIX_PATH``, as ``ament_index_python.get_package_share_directory`` reads it; read here
directly so the library needs no ROS package). Without an installed package (``pip install -e .``, the
tests, ``sgvla`` from a clone) the folders are the checkout's own.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = "sgvla_ros"
REPO_ROOT = Path(__file__).resolve().parents[1]  # the source checkout (for an editable install)


def package_share(package: str) -> Path | None:
    """``<prefix>/share/<package>`` of the first ament prefix that indexes ``package``, or None."""
    for prefix in filter(None, os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)):
        if (Path(prefix) / "share" / "ament_index" / "resource_index" / "packages" / package).is_file():
            return Path(prefix) / "share" / package
    return None


def data_root() -> Path:
    """The installed package's share directory when it holds the config, else the source checkout."""
    share = package_share(PACKAGE)
    return share if share is not None and (share / "config").is_dir() else REPO_ROOT


DATA_ROOT = data_root()
CONFIG_DIR = DATA_ROOT / "config"
URDF_DIR = DATA_ROOT / "urdf"
CALIBRATION_DIR = DATA_ROOT / "calibration"


def interface_dir() -> Path:
    """The ``.msg``/``.srv``/``.action`` definitions of sgvla_interfaces (installed share, else the checkout)."""
    share = package_share("sgvla_interfaces")
    return share if share is not None and (share / "msg").is_dir() else REPO_ROOT / "ros2_ws/src/sgvla_interfaces"


def resolve_data_path(path: str | Path) -> Path:
    """A path as given if it exists (or is absolute), else relative to the data root: `config/eval/x.yaml` names
    the same file from any working directory, in a checkout or an installed package."""
    p = Path(path).expanduser()
    return p if p.is_absolute() or p.exists() else DATA_ROOT / p
