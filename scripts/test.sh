#!/usr/bin/env bash
# Set up (scripts/setup.sh), install what the tests drive besides svcfs (Ceph's
# RADOS Gateway, rclone, s3fs, boto3; the tools to build pjdfstest; LibreOffice
# and GLib's gio; libfaketime, to run a process with its clock off), boot a
# throwaway Ceph cluster for the mount suites' second
# backend, then run every test with tap. The last line is `N passed, N failed`
# (assertions).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || { echo "0 passed, 1 failed"; exit 1; }

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
updated=""
# install_missing [--recommends] PKG...: what is not installed yet, in one apt-get
install_missing() {
  local recommends="--no-install-recommends"
  if [ "$1" = --recommends ]; then recommends=""; shift; fi
  local missing=()
  for pkg in "$@"; do installed "$pkg" || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "svcfs test: installing Debian packages: ${missing[*]}" >&2
  [ -n "$updated" ] || { $SUDO apt-get update -qq; updated=1; }
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $recommends "${missing[@]}" >/dev/null
}
install_missing ceph-mon ceph-osd radosgw ceph-common rclone s3fs python3-boto3 autoconf automake gcc make libglib2.0-bin strace faketime \
  || { echo "0 passed, 1 failed"; exit 1; }
# LibreOffice as a desktop user has it (with its recommended fonts and the UNO bridge for Python)
install_missing --recommends libreoffice-writer-nogui python3-uno || { echo "0 passed, 1 failed"; exit 1; }

# One Ceph cluster (RGW) for the whole run; each test makes its own bucket.
ceph_dir=$(mktemp -d /tmp/svcfs-ceph-XXXXXX)
stop_ceph() { bash scripts/ceph.sh stop "$ceph_dir" >/dev/null 2>&1; rm -rf "$ceph_dir"; }
trap stop_ceph EXIT
export SVCFS_TEST_RGW_KEY=RGWTESTKEY0000000001
export SVCFS_TEST_RGW_SECRET=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
rgw_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
if out=$(bash scripts/ceph.sh start "$ceph_dir" --port "$rgw_port" --access-key "$SVCFS_TEST_RGW_KEY" --secret "$SVCFS_TEST_RGW_SECRET"); then
  echo "svcfs test: $out" >&2
  export SVCFS_TEST_RGW="http://127.0.0.1:$rgw_port"
else
  echo "svcfs test: the Ceph cluster did not start (logs: $ceph_dir/log); the RGW suites will fail" >&2
  tail -n 20 "$ceph_dir"/log/*.log >&2 2>/dev/null
  export SVCFS_TEST_RGW="http://127.0.0.1:$rgw_port"
fi

log=$(mktemp)
npx --no-install tap "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
summary=$(grep -E '^# \{ total: [0-9]+' "$log" | tail -n 1)
rm -f "$log"
pass=$(sed -nE 's/.*pass: ([0-9]+).*/\1/p' <<<"$summary")
fail=$(sed -nE 's/.*fail: ([0-9]+).*/\1/p' <<<"$summary")
pass=${pass:-0}
fail=${fail:-0}
if [ "$status" != 0 ] && [ "$fail" = 0 ]; then fail=1; fi
echo "$pass passed, $fail failed"
exit "$status"
