#!/usr/bin/env bash
# `npm run demo`, the README's main job. On a fresh machine it installs what is missing, starts
# the real stack, proves each service with a round trip, then runs the demo campaign (30 steps
# over the 400 BFCL seeds, stand-in generator, simulated trainer) and writes its report under
# reports/. The stack stays up afterwards (stop it with `npm run stack:down`); with --keep, the
# gateway and its dashboard too.
set -euo pipefail
cd "$(dirname "$0")/.."
# The demo reports how long setup took and when its first step closed, counted from here.
RODS_DEMO_STARTED_AT_MS=${RODS_DEMO_STARTED_AT_MS:-$(date +%s%3N)}
export RODS_DEMO_STARTED_AT_MS
bash infra/bootstrap.sh
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
# The dashboard's page (entry/dashboard/dist, not committed), which the demo's gateway serves.
npm run --silent build:dashboard
npx tsx infra/stack/cli.ts up
# No generator probe: the demo starts its own stand-in generator after this.
npx rods doctor --skip-generator
node bin/rods-dev.mjs demo "$@"
