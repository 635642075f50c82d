{{/* Names and labels. */}}
{{- define "rods.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "rods.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: (dict "ctx" $ "component" "worker") */}}
{{- define "rods.selector" -}}
app.kubernetes.io/name: {{ .ctx.Chart.Name }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "rods.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "rods.executorUrl" -}}
{{- if .Values.executor.enabled -}}
{{- printf "%s://%s-executor:%d" (ternary "https" "http" (ne .Values.executor.tls.secret "")) (include "rods.fullname" .) (int .Values.executor.port) -}}
{{- else -}}
{{- required "executor.url is required when executor.enabled is false" .Values.executor.url -}}
{{- end -}}
{{- end -}}

{{/*
The environment of every rods container: endpoints as values, secrets as paths of mounted files.
(dict "ctx" $ "owner" true) is the migrations' environment: the owner role's URL and password,
and of DATABASE_URL only its user name (the role the migrations grant to), not its password.
*/}}
{{- define "rods.env" -}}
{{- $v := .ctx.Values -}}
- name: DATABASE_URL
  value: {{ required "database.url is required" $v.database.url | quote }}
{{- if and $v.database.passwordSecret.name (not .owner) }}
- name: DATABASE_PASSWORD_FILE
  value: /etc/rods/secrets/db-app-password
{{- end }}
{{- if .owner }}
- name: RODS_MIGRATE_DATABASE_URL
  value: {{ required "database.migrate.url is required" $v.database.migrate.url | quote }}
{{- if $v.database.migrate.passwordSecret.name }}
- name: RODS_MIGRATE_DATABASE_PASSWORD_FILE
  value: /etc/rods/secrets/db-owner-password
{{- end }}
{{- end }}
- name: KAFKA_BROKERS
  value: {{ required "kafka.brokers is required" $v.kafka.brokers | quote }}
- name: RODS_KAFKA_PARTITIONS
  value: {{ $v.kafka.partitions | quote }}
- name: RODS_KAFKA_REPLICATION
  value: {{ $v.kafka.replication | quote }}
{{- if $v.kafka.clientProperties.secret }}
- name: KAFKA_CLIENT_PROPERTIES
  value: {{ printf "/etc/rods/kafka/%s" $v.kafka.clientProperties.key | quote }}
{{- end }}
- name: TEMPORAL_ADDRESS
  value: {{ required "temporal.address is required" $v.temporal.address | quote }}
- name: TEMPORAL_NAMESPACE
  value: {{ $v.temporal.namespace | quote }}
- name: RODS_TASK_QUEUE
  value: {{ $v.temporal.taskQueue | quote }}
{{- if $v.temporal.tls.enabled }}
- name: TEMPORAL_TLS
  value: "true"
{{- if $v.temporal.tls.secret }}
{{- if $v.temporal.tls.serverCa }}
- name: TEMPORAL_TLS_SERVER_CA_CERT_PATH
  value: /etc/rods/temporal-tls/ca.crt
{{- end }}
{{- if $v.temporal.tls.mutual }}
- name: TEMPORAL_TLS_CLIENT_CERT_PATH
  value: /etc/rods/temporal-tls/tls.crt
- name: TEMPORAL_TLS_CLIENT_KEY_PATH
  value: /etc/rods/temporal-tls/tls.key
{{- end }}
{{- end }}
{{- if $v.temporal.tls.serverName }}
- name: TEMPORAL_TLS_SERVER_NAME
  value: {{ $v.temporal.tls.serverName | quote }}
{{- end }}
{{- end }}
{{- if and $v.temporal.apiKeySecret.name (not .owner) }}
- name: TEMPORAL_API_KEY_FILE
  value: /etc/rods/secrets/temporal-api-key
{{- end }}
- name: RODS_LOG_LEVEL
  value: {{ $v.logLevel | quote }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The Secrets projected into one container's /etc/rods/secrets/, as a YAML list (empty: none):
(dict "ctx" $ "items" (list "db-app" "executor-token" ...)). Only the Secrets named in the values
and asked for here are projected. No subPath: a rotated Secret reaches the files.
*/}}
{{- define "rods.secretSources" -}}
{{- $v := .ctx.Values -}}
{{- $sources := list -}}
{{- $table := dict
  "db-app" (dict "ref" $v.database.passwordSecret "path" "db-app-password")
  "db-owner" (dict "ref" $v.database.migrate.passwordSecret "path" "db-owner-password")
  "executor-token" (dict "ref" $v.executor.tokenSecret "path" "executor-token")
  "gateway-tokens" (dict "ref" $v.gateway.tokensSecret "path" "gateway-tokens")
  "generator-endpoints" (dict "ref" $v.generator.endpointsSecret "path" "generator-endpoints.json")
  "audit-hmac" (dict "ref" $v.audit.hmacKeySecret "path" "audit-hmac-key")
  "temporal-api-key" (dict "ref" $v.temporal.apiKeySecret "path" "temporal-api-key")
-}}
{{- range .items -}}
{{- $e := get $table . -}}
{{- if not $e -}}{{- fail (printf "rods.secretSources: unknown item %s" .) -}}{{- end -}}
{{- if $e.ref.name -}}
{{- $sources = append $sources (dict "secret" (dict "name" $e.ref.name "items" (list (dict "key" $e.ref.key "path" $e.path)))) -}}
{{- end -}}
{{- end -}}
{{- if $sources -}}{{- toYaml $sources -}}{{- end -}}
{{- end -}}

