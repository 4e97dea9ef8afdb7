{{/* Object name prefix: "tidal" for a release named tidal. */}}
{{- define "tidal.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "tidal.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tidal.adapter" -}}{{ include "tidal.fullname" . }}-adapter{{- end -}}
{{- define "tidal.autoscaler" -}}{{ include "tidal.fullname" . }}-autoscaler{{- end -}}
{{- define "tidal.tlsSecret" -}}
{{- if eq .Values.tls.mode "existingSecret" -}}
{{- .Values.tls.existingSecret.name -}}
{{- else -}}
{{- include "tidal.adapter" . }}-tls
{{- end -}}
{{- end -}}
{{- define "tidal.rulesConfigMap" -}}
{{- default (printf "%s-rules" (include "tidal.adapter" .)) .Values.rules.existingConfigMap -}}
{{- end -}}

{{/* Common labels; call with (dict "ctx" $ "component" "adapter"). */}}
{{- define "tidal.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
{{ include "tidal.selectorLabels" . }}
{{- end -}}

{{- define "tidal.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tidal.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "tidal.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{- define "tidal.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "tidal.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The service names the aggregator verifies the adapter's certificate against. */}}
{{- define "tidal.adapterDNSNames" -}}
{{- $svc := include "tidal.adapter" . -}}
{{- list (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) | toJson -}}
{{- end -}}

{{/* The APIServices to register, as a JSON list of [group, version, versionPriority offset]. */}}
{{- define "tidal.apiServices" -}}
{{- $out := list -}}
{{- if .Values.apiServices.custom -}}
{{- $out = append $out (list "custom.metrics.k8s.io" "v1beta1" 0) -}}
{{- $out = append $out (list "custom.metrics.k8s.io" "v1beta2" 100) -}}
{{- end -}}
{{- if .Values.apiServices.external -}}
{{- $out = append $out (list "external.metrics.k8s.io" "v1beta1" 0) -}}
{{- end -}}
{{- if .Values.apiServices.resource -}}
{{- $out = append $out (list "metrics.k8s.io" "v1beta1" 0) -}}
{{- end -}}
{{- $out | toJson -}}
{{- end -}}
