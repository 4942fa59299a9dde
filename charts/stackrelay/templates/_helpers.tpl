{{/* SPDX-License-Identifier: Apache-2.0 */}}

{{- define "stackrelay.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Resource-name prefix; the longest suffix added to it is "-gateway-headless" (17), so 46 chars. */}}
{{- define "stackrelay.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 46 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 46 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 46 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "stackrelay.gatewayName" -}}
{{- printf "%s-gateway" (include "stackrelay.fullname" .) }}
{{- end }}

{{- define "stackrelay.agentName" -}}
{{- printf "%s-agent" (include "stackrelay.fullname" .) }}
{{- end }}

{{- define "stackrelay.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "stackrelay.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of one component: include with (dict "ctx" $ "component" "gateway"). */}}
{{- define "stackrelay.selectorLabels" -}}
app.kubernetes.io/name: {{ include "stackrelay.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "stackrelay.componentLabels" -}}
{{ include "stackrelay.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "stackrelay.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "stackrelay.gatewayServiceAccount" -}}
{{- if .Values.gateway.serviceAccount.create }}
{{- default (include "stackrelay.gatewayName" .) .Values.gateway.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.gateway.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "stackrelay.agentServiceAccount" -}}
{{- if .Values.agent.serviceAccount.create }}
{{- default (include "stackrelay.agentName" .) .Values.agent.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.agent.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "stackrelay.gatewayKind" -}}
{{- if .Values.gateway.queue.persistence.enabled }}StatefulSet{{ else }}Deployment{{ end }}
{{- end }}

{{/* Host name agents dial and (by default) verify in the gateway certificate. */}}
{{- define "stackrelay.gatewayHost" -}}
{{- printf "%s.%s.svc" (include "stackrelay.gatewayName" .) .Release.Namespace }}
{{- end }}

{{/* Where TLS certificates come from: "existing", "certManager", "generated", or "" when TLS is off. */}}
{{- define "stackrelay.tlsSource" -}}
{{- if .Values.tls.enabled }}
{{- if or .Values.tls.gatewaySecret .Values.tls.agentSecret }}existing
{{- else if .Values.tls.certManager.enabled }}certManager
{{- else }}generated
{{- end }}
{{- end }}
{{- end }}

{{- define "stackrelay.gatewayTLSSecret" -}}
{{- default (printf "%s-gateway-tls" (include "stackrelay.fullname" .)) .Values.tls.gatewaySecret }}
{{- end }}

{{- define "stackrelay.agentTLSSecret" -}}
{{- default (printf "%s-agent-tls" (include "stackrelay.fullname" .)) .Values.tls.agentSecret }}
{{- end }}

{{/* The NetworkPolicy peer allowed to scrape metrics (networkPolicy.metrics), as a one-item list. */}}
{{- define "stackrelay.scrapers" -}}
{{- $m := .Values.networkPolicy.metrics -}}
- namespaceSelector:{{ if $m.namespaceSelector }}{{ toYaml $m.namespaceSelector | nindent 4 }}{{ else }} {}{{ end }}
  podSelector:{{ if $m.podSelector }}{{ toYaml $m.podSelector | nindent 4 }}{{ else }} {}{{ end }}
{{- end }}

{{/* The Secret holding the agents' bearer token, and its key. */}}
{{- define "stackrelay.tokenSecret" -}}
{{- default (printf "%s-agent-token" (include "stackrelay.fullname" .)) .Values.auth.existingSecret }}
{{- end }}

{{- define "stackrelay.tokenKey" -}}
{{- if .Values.auth.existingSecret }}{{ .Values.auth.existingSecretKey }}{{ else }}token{{ end }}
{{- end }}

{{/* Where the token Secret is mounted in agents and gateways (one file, "token"). */}}
{{- define "stackrelay.tokenFile" -}}
/etc/stackrelay/auth/token
{{- end }}

{{/* The Secret volume of the token: include with the context, nindent it under volumes. */}}
{{- define "stackrelay.tokenVolume" -}}
- name: auth
  secret:
    secretName: {{ include "stackrelay.tokenSecret" . }}
    items:
      - key: {{ include "stackrelay.tokenKey" . }}
        path: token
    # 0440: the gateway reads it through its fsGroup.
    defaultMode: 288
{{- end }}

{{/*
A Kubernetes quantity of bytes in MiB, rounded down: "2Gi" -> 2048,
"1500Mi" -> 1500, "2G" -> 1907, "1073741824" -> 1024.
Include with (dict "value" QUANTITY "key" "values.path.for.errors").
*/}}
{{- define "stackrelay.quantityMiB" -}}
{{- $q := toString .value }}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "k" 1000 "K" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 }}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $q }}
{{- $suffix := trimPrefix $num $q }}
{{- if or (not $num) (and $suffix (not (hasKey $units $suffix))) }}
{{- fail (printf "%s: %q is not a quantity like 2Gi or 1500Mi" .key $q) }}
{{- end }}
{{- $mult := 1 }}
{{- if $suffix }}{{ $mult = get $units $suffix }}{{ end }}
{{- div (mulf (float64 $num) $mult | int64) 1048576 }}
{{- end }}

{{/*
Merges .src into .dst in place: mappings merge key by key, anything else in
src replaces (false, 0 and "" too, unlike sprig's mergeOverwrite), and a null
in src deletes the key.
*/}}
{{- define "stackrelay.deepMerge" -}}
{{- $dst := .dst }}
{{- range $k, $v := .src }}
{{- if kindIs "invalid" $v }}
{{- $_ := unset $dst $k }}
{{- else if and (kindIs "map" $v) (kindIs "map" (index $dst $k)) }}
{{- $_ := include "stackrelay.deepMerge" (dict "dst" (index $dst $k) "src" $v) }}
{{- else }}
{{- $_ := set $dst $k $v }}
{{- end }}
{{- end }}
{{- end }}

{{/* The gateway pipeline config: values' gateway.config, the chart's wiring, then extraConfig. */}}
{{- define "stackrelay.gatewayConfig" -}}
{{- $g := .Values.gateway }}
{{- $memLimit := required "gateway.resources.limits.memory is required: the memory limiter is derived from it" (($g.resources).limits).memory }}
{{- $mib := include "stackrelay.quantityMiB" (dict "value" $memLimit "key" "gateway.resources.limits.memory") | int64 }}
{{- /* The symbol cache stays within its emptyDir: exceeding sizeLimit evicts the pod. */}}
{{- $cacheMiB := include "stackrelay.quantityMiB" (dict "value" $g.cache.sizeLimit "key" "gateway.cache.sizeLimit") | int64 }}
{{- $receiver := dict "endpoint" (printf "0.0.0.0:%d" (int $g.port)) }}
{{- if .Values.tls.enabled }}
{{- $tls := dict "cert_file" "/etc/stackrelay/tls/tls.crt" "key_file" "/etc/stackrelay/tls/tls.key" }}
{{- if .Values.tls.clientAuth }}
{{- $_ := set $tls "client_ca_file" "/etc/stackrelay/tls/ca.crt" }}
{{- end }}
{{- $_ := set $receiver "tls" $tls }}
{{- end }}
{{- if .Values.auth.enabled }}
{{- $_ := set $receiver "auth" (dict "bearer_token_file" (include "stackrelay.tokenFile" .)) }}
{{- end }}
{{- $wired := dict
  "receivers" (dict "agent" $receiver)
  "processors" (dict
    "symbolize" (dict "cache_dir" "/var/cache/stackrelay" "debuginfod_urls" $g.debuginfodURLs
      "disk_cache_size" (printf "%dMiB" (div (mul $cacheMiB 3) 4)))
    "memory_limiter" (dict
      "limit_mib" (div (mul $mib (int $g.memoryLimiter.limitPercentage)) 100)
      "spike_limit_mib" (div (mul $mib (int $g.memoryLimiter.spikeLimitPercentage)) 100)))
  "service" (dict "telemetry" (dict "metrics" (dict "address" (printf "0.0.0.0:%d" (int $g.metricsPort))))) }}
{{- if $g.otlp.enabled }}
{{- $protocols := dict }}
{{- range $proto, $port := dict "grpc" $g.otlp.grpcPort "http" $g.otlp.httpPort }}
{{- $p := dict "endpoint" (ternary (printf "0.0.0.0:%d" (int $port)) "" (gt (int $port) 0)) }}
{{- if $g.otlp.includeMetadata }}{{ $_ := set $p "include_metadata" true }}{{ end }}
{{- $_ := set $protocols $proto $p }}
{{- end }}
{{- $_ := set (get $wired "receivers") "otlp" (dict "protocols" $protocols) }}
{{- end }}
{{- $py := .Values.pyroscope }}
{{- $keys := $py.existingSecretKeys }}
{{- if .Values.pyroscope.enabled }}
{{- $endpoint := required "pyroscope.endpoint is required (e.g. http://pyroscope.pyroscope.svc:4040), or set pyroscope.enabled=false and define exporters in gateway.extraConfig" .Values.pyroscope.endpoint }}
{{- $headers := deepCopy (default (dict) .Values.pyroscope.headers) }}
{{- if .Values.pyroscope.tenantID }}
{{- $_ := set $headers "X-Scope-OrgID" .Values.pyroscope.tenantID }}
{{- end }}
{{- /* Credentials from pyroscope.existingSecret reach the config as environment variables (stackrelay.pyroscopeEnv). */}}
{{- if $keys.tenantID }}
{{- $_ := set $headers "X-Scope-OrgID" "${env:PYROSCOPE_TENANT_ID}" }}
{{- end }}
{{- if $keys.bearerToken }}
{{- $_ := set $headers "Authorization" "Bearer ${env:PYROSCOPE_BEARER_TOKEN}" }}
{{- end }}
{{- $exp := dict
  "endpoint" $endpoint
  "proto_version" (toString .Values.pyroscope.protoVersion)
  "compression" .Values.pyroscope.compression
  "sending_queue" (dict "queue_size_mib" (int $g.queue.sizeMiB) "storage" "/var/lib/stackrelay/queue"
    "block_on_overflow" $g.queue.blockOnOverflow) }}
{{- if $headers }}
{{- $_ := set $exp "headers" $headers }}
{{- end }}
{{- if $keys.basicAuthUsername }}
{{- $_ := set $exp "auth" (dict "authenticator" "basicauth/pyroscope") }}
{{- $_ := set $wired "extensions" (dict "basicauth/pyroscope" (dict "client_auth" (dict
  "username" "${env:PYROSCOPE_BASIC_AUTH_USERNAME}" "password" "${env:PYROSCOPE_BASIC_AUTH_PASSWORD}"))) }}
{{- end }}
{{- $_ := set $wired "exporters" (dict "otlp_http/pyroscope" $exp) }}
{{- end }}
{{- $cfg := deepCopy (default (dict) $g.config) }}
{{- if not $g.k8sAttributes.enabled }}
{{- $_ := unset (default (dict) $cfg.processors) "k8s_attributes" }}
{{- $pipelines := ((($cfg.service).pipelines) | default (dict)) }}
{{- range $name, $p := $pipelines }}
{{- if $p.processors }}
{{- $_ := set $p "processors" (without $p.processors "k8s_attributes") }}
{{- end }}
{{- end }}
{{- end }}
{{- if $g.otlp.enabled }}
{{- range $name, $p := ((($cfg.service).pipelines) | default (dict)) }}
{{- if and (eq $name "profiles") (not (has "otlp" ($p.receivers | default (list)))) }}
{{- $_ := set $p "receivers" (append ($p.receivers | default (list)) "otlp") }}
{{- end }}
{{- end }}
{{- end }}
{{- $_ := include "stackrelay.deepMerge" (dict "dst" $cfg "src" $wired) }}
{{- if hasKey $wired "extensions" }}
{{- $svc := get $cfg "service" }}
{{- $_ := set $svc "extensions" (append (without ($svc.extensions | default (list)) "basicauth/pyroscope") "basicauth/pyroscope") }}
{{- end }}
{{- $_ := include "stackrelay.deepMerge" (dict "dst" $cfg "src" (deepCopy (default (dict) $g.extraConfig))) }}
{{- /* A pipeline naming a component the config does not define fails here, not in the pod. */}}
{{- range $pname, $p := (($cfg.service).pipelines | default (dict)) }}
{{- range $section := list "receivers" "processors" "exporters" }}
{{- range $id := (get (default (dict) $p) $section | default (list)) }}
{{- if not (hasKey (get $cfg $section | default (dict)) $id) }}
{{- fail (printf "gateway config: service.pipelines.%s.%s names %q, which %s does not define (pyroscope.enabled=false needs exporters in gateway.extraConfig)" $pname $section $id $section) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/* The agent config: values' agent.config, the chart's wiring, then extraConfig. */}}
{{- define "stackrelay.agentConfig" -}}
{{- $scheme := ternary "https" "http" .Values.tls.enabled }}
{{- $gw := dict "endpoint" (printf "%s://%s:%d" $scheme (include "stackrelay.gatewayHost" .) (int .Values.gateway.port)) }}
{{- if .Values.tls.enabled }}
{{- $tls := dict "ca_file" "/etc/stackrelay/tls/ca.crt" "server_name" (default (include "stackrelay.gatewayHost" .) .Values.tls.serverName) }}
{{- if .Values.tls.clientAuth }}
{{- $_ := set $tls "cert_file" "/etc/stackrelay/tls/tls.crt" }}
{{- $_ := set $tls "key_file" "/etc/stackrelay/tls/tls.key" }}
{{- end }}
{{- $_ := set $gw "tls" $tls }}
{{- end }}
{{- if .Values.auth.enabled }}
{{- $_ := set $gw "bearer_token_file" (include "stackrelay.tokenFile" .) }}
{{- end }}
{{- $wired := dict
  "node_name" "${env:NODE_NAME}"
  "telemetry" (dict "metrics" (dict "address" (printf "0.0.0.0:%d" (int .Values.agent.metricsPort)))) }}
{{- $o := .Values.agent.otlp }}
{{- if or (not $o.endpoint) $o.toGateway }}
{{- $_ := set $wired "gateway" $gw }}
{{- end }}
{{- if $o.endpoint }}
{{- $headers := deepCopy (default (dict) $o.headers) }}
{{- /* Credentials from agent.otlp.existingSecret reach the config as environment variables (stackrelay.agentOtlpEnv). */}}
{{- if $o.existingSecretKeys.tenantID }}
{{- $_ := set $headers "X-Scope-OrgID" "${env:OTLP_TENANT_ID}" }}
{{- end }}
{{- if $o.existingSecretKeys.bearerToken }}
{{- $_ := set $headers "Authorization" "Bearer ${env:OTLP_BEARER_TOKEN}" }}
{{- end }}
{{- $otlp := dict
  "endpoint" $o.endpoint
  "proto_version" (toString $o.protoVersion)
  "compression" $o.compression
  "buffer_size" $o.bufferSize
  "timeout" $o.timeout }}
{{- if $headers }}
{{- $_ := set $otlp "headers" $headers }}
{{- end }}
{{- $tls := dict }}
{{- if $o.tls.caSecret }}{{ $_ := set $tls "ca_file" "/etc/stackrelay/otlp-tls/ca.crt" }}{{ end }}
{{- if $o.tls.serverName }}{{ $_ := set $tls "server_name" $o.tls.serverName }}{{ end }}
{{- if $o.tls.insecureSkipVerify }}{{ $_ := set $tls "insecure_skip_verify" true }}{{ end }}
{{- if $tls }}
{{- $_ := set $otlp "tls" $tls }}
{{- end }}
{{- $_ := set $wired "otlp" $otlp }}
{{- end }}
{{- $cfg := deepCopy (default (dict) .Values.agent.config) }}
{{- $_ := include "stackrelay.deepMerge" (dict "dst" $cfg "src" $wired) }}
{{- $_ := include "stackrelay.deepMerge" (dict "dst" $cfg "src" (deepCopy (default (dict) .Values.agent.extraConfig))) }}
{{- toYaml $cfg }}
{{- end }}

{{/* The agents' environment from agent.otlp.existingSecret: one variable per key named. */}}
{{- define "stackrelay.agentOtlpEnv" -}}
{{- $o := .Values.agent.otlp }}
{{- range $var, $key := dict "OTLP_TENANT_ID" $o.existingSecretKeys.tenantID "OTLP_BEARER_TOKEN" $o.existingSecretKeys.bearerToken }}
{{- if $key }}
- name: {{ $var }}
  valueFrom:
    secretKeyRef:
      name: {{ $o.existingSecret }}
      key: {{ $key }}
{{- end }}
{{- end }}
{{- end }}

{{/* The gateway's environment from pyroscope.existingSecret: one variable per key named. */}}
{{- define "stackrelay.pyroscopeEnv" -}}
{{- $py := .Values.pyroscope }}
{{- range $var, $key := dict "PYROSCOPE_TENANT_ID" $py.existingSecretKeys.tenantID
  "PYROSCOPE_BASIC_AUTH_USERNAME" $py.existingSecretKeys.basicAuthUsername
  "PYROSCOPE_BASIC_AUTH_PASSWORD" $py.existingSecretKeys.basicAuthPassword
  "PYROSCOPE_BEARER_TOKEN" $py.existingSecretKeys.bearerToken }}
{{- if $key }}
- name: {{ $var }}
  valueFrom:
    secretKeyRef:
      name: {{ $py.existingSecret }}
      key: {{ $key }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The ports of the otlp receivers of the rendered gateway config, from their
endpoints, as a JSON list of {name, port, protocol}: otlp-grpc and otlp-http
for the first, otlp-grpc-N and otlp-http-N for more (otlp/NAME receivers).
*/}}
{{- define "stackrelay.otlpPorts" -}}
{{- $cfg := include "stackrelay.gatewayConfig" . | fromYaml }}
{{- $out := list }}
{{- $i := 0 }}
{{- range $id, $r := ($cfg.receivers | default (dict)) }}
{{- if eq (first (splitList "/" $id)) "otlp" }}
{{- range $proto := list "grpc" "http" }}
{{- $ep := toString (((($r | default (dict)).protocols | default (dict)) | dig $proto "endpoint" "") | default "") }}
{{- $port := regexFind "[0-9]+$" $ep }}
{{- if and $ep $port }}
{{- $out = append $out (dict "name" (printf "otlp-%s%s" $proto (ternary "" (printf "-%d" $i) (eq $i 0))) "port" (int $port) "protocol" $proto) }}
{{- end }}
{{- end }}
{{- $i = add1 $i }}
{{- end }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/* Checks across values that the JSON schema cannot express. */}}
{{- define "stackrelay.validate" -}}
{{- $t := .Values.tls }}
{{- if and $t.enabled $t.agentSecret (not $t.gatewaySecret) }}
{{- fail "tls.agentSecret needs tls.gatewaySecret: a Secret with tls.crt, tls.key (and ca.crt for clientAuth); or leave both empty for the chart's certificates" }}
{{- end }}
{{- if and $t.enabled $t.gatewaySecret .Values.agent.enabled (not $t.agentSecret) }}
{{- fail "tls.gatewaySecret needs tls.agentSecret: a Secret with ca.crt (and tls.crt, tls.key for clientAuth) for the agents; or leave both empty for the chart's certificates" }}
{{- end }}
{{- if and $t.enabled $t.gatewaySecret $t.certManager.enabled }}
{{- fail "tls.certManager.enabled with tls.gatewaySecret: cert-manager writes the chart's own Secrets; set one or the other" }}
{{- end }}
{{- if and .Values.auth.existingSecret (not .Values.auth.enabled) }}
{{- fail "auth.existingSecret is set but auth.enabled is false: the token would not be checked" }}
{{- end }}
{{- if and .Values.gateway.queue.persistence.enabled .Values.gateway.autoscaling.enabled }}
{{- fail "gateway.queue.persistence.enabled with gateway.autoscaling.enabled: scaling a StatefulSet down strands queued data in the removed replica's volume; turn one of them off" }}
{{- end }}
{{- $py := .Values.pyroscope }}
{{- $k := $py.existingSecretKeys }}
{{- if and (or $k.tenantID $k.basicAuthUsername $k.basicAuthPassword $k.bearerToken) (not $py.existingSecret) }}
{{- fail "pyroscope.existingSecretKeys names keys but pyroscope.existingSecret names no Secret" }}
{{- end }}
{{- if ne (not $k.basicAuthUsername) (not $k.basicAuthPassword) }}
{{- fail "pyroscope.existingSecretKeys.basicAuthUsername and basicAuthPassword go together" }}
{{- end }}
{{- if and $k.basicAuthUsername $k.bearerToken }}
{{- fail "pyroscope.existingSecretKeys: basic authentication and a bearer token both set Authorization; keep one" }}
{{- end }}
{{- if and $k.tenantID $py.tenantID }}
{{- fail "pyroscope.tenantID and pyroscope.existingSecretKeys.tenantID both set X-Scope-OrgID; keep one" }}
{{- end }}
{{- if and $py.existingSecret (not $py.enabled) }}
{{- fail "pyroscope.existingSecret is set but pyroscope.enabled is false: nothing would use it" }}
{{- end }}
{{- $o := .Values.agent.otlp }}
{{- if and (not $o.endpoint) (not $o.toGateway) }}
{{- fail "agent.otlp.toGateway is false but agent.otlp.endpoint is empty: the agents would send nowhere" }}
{{- end }}
{{- if and (or $o.existingSecretKeys.tenantID $o.existingSecretKeys.bearerToken) (not $o.existingSecret) }}
{{- fail "agent.otlp.existingSecretKeys names keys but agent.otlp.existingSecret names no Secret" }}
{{- end }}
{{- if and $o.existingSecret (not $o.endpoint) }}
{{- fail "agent.otlp.existingSecret is set but agent.otlp.endpoint is empty: nothing would use it" }}
{{- end }}
{{- if and $o.existingSecretKeys.tenantID (hasKey (default (dict) $o.headers) "X-Scope-OrgID") }}
{{- fail "agent.otlp.headers and agent.otlp.existingSecretKeys.tenantID both set X-Scope-OrgID; keep one" }}
{{- end }}
{{- $lp := int .Values.gateway.memoryLimiter.limitPercentage }}
{{- $sp := int .Values.gateway.memoryLimiter.spikeLimitPercentage }}
{{- if ge $sp $lp }}
{{- fail (printf "gateway.memoryLimiter.spikeLimitPercentage (%d) must be below limitPercentage (%d)" $sp $lp) }}
{{- end }}
{{- end }}

