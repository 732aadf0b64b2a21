{{/*
The values of upstream's chart (pulumi-kubernetes-operator, deploy/helm/pulumi-operator), so that
its values file installs unchanged: each is honoured with upstream's meaning, or accepted at
upstream's default and refused with a message otherwise. The table: docs/migration.md, "Helm
values". Values only upstream has are read with `index`, as this chart's values.yaml lacks them
(`helm lint --strict` fails on a missing key read as a field).
*/}}

{{/* Fails on an upstream value this chart cannot honour; included once, by deployment.yaml. */}}
{{- define "pulumi-operator.upstreamChecks" -}}
{{- $leader := index .Values "leaderElection" | default dict -}}
{{- range $key, $default := dict "leaseDuration" "60s" "renewDeadline" "45s" "retryPeriod" "10s" -}}
{{- $given := index $leader $key -}}
{{- if and (not (kindIs "invalid" $given)) (ne (toString $given) $default) -}}
{{- fail (printf "leaderElection.%s=%v: the hook server elects no leader (its replicas are stateless and all serve), and Metacontroller's leader election is set where Metacontroller is installed. Remove it, or leave upstream's default %s." $key $given $default) -}}
{{- end -}}
{{- end -}}
{{- $timeout := index (index .Values "kubeAPI" | default dict) "timeout" -}}
{{- if and (not (kindIs "invalid" $timeout)) (ne (toString $timeout) "30s") -}}
{{- fail (printf "kubeAPI.timeout=%v: the hook server's few API calls (Events, the list and watch of the gauges) have bounds of their own, and Metacontroller's API client is set where Metacontroller is installed. Remove it, or leave upstream's default 30s." $timeout) -}}
{{- end -}}
{{- if index .Values.rbac "extraRules" -}}
{{- fail "rbac.extraRules: the hook server reads nothing from the API server, so there is no operator role to extend: Metacontroller reads Flux sources with its own role (grant a third-party source kind there), and rules for your Pulumi programs go in rbac.stackWorkspace.extraRules." -}}
{{- end -}}
{{- if index (index .Values "controller" | default dict) "advertisedAddress" -}}
{{- fail "controller.advertisedAddress: Programs are served by the hook server, at its Service's port programs (service.programPort); workspace pods get that address from the release, so there is none to set. Remove it." -}}
{{- end -}}
{{- $path := index .Values.serviceMonitor "telemetryPath" -}}
{{- if and $path (ne $path "/metrics") -}}
{{- fail (printf "serviceMonitor.telemetryPath=%s: the hook server serves its metrics at /metrics only. Remove it." $path) -}}
{{- end -}}
{{- $aggregation := index .Values.rbac "createClusterAggregationRoles" -}}
{{- if and (kindIs "bool" $aggregation) $aggregation (not .Values.rbac.userRoles) -}}
{{- fail "rbac.createClusterAggregationRoles=true (upstream's name) asks for the roles that rbac.userRoles=false turns off: set one of them." -}}
{{- end -}}
{{- if and .Values.rbac.create .Values.rbac.createRole (not .Values.rbac.createClusterRole) .Values.objectMetrics.enabled -}}
{{- fail "rbac.createClusterRole=false with rbac.createRole=true: the gauges of objectMetrics list Stacks and Programs in every namespace, which a Role cannot grant. Keep rbac.createClusterRole, or set objectMetrics.enabled=false." -}}
{{- end -}}
{{- if and .Values.rbac.create .Values.rbac.createRole (not .Values.rbac.createClusterRole) (include "pulumi-operator.metricsAuth" .) -}}
{{- fail "rbac.createClusterRole=false with rbac.createRole=true: metricsAuth reviews the tokens of scrapers (TokenReview, SubjectAccessReview), which a Role cannot grant. Keep rbac.createClusterRole, or set metricsAuth.enabled=false." -}}
{{- end -}}
{{- end -}}

{{/*
The value of a setting with two names, ours and upstream's: either, the default when neither is
set, and a failure when both are set and differ.
Call with (dict "ours" … "oursName" … "upstream" … "upstreamName" … "default" …).
*/}}
{{- define "pulumi-operator.eitherName" -}}
{{- $ours := toString (default "" .ours) -}}
{{- $upstream := toString (default "" .upstream) -}}
{{- if and $ours $upstream (ne $ours $upstream) -}}
{{- fail (printf "%s=%s and %s (upstream's name)=%s disagree: set one of them." .oursName $ours .upstreamName $upstream) -}}
{{- end -}}
{{- default .default (default $upstream $ours) -}}
{{- end -}}

{{/*
LOG_LEVEL: hooks.logLevel, or upstream's controller.logLevel as a pino level (zap's debug, info and
error are pino's; panic is fatal; a verbosity 1 is debug, more is trace).
*/}}
{{- define "pulumi-operator.logLevel" -}}
{{- $given := index (index .Values "controller" | default dict) "logLevel" -}}
{{- $level := "" -}}
{{- if not (kindIs "invalid" $given) -}}
{{- $level = toString $given -}}
{{- if eq $level "1" -}}{{- $level = "debug" -}}
{{- else if regexMatch "^[0-9]+$" $level -}}{{- $level = "trace" -}}
{{- else if eq $level "panic" -}}{{- $level = "fatal" -}}
{{- end -}}
{{- end -}}
{{- include "pulumi-operator.eitherName" (dict "ours" .Values.hooks.logLevel "oursName" "hooks.logLevel" "upstream" $level "upstreamName" "controller.logLevel" "default" "info") -}}
{{- end -}}

