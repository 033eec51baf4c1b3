#!/usr/bin/env bash
# Install everything svcfs needs on Debian/Ubuntu: FUSE (fusermount, libfuse2),
# the tools the tests drive (attr, rsync, curl), the npm dependencies, and the
# compiled JavaScript. Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
for pkg in fuse libfuse2 attr rsync curl; do
  # (a removed package can linger with its config files: ask for "installed" exactly)
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "svcfs setup: installing Debian packages: ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
[ -e /dev/fuse ] || echo "svcfs setup: warning: /dev/fuse is missing; mounting will not work here" >&2

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "svcfs setup: installing npm dependencies" >&2
  npm ci --no-audit --no-fund --loglevel=error
fi
echo "svcfs setup: compiling" >&2
npx --no-install tsc -p tsconfig.json
node scripts/manpage.js
# Put the commands where they are looked for: svcfs on the PATH, mount.svcfs for mount(8), svcfs(1) for man.
links="--bin /usr/local/bin --man /usr/local/share/man/man1"
if [ "$(id -u)" = 0 ] || command -v sudo >/dev/null; then
  $SUDO node bin/svcfs.js install-helper $links >&2 || echo "svcfs setup: could not link the commands (see above)" >&2
else
  echo "svcfs setup: not root: run 'sudo bin/svcfs.js install-helper $links' to put svcfs on the PATH" >&2
fi