{{/* What the agent and its preflight init container share: privileges, environment, mounts. */}}
{{- define "stackrelay.agentContainerCommon" -}}
{{- $a := .Values.agent -}}
env:
  # node_name in agent.yaml is ${env:NODE_NAME}; the gateway's
  # k8s_attributes processor matches pods on it.
  - name: NODE_NAME
    valueFrom:
      fieldRef:
        fieldPath: spec.nodeName
  {{- with include "stackrelay.agentOtlpEnv" . | trim }}
  {{- . | nindent 2 }}
  {{- end }}
  {{- with $a.env }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with $a.envFrom }}
envFrom:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  # Root inside the container, but only with the capabilities eBPF
  # profiling needs (least privilege: docs/install-kubernetes.md, "Agent privileges"); not privileged.
  runAsUser: 0
  runAsNonRoot: false
  privileged: false
  # Kubernetes refuses allowPrivilegeEscalation: false together with SYS_ADMIN.
  allowPrivilegeEscalation: {{ has "SYS_ADMIN" $a.capabilities }}
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
    add:
      {{- toYaml $a.capabilities | nindent 6 }}
  seccompProfile:
    {{- toYaml $a.seccompProfile | nindent 4 }}
volumeMounts:
  - name: config
    mountPath: /etc/stackrelay/agent.yaml
    subPath: agent.yaml
    readOnly: true
  - name: tracing
    mountPath: /sys/kernel/tracing
    readOnly: true
  - name: cgroup
    mountPath: /sys/fs/cgroup
    readOnly: true
  {{- if .Values.tls.enabled }}
  - name: tls
    mountPath: /etc/stackrelay/tls
    readOnly: true
  {{- end }}
  {{- if .Values.auth.enabled }}
  - name: auth
    mountPath: /etc/stackrelay/auth
    readOnly: true
  {{- end }}
  {{- if and $a.otlp.endpoint $a.otlp.tls.caSecret }}
  - name: otlp-tls
    mountPath: /etc/stackrelay/otlp-tls
    readOnly: true
  {{- end }}
  {{- with $a.extraVolumeMounts }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}

