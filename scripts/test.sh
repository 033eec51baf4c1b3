#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run every test with tap; the last line is
# `N passed, N failed` (assertions).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || { echo "0 passed, 1 failed"; exit 1; }
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
