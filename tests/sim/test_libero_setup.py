"""Offline LIBERO setup: config written without questions, assets resolved locally, recorded paths moved."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sgvla.libero import setup as libero_setup

pytestmark = pytest.mark.sim


@pytest.mark.integration
def test_first_import_writes_config_and_asks_nothing(tmp_path):
    code = (
        "import json; from sgvla.libero.setup import prepare_libero; s = prepare_libero();"
        "import libero.libero as L; from libero.libero import get_libero_path;"
        "print(json.dumps({'created': s.config_created, 'kind': s.assets.kind, 'assets': L.get_assets_path(),"
        " 'bddl': get_libero_path('bddl_files')}))"
    )
    env = {**os.environ, "LIBERO_CONFIG_PATH": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    info = json.loads(out.stdout.strip().splitlines()[-1])
    config = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert info["created"] and info["kind"] == "pypi"
    assert info["assets"] == config["assets"] == str(libero_setup.pypi_assets())
    assert Path(info["bddl"]).is_dir()


def test_existing_config_is_never_rewritten(tmp_path, monkeypatch):
    monkeypatch.setenv("LIBERO_CONFIG_PATH", str(tmp_path))
    text = "assets: /somewhere/else\nbddl_files: /x\n"
    (tmp_path / "config.yaml").write_text(text)
    path, created = libero_setup.ensure_config()
    assert not created and path.read_text() == text


def test_asset_tree_order(tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    for sub in ("articulated_objects", "stable_scanned_objects", "turbosquid_objects", "stable_hope_objects", "scenes"):
        (mine / sub).mkdir(parents=True)
    assert libero_setup.resolve_assets({"assets": str(mine)}) == libero_setup.AssetSource("config", mine)
    pypi = libero_setup.resolve_assets({"assets": str(tmp_path / "missing")})
    assert pypi.kind == "pypi" and pypi.path == libero_setup.pypi_assets()
    monkeypatch.setattr(libero_setup, "pypi_assets", lambda: None)
    monkeypatch.setattr(libero_setup, "HUB_CACHE", tmp_path / "no_cache")
    assert libero_setup.resolve_assets(None) == libero_setup.AssetSource("hub", None)  # LIBERO downloads as usual


def test_recorded_model_paths_move_to_this_machine():
    import robosuite

    assets = libero_setup.pypi_assets()
    xml = ('<mujoco><asset>'
           '<mesh name="a" file="/home/u/robosuite/robosuite/models/assets/robots/panda/meshes/link0.stl"/>'
           '<mesh name="b" file="/data/LIBERO/libero/libero/assets/stable_scanned_objects/plate/plate.obj"/>'
           '</asset></mujoco>')
    out = libero_setup.localize_model_xml(xml, assets)
    assert f'{Path(robosuite.__file__).parent}/models/assets/robots/panda/meshes/link0.stl' in out
    assert f'{assets}/stable_scanned_objects/plate/plate.obj' in out
