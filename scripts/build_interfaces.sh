#!/usr/bin/env bash
# build_interfaces.sh VENV PKG_SRC_DIR BUILD_DIR
#
# Builds a ROS 2 interfaces package (ament_cmake + rosidl) against the ROS 2 Kilted wheels in VENV
# and installs it INTO the venv prefix. Installing into the venv means nothing has to be added to
# PYTHONPATH or LD_LIBRARY_PATH: ros-wheels-bootstrapper already puts VENV/lib on the loader path
# (the rosidl typesupport is dlopen'ed by bare name, so RPATH does not help) and the Python module
# lands in site-packages. On a ROS 2 machine use `colcon build` instead.
#
# The wheels' exported CMake files hard-code the include dirs of the machine that built them
# (/opt/python/cpXY-cpXY/include/pythonX.Y and its numpy include dir); CMake rejects imported
# targets whose include dirs do not exist, so they are rewritten to this venv's dirs (idempotent).
set -Eeuo pipefail
die() { echo "build_interfaces.sh: ERROR: $*" >&2; exit 1; }
[ $# -eq 3 ] || die "usage: $0 VENV PKG_SRC_DIR BUILD_DIR"
VENV=$(cd "$1" && pwd -P) || die "venv '$1' not found"
SRC=$(cd "$2" && pwd -P) || die "package dir '$2' not found"
BUILD=$3
PY=$VENV/bin/python
[ -d "$VENV/share/rosidl_default_generators" ] || die "ROS wheels missing in $VENV (pip install -r requirements.txt)"
CMAKE=$(command -v cmake) || die "cmake not found (apt-get install cmake)"

read -r PY_INC NP_INC < <("$PY" -c 'import sysconfig, numpy; print(sysconfig.get_paths()["include"], numpy.get_include())')
[ -f "$PY_INC/Python.h" ] || die "Python.h not in $PY_INC"

PYINC_RE='/opt/python/cp[0-9]+-cp[0-9]+[a-z]*/include/python[0-9]+\.[0-9]+[a-z]*'
NPINC_RE='/[^";[:space:]]*/numpy/(_core/|core/)?include'
mapfile -t files < <(grep -lE "$NPINC_RE|$PYINC_RE" "$VENV"/share/*/cmake/*.cmake || true)
for f in "${files[@]}"; do
  if grep -ohE "$NPINC_RE|$PYINC_RE" "$f" | grep -vxF -e "$PY_INC" -e "$NP_INC" >/dev/null; then
    sed -i -E -e "s#$NPINC_RE#$NP_INC#g" -e "s#$PYINC_RE#$PY_INC#g" "$f"
  fi
done
! grep -lE '/opt/python/cp[0-9]' "$VENV"/share/*/cmake/*.cmake || die "foreign /opt/python paths remain in the wheels' CMake files"

mkdir -p "$BUILD"
GEN="Unix Makefiles"; command -v ninja >/dev/null && GEN=Ninja
export AMENT_PREFIX_PATH="$VENV" CMAKE_PREFIX_PATH="$VENV" PATH="$VENV/bin:$PATH"
"$CMAKE" -S "$SRC" -B "$BUILD" -G "$GEN" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
  -DCMAKE_INSTALL_PREFIX="$VENV" -DPython3_EXECUTABLE="$PY" -DPython3_FIND_VIRTUALENV=ONLY \
  -DPython3_NumPy_INCLUDE_DIR="$NP_INC" >"$BUILD.log" 2>&1 || { tail -40 "$BUILD.log"; die "cmake configure failed (log: $BUILD.log)"; }
"$CMAKE" --build "$BUILD" -j "$(nproc)" >>"$BUILD.log" 2>&1 || { tail -40 "$BUILD.log"; die "build failed (log: $BUILD.log)"; }
"$CMAKE" --install "$BUILD" >>"$BUILD.log" 2>&1 || die "install failed (log: $BUILD.log)"
PKG=$(basename "$SRC")
[ -f "$VENV/lib/python3.12/site-packages/$PKG/__init__.py" ] || die "no Python package $PKG installed"
echo "build_interfaces.sh: $PKG installed into $VENV"