{{/* LOG_FORMAT: hooks.logFormat, or upstream's controller.logFormat. */}}
{{- define "pulumi-operator.logFormat" -}}
{{- include "pulumi-operator.eitherName" (dict "ours" .Values.hooks.logFormat "oursName" "hooks.logFormat" "upstream" (index (index .Values "controller" | default dict) "logFormat") "upstreamName" "controller.logFormat" "default" "json") -}}
{{- end -}}

{{/* FLUX_MAX_UNTAR_SIZE_BYTES: hooks.fluxMaxUntarSizeBytes, or upstream's flux.maxUntarSizeBytes (a number in a values file). */}}
{{- define "pulumi-operator.fluxMaxUntarSizeBytes" -}}
{{- $given := index (index .Values "flux" | default dict) "maxUntarSizeBytes" -}}
{{- if or (kindIs "float64" $given) (kindIs "int64" $given) (kindIs "int" $given) -}}
{{- $given = printf "%d" (int64 $given) -}}
{{- end -}}
{{- include "pulumi-operator.eitherName" (dict "ours" .Values.hooks.fluxMaxUntarSizeBytes "oursName" "hooks.fluxMaxUntarSizeBytes" "upstream" $given "upstreamName" "flux.maxUntarSizeBytes" "default" "") -}}
{{- end -}}

{{/*
METRICS_AUTH: "true" when metricsAuth.enabled and upstream's controller.metricsSecure (when given)
are both true; empty otherwise. Either false turns it off.
*/}}
{{- define "pulumi-operator.metricsAuth" -}}
{{- $upstream := index (index .Values "controller" | default dict) "metricsSecure" -}}
{{- if and .Values.metricsAuth.enabled (or (kindIs "invalid" $upstream) $upstream) -}}true{{- end -}}
{{- end -}}

{{/* The ServiceMonitor's scrapeTimeout: ours, or upstream's serviceMonitor.timeout. */}}
{{- define "pulumi-operator.scrapeTimeout" -}}
{{- include "pulumi-operator.eitherName" (dict "ours" .Values.serviceMonitor.scrapeTimeout "oursName" "serviceMonitor.scrapeTimeout" "upstream" (index .Values.serviceMonitor "timeout") "upstreamName" "serviceMonitor.timeout" "default" "10s") -}}
{{- end -}}

{{/*
The hook server's image. Upstream's default image (docker.io/pulumi/pulumi-kubernetes-operator, no
tag: "the operator of this chart's version") means this chart's own, the default of values.yaml
(a chart's templates cannot read its values.yaml: chart.e2e.ts checks that both render the same);
any other reference to upstream's operator image is refused, as it cannot serve the hooks.
*/}}
{{- define "pulumi-operator.hooksImage" -}}
{{- $image := .Values.image -}}
{{- if eq $image.repository "pulumi/pulumi-kubernetes-operator" -}}
{{- $ours := dict "registry" "ghcr.io" "repository" "pulumi-mc-operator/hooks" "tag" "" "digest" "" -}}
{{- if or (not (has (default "" $image.registry) (list "" "docker.io"))) $image.tag $image.digest -}}
{{- $given := join "/" (compact (list $image.registry $image.repository)) -}}
{{- with $image.tag }}{{ $given = printf "%s:%s" $given . }}{{ end -}}
{{- with $image.digest }}{{ $given = printf "%s@%s" $given . }}{{ end -}}
{{- fail (printf "image: %s is upstream's operator, which this chart does not run. Leave image.registry, image.repository and image.tag at upstream's defaults, or remove them, for the hook server image %s; or name a mirror of that image." $given (include "pulumi-operator.image" (dict "image" $ours "root" .))) -}}
{{- end -}}
{{- $image = merge $ours $image -}}
{{- end -}}
{{- include "pulumi-operator.image" (dict "image" $image "root" .) -}}
{{- end -}}

{{/*
"true" when the roles for people are made: rbac.create and rbac.userRoles, unless upstream's
rbac.createClusterAggregationRoles is false.
*/}}
{{- define "pulumi-operator.userRoles" -}}
{{- $aggregation := index .Values.rbac "createClusterAggregationRoles" -}}
{{- if and .Values.rbac.create .Values.rbac.userRoles (not (and (kindIs "bool" $aggregation) (not $aggregation))) -}}true{{- end -}}
{{- end -}}

{{/*
"true" with upstream's rbac.createClusterAggregationRoles: true: as upstream's roles, the viewer is
aggregated to the built-in view role too, and both roles cover Workspaces and Updates.
*/}}
{{- define "pulumi-operator.upstreamAggregation" -}}
{{- $aggregation := index .Values.rbac "createClusterAggregationRoles" -}}
{{- if and (include "pulumi-operator.userRoles" .) (kindIs "bool" $aggregation) $aggregation -}}true{{- end -}}
{{- end -}}

{{/*
"true" when the PodDisruptionBudget would forbid every eviction (minAvailable at least the
replicas, as with upstream's replicaCount: 1): it is then not made, as it would block node drains.
*/}}
{{- define "pulumi-operator.pdbBlocksDrains" -}}
{{- $pdb := .Values.podDisruptionBudget -}}
{{- if and (kindIs "invalid" $pdb.maxUnavailable) (not (kindIs "invalid" $pdb.minAvailable)) (not (kindIs "string" $pdb.minAvailable)) -}}
{{- if ge (int $pdb.minAvailable) (int .Values.replicaCount) -}}true{{- end -}}
{{- end -}}
{{- end -}}
