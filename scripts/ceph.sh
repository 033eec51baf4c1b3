#!/usr/bin/env bash
# A throwaway single-node Ceph cluster with the RADOS Gateway (S3 API), for tests
# and for trying svcfs on a real distributed object store.
#
#   scripts/ceph.sh start DIR [--port 7480] [--access-key AK --secret SK] [--bucket NAME ...]
#   scripts/ceph.sh stop DIR
#
# One monitor (msgr v1 on 127.0.0.1), one memstore OSD (data in memory: nothing
# is kept), radosgw on 127.0.0.1:PORT, cephx off inside, and an S3 user with the
# given keys. Needs Debian's ceph-mon ceph-osd radosgw ceph-common. On success it
# prints `rgw ready on http://127.0.0.1:PORT`; everything lives in DIR (config,
# logs, pid files), and `stop` kills what `start` started.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR [--port P] [--access-key AK --secret SK] [--bucket B]..." >&2; exit 2; }
shift 2

stop() {
  local d=$1 pid
  for f in "$d"/run/*.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null || true)
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  # wait for them to go, then make sure
  for _ in $(seq 50); do
    alive=0
    for f in "$d"/run/*.pid; do
      [ -e "$f" ] || continue
      pid=$(cat "$f" 2>/dev/null || true)
      [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && alive=1
    done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for f in "$d"/run/*.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null || true)
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
    rm -f "$f"
  done
}

if [ "$cmd" = stop ]; then
  [ -d "$dir" ] && stop "$dir"
  exit 0
fi
[ "$cmd" = start ] || { echo "unknown command $cmd" >&2; exit 2; }

port=7480
ak=${SVC_ACCESS_KEY_ID:-CEPHTESTACCESSKEY001}
sk=${SVC_SECRET_ACCESS_KEY:-$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')}
buckets=()
while [ $# -gt 0 ]; do
  case $1 in
    --port) port=$2; shift 2 ;;
    --access-key) ak=$2; shift 2 ;;
    --secret) sk=$2; shift 2 ;;
    --bucket) buckets+=("$2"); shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
for b in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph; do
  command -v "$b" >/dev/null || { echo "ceph.sh: $b is missing (apt-get install ceph-mon ceph-osd radosgw ceph-common)" >&2; exit 1; }
done

# a free port for the monitor
monport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dir=$(mkdir -p "$dir" && cd "$dir" && pwd)
stop "$dir"
rm -rf "$dir"/{mon,osd,run,log,ceph.conf,monmap,keyring}
mkdir -p "$dir"/{mon,osd/ceph-0,run,log}
fsid=$(python3 -c 'import uuid; print(uuid.uuid4())')
conf=$dir/ceph.conf
cat >"$conf" <<EOF
[global]
fsid = $fsid
mon host = v1:127.0.0.1:$monport
public addr = 127.0.0.1
ms bind msgr2 = false
auth cluster required = none
auth service required = none
auth client required = none
auth supported = none
keyring = $dir/keyring
run dir = $dir/run
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
log file = $dir/log/\$name.log
mon data = $dir/mon/\$cluster-\$id
osd data = $dir/osd/\$cluster-\$id
osd objectstore = memstore
memstore device bytes = 2147483648
osd class update on start = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
osd max object name len = 460
osd max object namespace len = 64
debug ms = 0
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:$port
rgw thread pool size = 64
rgw dns name = localhost
EOF

log() { echo "ceph.sh: $*" >&2; }
fail() { log "$*"; log "logs are in $dir/log"; stop "$dir"; exit 1; }

monmaptool --create --fsid "$fsid" --addv a "[v1:127.0.0.1:$monport]" "$dir/monmap" >/dev/null
ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/keyring" >"$dir/log/mkfs-mon.out" 2>&1 || fail "ceph-mon --mkfs failed"
ceph-mon -c "$conf" -i a || fail "ceph-mon did not start"

c() { timeout 20 ceph -c "$conf" "$@"; }
for i in $(seq 100); do c mon stat >/dev/null 2>&1 && break; sleep 0.2; [ "$i" = 100 ] && fail "monitor did not answer"; done

# A monitor that has just answered can still refuse the next command (EPERM, "problem getting
# command descriptions", its fsid not yet known to the client): try again.
osd=""
for try in $(seq 10); do
  osd=$(c osd create 2>>"$dir/log/osd-create.err") && break
  osd=""
  sleep 0.5
done
[ -n "$osd" ] || fail "ceph osd create failed ($(tail -n 1 "$dir/log/osd-create.err"))"
ceph-osd -c "$conf" -i "$osd" --mkfs >"$dir/log/mkfs-osd.out" 2>&1 || fail "ceph-osd --mkfs failed"
# Right after the monitor starts it can refuse the OSD's crush update (EPERM): try again.
up=0
for try in 1 2 3 4 5; do
  ceph-osd -c "$conf" -i "$osd" >>"$dir/log/start-osd.out" 2>&1 || { sleep 1; continue; }
  for _ in $(seq 60); do
    if c osd dump 2>/dev/null | grep -q "^osd.$osd up"; then up=1; break; fi
    pid=$(cat "$dir/run/osd.$osd.pid" 2>/dev/null || true)
    [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && break
    sleep 0.25
  done
  [ $up = 1 ] && break
  log "the OSD did not come up (try $try); starting it again"
  pid=$(cat "$dir/run/osd.$osd.pid" 2>/dev/null || true)
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  sleep 1
done
[ $up = 1 ] || fail "the OSD did not come up"

radosgw -c "$conf" -n client.rgw >"$dir/log/start-rgw.out" 2>&1 || fail "radosgw did not start"
for i in $(seq 240); do
  curl -s -o /dev/null "http://127.0.0.1:$port/" && break
  sleep 0.25
  [ "$i" = 240 ] && fail "radosgw did not answer on port $port"
done
radosgw-admin -c "$conf" -n client.admin user create --uid svcfs --display-name "svcfs tests" \
  --access-key "$ak" --secret "$sk" >"$dir/log/user.out" 2>&1 || fail "radosgw-admin user create failed"
for b in "${buckets[@]+"${buckets[@]}"}"; do
  # a bucket from any S3 client: a signed PUT /bucket
  curl -sf -X PUT --aws-sigv4 "aws:amz:us-east-1:s3" --user "$ak:$sk" -o /dev/null \
    -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" "http://127.0.0.1:$port/$b" \
    || fail "could not create bucket $b"
done
echo "rgw ready on http://127.0.0.1:$port"
