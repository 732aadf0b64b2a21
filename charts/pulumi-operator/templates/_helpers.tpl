{{/* Chart name, overridable. */}}
{{- define "pulumi-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Name of the hook server's objects (Deployment, Service, ServiceAccount, …). */}}
{{- define "pulumi-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "pulumi-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pulumi-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: hooks
{{- end -}}

{{- define "pulumi-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "pulumi-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "pulumi-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "pulumi-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
An image reference from {registry, repository, tag, digest}: global.imageRegistry wins over the
image's registry; the tag defaults to v<appVersion>; a digest replaces the tag.
Call with (dict "image" .Values.image "root" .).
*/}}
{{- define "pulumi-operator.image" -}}
{{- $registry := default .image.registry .root.Values.global.imageRegistry -}}
{{- $repository := .image.repository -}}
{{- if $registry -}}{{- $repository = printf "%s/%s" $registry .image.repository -}}{{- end -}}
{{- if .image.digest -}}
{{- printf "%s@%s" $repository .image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (default (printf "v%s" .root.Chart.AppVersion) .image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The Secret of the hook server's certificate, its key and ca.crt. */}}
{{- define "pulumi-operator.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "pulumi-operator.fullname" .)) .Values.hooks.tls.existingSecret -}}
{{- end -}}

{{/* The Secret of the bearer token(s). */}}
{{- define "pulumi-operator.authSecretName" -}}
{{- default (printf "%s-auth" (include "pulumi-operator.fullname" .)) .Values.hooks.auth.existingSecret -}}
{{- end -}}

{{/* The host Metacontroller calls: <fullname>.<namespace>, which the certificate names. */}}
{{- define "pulumi-operator.hooksHost" -}}
{{- printf "%s.%s" (include "pulumi-operator.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/*
The address Metacontroller calls, as a webhook `service` and `path` (call with (dict "root" . "path" "/stack/sync")),
and how it proves the call: the server checked against ca.crt of the TLS Secret, the bearer token of the auth Secret.
*/}}
{{- define "pulumi-operator.webhook" -}}
service:
  name: {{ include "pulumi-operator.fullname" .root }}
  namespace: {{ .root.Release.Namespace }}
  port: {{ .root.Values.service.port }}
  protocol: https
path: {{ .path }}
caBundle:
  secretRef:
    name: {{ include "pulumi-operator.tlsSecretName" .root }}
    namespace: {{ .root.Release.Namespace }}
    key: ca.crt
authorization:
  type: Bearer
  secretRef:
    name: {{ include "pulumi-operator.authSecretName" .root }}
    namespace: {{ .root.Release.Namespace }}
    key: token
{{- end -}}
