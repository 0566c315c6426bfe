#!/usr/bin/env bash
# check_loopback.sh CMD [ARGS...]
# Runs CMD in a fresh network namespace that has only `lo`, captures every packet with tcpdump,
# and fails (exit 3) if any packet has a source or destination outside 127.0.0.0/8.
# Needs root, unshare (util-linux), ip (iproute2) and tcpdump.
set -u
[ $# -gt 0 ] || { echo "usage: $0 CMD [ARGS...]" >&2; exit 2; }
for tool in tcpdump unshare ip; do
  command -v "$tool" >/dev/null || { echo "check_loopback.sh: $tool missing (scripts/install.sh installs it)" >&2; exit 2; }
done
cap=$(mktemp --suffix=.pcap)
exec unshare --net bash -c '
  cap=$1; shift
  ip link set lo up; ip link set lo multicast on
  tcpdump -i any -nn -U -w "$cap" >/dev/null 2>&1 & td=$!
  for _ in $(seq 50); do [ -s "$cap" ] && break; sleep 0.1; done; sleep 1
  "$@"; rc=$?
  sleep 0.5; kill $td; wait $td 2>/dev/null
  total=$(tcpdump -nn -r "$cap" 2>/dev/null | wc -l)
  bad=$(tcpdump -nn -r "$cap" "not (src net 127.0.0.0/8 and dst net 127.0.0.0/8)" 2>/dev/null | wc -l)
  echo "loopback check: command exit $rc, $total packets, $bad not on 127/8"
  rm -f "$cap"
  [ "$bad" -eq 0 ] || exit 3
  exit $rc
' _ "$cap" "$@"
