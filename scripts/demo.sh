#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run `svcfs demo` in the current directory.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bash "$here/scripts/setup.sh"
exec node "$here/bin/svcfs.js" demo "$@"