{{/* The projected volume of those Secrets (named .volume, default "secrets"), or nothing. */}}
{{- define "rods.secretsVolume" -}}
{{- $sources := include "rods.secretSources" . -}}
{{- if $sources }}
- name: {{ .volume | default "secrets" }}
  projected:
    defaultMode: 0440
    sources:
{{ $sources | indent 6 }}
{{- end }}
{{- end -}}

{{/* Volumes every rods pod has: its secrets, /tmp (tsx's compile cache), the TLS folders. */}}
{{- define "rods.volumes" -}}
{{- $v := .ctx.Values -}}
{{ include "rods.secretsVolume" . }}
- name: tmp
  emptyDir: {}
{{- if $v.kafka.clientProperties.secret }}
- name: kafka-client
  secret:
    secretName: {{ $v.kafka.clientProperties.secret }}
    defaultMode: 0440
{{- end }}
{{- if and $v.temporal.tls.enabled $v.temporal.tls.secret }}
- name: temporal-tls
  secret:
    secretName: {{ $v.temporal.tls.secret }}
    defaultMode: 0440
{{- end }}
{{- if $v.database.tlsSecret }}
- name: postgres-tls
  secret:
    secretName: {{ $v.database.tlsSecret }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{- define "rods.volumeMounts" -}}
{{- $v := .ctx.Values -}}
{{- if include "rods.secretSources" . }}
- name: {{ .volume | default "secrets" }}
  mountPath: /etc/rods/secrets
  readOnly: true
{{- end }}
- name: tmp
  mountPath: /tmp
{{- if $v.kafka.clientProperties.secret }}
- name: kafka-client
  mountPath: /etc/rods/kafka
  readOnly: true
{{- end }}
{{- if and $v.temporal.tls.enabled $v.temporal.tls.secret }}
- name: temporal-tls
  mountPath: /etc/rods/temporal-tls
  readOnly: true
{{- end }}
{{- if $v.database.tlsSecret }}
- name: postgres-tls
  mountPath: /etc/rods/postgres-tls
  readOnly: true
{{- end }}
{{- end -}}

{{/* Probes of a process whose health endpoints are on its loopback metrics server. */}}
{{- define "rods.loopbackProbes" -}}
{{- $p := .Values.probes -}}
{{- $base := printf "http://127.0.0.1:%d" (int .Values.metricsPort) -}}
startupProbe:
  exec:
    command: ["node", "/app/infra/deploy/probe.mjs", {{ printf "%s/healthz" $base | quote }}]
{{ toYaml $p.startup | indent 2 }}
livenessProbe:
  exec:
    command: ["node", "/app/infra/deploy/probe.mjs", {{ printf "%s/healthz" $base | quote }}]
{{ toYaml $p.liveness | indent 2 }}
readinessProbe:
  exec:
    command: ["node", "/app/infra/deploy/probe.mjs", {{ printf "%s/readyz" $base | quote }}]
{{ toYaml $p.readiness | indent 2 }}
{{- end -}}

{{/* Pod-level settings shared by the rods pods. */}}
{{- define "rods.podSpecCommon" -}}
automountServiceAccountToken: false
{{- with .Values.serviceAccountName }}
serviceAccountName: {{ . }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{ toYaml . }}
{{- end }}
securityContext:
{{ toYaml .Values.podSecurityContext | indent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
{{ toYaml . | indent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
{{ toYaml . | indent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
{{ toYaml . | indent 2 }}
{{- end }}
{{- end -}}