{{/*
What the k8s_attributes processors of the rendered gateway config list and
watch, as a JSON list of "pods", "namespaces", "replicasets", "nodes": the
same rules as gateway/k8s/k8s-extract.c (k8s_extract__needs_*), so the
ClusterRole grants exactly what the config needs. Empty when no
k8s_attributes processor is configured.
*/}}
{{- define "stackrelay.k8sResources" -}}
{{- $cfg := include "stackrelay.gatewayConfig" . | fromYaml }}
{{- $need := dict }}
{{- $defaultMeta := list "k8s.namespace.name" "k8s.pod.name" "k8s.node.name" "k8s.container.name" "k8s.deployment.name" "k8s.statefulset.name" "k8s.daemonset.name" "k8s.cronjob.name" "k8s.job.name" "service.name" "service.namespace" }}
{{- range $id, $p := ($cfg.processors | default (dict)) }}
{{- if eq (first (splitList "/" $id)) "k8s_attributes" }}
{{- $_ := set $need "pods" true }}
{{- $x := (default (dict) $p).extract | default (dict) }}
{{- $meta := $x.metadata | default $defaultMeta }}
{{- $rules := concat ($x.labels | default list) ($x.annotations | default list) }}
{{- $from := list }}
{{- range $r := $rules }}{{ $from = append $from ($r.from | default "pod") }}{{ end }}
{{- if or (has "k8s.cluster.uid" $meta) (has "namespace" $from) }}
{{- $_ := set $need "namespaces" true }}
{{- end }}
{{- if or (has "k8s.node.uid" $meta) (has "node" $from) }}
{{- $_ := set $need "nodes" true }}
{{- end }}
{{- if and (not $x.deployment_name_from_replicaset) (or (has "k8s.deployment.name" $meta) (has "k8s.deployment.uid" $meta) (has "service.name" $meta)) }}
{{- $_ := set $need "replicasets" true }}
{{- end }}
{{- end }}
{{- end }}
{{- keys $need | sortAlpha | toJson }}
{{- end }}
