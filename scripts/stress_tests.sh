#!/usr/bin/env bash
# stress_tests.sh [--dir DIR] [N=20] [TEST_PATH...]
# Runs the tests that talk to simulated servo buses, launch nodes or run MuJoCo (default: tests/hardware tests/twin
# tests/twin_ros tests/ros) N times in a row while two busy processes load the CPUs, then prints, per test file, in
# how many of the N runs it had a failure, the failing tests, and the total. Exit status 1 if any run failed: a test
# that fails only sometimes is a bug. Not part of the default test run (one run of the default paths takes ~20 min).
# Uses the repository's .venv and puts the repository first on PYTHONPATH; each run's log, JUnit report and pytest
# temp folder (the tests' own logs) stay in a folder under $TMPDIR (printed), or in DIR. On Ctrl-C or SIGTERM the
# run under way ends as pytest does after Ctrl-C (its tests reap their children), and the load stops.
# --dir DIR resumes: the runs already finished there count, one cut short is run again, and the check goes on until
# DIR holds N finished runs. DIR belongs to one commit and one set of test paths (both recorded there); another
# commit, uncommitted changes or other paths are refused, so N runs in DIR are N runs of one version of the code.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
py=$root/.venv/bin/python
usage="usage: $0 [--dir DIR] [N=20] [TEST_PATH...]"
[ -x "$py" ] || { echo "stress_tests.sh: $py missing (scripts/install.sh creates it)" >&2; exit 2; }
out=
if [ "${1:-}" = --dir ]; then
  [ -n "${2:-}" ] || { echo "stress_tests.sh: --dir needs a folder; $usage" >&2; exit 2; }
  out=$2
  shift 2
fi
n=${1:-20}
[ $# -gt 0 ] && shift
case $n in ''|*[!0-9]*|0) echo "stress_tests.sh: N must be a whole number of runs >= 1, got '$n'; $usage" >&2; exit 2;; esac
paths=("$@")
[ ${#paths[@]} -gt 0 ] || paths=(tests/hardware tests/twin tests/twin_ros tests/ros)
cd "$root" || exit 2
for p in "${paths[@]}"; do
  [ -e "$p" ] || { echo "stress_tests.sh: no test path '$p' in $root; $usage" >&2; exit 2; }
done
export PYTHONPATH=$root:$root/ros2_ws/src/sgvla_ros${PYTHONPATH:+:$PYTHONPATH}
if [ -z "$out" ]; then
  out=$(mktemp -d -t sgvla_stress.XXXXXX)
else
  # What is under test: the commit (tracked files as committed) and the test paths.
  commit=$(git rev-parse HEAD 2>/dev/null) || { echo "stress_tests.sh: --dir needs a git checkout" >&2; exit 2; }
  [ -z "$(git status --porcelain --untracked-files=no)" ] || {
    echo "stress_tests.sh: --dir: $root has uncommitted changes; runs in DIR must all test one commit" >&2; exit 2; }
  identity="commit $commit; paths ${paths[*]}"
  mkdir -p "$out" || exit 2
  out=$(cd "$out" && pwd)
  if [ -e "$out/identity" ]; then
    [ "$(cat "$out/identity")" = "$identity" ] || {
      echo "stress_tests.sh: $out holds runs of $(cat "$out/identity"), not of $identity; use another folder" >&2
      exit 2; }
  elif [ -n "$(ls -A "$out")" ]; then
    echo "stress_tests.sh: $out is not empty and holds no stress runs; use a new or empty folder" >&2; exit 2
  else
    echo "$identity" >"$out/identity"
  fi
fi

load=()
stop_load() {
  for pid in "${load[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${load[@]}"; do wait "$pid" 2>/dev/null; done
  load=()
}
run=  # the pytest of the run under way
STOP_GRACE_S=60
interrupted() {
  # pytest takes SIGTERM as Ctrl-C (tests/children.py): its tests reap their children, then it ends. A test that
  # takes the signal itself would keep it going (a launcher run in pytest's process once did: the test failed and
  # the next ones ran), so pytest gets SIGKILL after STOP_GRACE_S; its children die with it (PR_SET_PDEATHSIG).
  echo "stress_tests.sh: interrupted" >&2
  if [ -n "$run" ] && kill -TERM "$run" 2>/dev/null; then
    ( sleep "$STOP_GRACE_S"; kill -KILL "$run" 2>/dev/null ) &
    local killer=$!
    wait "$run"
    kill "$killer" 2>/dev/null
  fi
  exit 130
}
trap stop_load EXIT
trap interrupted INT TERM
for _ in 1 2; do
  ( trap - INT TERM; while :; do :; done ) &
  load+=($!)
done

before=$(ls "$out" | grep -c '^run[0-9]*\.rc$')
echo "stress: ${paths[*]}, $n run(s) ($before done before), 2 busy processes (pids ${load[*]}), logs in $out"
for i in $(seq "$n"); do
  [ -e "$out/run$i.rc" ] && continue  # finished in an earlier invocation (--dir)
  rm -rf "$out/run$i.log" "$out/run$i.xml" "$out/tmp$i"  # cut short before: run again
  start=$SECONDS
  "$py" -m pytest -q -p no:cacheprovider --basetemp="$out/tmp$i" --junitxml="$out/run$i.xml" "${paths[@]}" \
    >"$out/run$i.log" 2>&1 &  # in the background: a signal to this script is handled at once, not after the run
  run=$!
  wait "$run"
  rc=$?
  run=
  echo "$rc" >"$out/run$i.rc"
  echo "run $i/$n: exit $rc in $((SECONDS - start)) s: $(tail -n 1 "$out/run$i.log")"
done
stop_load

"$py" - "$out" "$n" <<'EOF'
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

out, n = Path(sys.argv[1]), int(sys.argv[2])
files, tests, failed_runs = Counter(), Counter(), 0
seen = set()
for i in range(1, n + 1):
    report = out / f"run{i}.xml"
    if not report.exists():
        failed_runs += 1
        print(f"run {i}: no report (see {out}/run{i}.log)")
        continue
    bad = set()
    for case in ET.parse(report).iter("testcase"):
        path = case.get("classname", "").replace(".", "/")
        while path and not Path(path + ".py").exists():  # drop class names: tests/x/test_y/TestZ
            path = path.rpartition("/")[0]
        name = f"{path}.py" if path else case.get("classname", "?")
        seen.add(name)
        if case.find("failure") is not None or case.find("error") is not None:
            bad.add(name)
            tests[f"{name}::{case.get('name')}"] += 1
    root = ET.parse(report).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    rc = int((out / f"run{i}.rc").read_text())
    if bad or rc != 0 or (suite is not None and int(suite.get("errors", 0)) + int(suite.get("failures", 0))):
        failed_runs += 1
    files.update(bad)
width = max([len(f) for f in seen] + [10])
print(f"\n{'test file':<{width}}  failed runs")
for name in sorted(seen):
    print(f"{name:<{width}}  {files[name]}/{n}")
for name, count in sorted(tests.items()):
    print(f"  failed {count}/{n}: {name}")
print(f"total: {failed_runs} of {n} run(s) failed, {sum(tests.values())} test failure(s)")
sys.exit(1 if failed_runs else 0)
EOF
