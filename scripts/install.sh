#!/usr/bin/env bash
# Install everything sgvla needs into .venv, from the package registries only. Idempotent: each
# step is skipped when its inputs did not change since it last succeeded (stamps in .venv/.sgvla).
set -Eeuo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
VENV=$ROOT/.venv
STAMPS=$VENV/.sgvla
log() { printf '\033[1;34m[install]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[install] ERROR:\033[0m %s\n' "$*" >&2; exit 1; }
stamp_ok() { [ -f "$STAMPS/$1" ] && [ "$(cat "$STAMPS/$1")" = "$2" ]; }
stamp_set() { mkdir -p "$STAMPS"; echo "$2" >"$STAMPS/$1"; }
hash_of() { cat "$@" | sha256sum | cut -c1-16; }

# 1. Debian packages: headless MuJoCo (EGL and OSMesa), ffmpeg for LeRobot video, a toolchain for
#    the ROS interfaces, tcpdump for the loopback check, chromium for the test that opens report.html in a browser.
APT_PKGS=(ffmpeg libegl1 libegl-mesa0 libgl1 libgl1-mesa-dri libosmesa6 libglib2.0-0 cmake g++ ninja-build tcpdump util-linux iproute2 chromium)
missing=()
for p in "${APT_PKGS[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then die "missing Debian packages: ${missing[*]} (run: sudo apt-get install -y ${missing[*]})"; fi
  log "apt-get install ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# 2. Python 3.12 (lerobot 0.6.1 needs it): pyenv's 3.12.1 where present, else python3.12 on PATH.
if [ ! -x "$VENV/bin/python" ]; then
  PY=""
  for c in "${PYENV_ROOT:-$HOME/.pyenv}/versions/3.12.1/bin/python" "$(command -v python3.12 || true)"; do
    [ -n "$c" ] && [ -x "$c" ] && { PY=$c; break; }
  done
  [ -n "$PY" ] || die "Python 3.12 not found (pyenv install 3.12.1, or apt-get install python3.12-venv)"
  log "creating $VENV with $PY"
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -c 'import sys; assert sys.version_info[:2] == (3, 12), sys.version' || die "$VENV is not Python 3.12; remove it and rerun"

# 3. Python packages (pinned in requirements.txt) and sgvla itself, editable.
# sgvla's LeRobot plugins (lerobot_plugins/*): packages whose names LeRobot's commands discover and import.
PLUGINS=(lerobot_robot_so101_twin lerobot_env_sgvla lerobot_policy_sgvla)
editables=(-e "$ROOT" -e "$ROOT/ros2_ws/src/sgvla_ros")
plugin_projects=()
for p in "${PLUGINS[@]}"; do
  editables+=(-e "$ROOT/lerobot_plugins/$p")
  plugin_projects+=("$ROOT/lerobot_plugins/$p/pyproject.toml")
done
key=$(hash_of "$ROOT/requirements.txt" "$ROOT/pyproject.toml" "$ROOT/ros2_ws/src/sgvla_ros/setup.py" "${plugin_projects[@]}")
# uv (from PyPI) installs the same pinned set as pip, downloading in parallel: faster than pip on a fresh machine.
# It does not read pip's configuration, so pip's constraint files and find-links are passed on. Where uv cannot be
# had, pip does the same work.
pip_option() {  # every value of one pip option, from its configuration files and PIP_* variables
  "$VENV/bin/python" -m pip config list 2>/dev/null | sed -n "s/^\(global\|install\|:env:\)\.$1='\(.*\)'\$/\2/p"
}
if ! stamp_ok pip "$key"; then
  log "installing requirements.txt (first time: several GB, mostly torch)"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  if "$VENV/bin/python" -m pip install -q uv; then
    uv_args=()
    for c in $(pip_option constraint | sort -u); do [ -f "$c" ] && uv_args+=(--constraint "$c"); done
    for f in $(pip_option find-links | sort -u); do [ -e "$f" ] && uv_args+=(--find-links "$f"); done
    # --compile-bytecode: pip writes every module's .pyc at install, uv does not by default; without them each new
    # Python process (a node, a worker, a CLI call) compiles torch and LeRobot again where PYTHONDONTWRITEBYTECODE
    # is set, which made the test run several minutes slower.
    uv=("$VENV/bin/uv" pip install --python "$VENV/bin/python" -q --compile-bytecode "${uv_args[@]}")
    "${uv[@]}" -r "$ROOT/requirements.txt"
    "${uv[@]}" --no-deps "${editables[@]}"
  else
    log "uv is not installable here: pip installs requirements.txt"
    "$VENV/bin/python" -m pip install -q -r "$ROOT/requirements.txt"
    "$VENV/bin/python" -m pip install -q --no-deps "${editables[@]}"
  fi
  stamp_set pip "$key"
fi

# 4. ROS 2 interfaces, built with cmake against the wheels and installed into the venv.
key=$(hash_of "$ROOT/scripts/build_interfaces.sh" $(find "$ROOT/ros2_ws/src/sgvla_interfaces" -type f | sort))
if ! stamp_ok interfaces "$key"; then
  log "building ros2_ws/src/sgvla_interfaces"
  "$ROOT/scripts/build_interfaces.sh" "$VENV" "$ROOT/ros2_ws/src/sgvla_interfaces" "$ROOT/ros2_ws/build/sgvla_interfaces"
  stamp_set interfaces "$key"
fi

log "ready: $VENV (sgvla $("$VENV/bin/python" -c 'import sgvla; print(sgvla.__version__)'))"
# The one command form of the docs: the venv's commands on the PATH (README.md, tests/readme/test_readme_rules.py).
log "in each new shell, from $ROOT:"
log "source .venv/bin/activate  (then: sgvla, sgvla doctor, make eval)"
