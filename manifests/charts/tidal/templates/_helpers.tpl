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
{{- if eq (include "tidal.tlsMode" .) "existingSecret" -}}
{{- .Values.tls.existingSecret.name -}}
{{- else -}}
{{- include "tidal.adapter" . }}-tls
{{- end -}}
{{- end -}}
{{- define "tidal.rulesConfigMap" -}}
{{- default (printf "%s-rules" (include "tidal.adapter" .)) (include "tidal.existingRules" .) -}}
{{- end -}}

{{/*
Common labels; call with (dict "ctx" $ "component" "adapter"), and "labels"
for an object's own extra labels. prometheus-adapter's customLabels come
between, and give way to both.
*/}}
{{- define "tidal.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
{{ include "tidal.selectorLabels" . }}
{{- $custom := include "tidal.customLabels" .ctx | fromYaml -}}
{{- range $k, $v := .labels | default dict }}{{ $_ := unset $custom $k }}{{ end -}}
{{- with $custom }}
{{ toYaml . }}
{{- end }}
{{- with .labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* prometheus-adapter's customLabels (on every object and pod), less the keys of the labels above, which they cannot change. */}}
{{- define "tidal.customLabels" -}}
{{- $out := dict -}}
{{- range $k, $v := .Values.customLabels | default dict -}}
{{- if not (has $k (list "helm.sh/chart" "app.kubernetes.io/managed-by" "app.kubernetes.io/version" "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/component")) -}}
{{- $_ := set $out $k $v -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{- define "tidal.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tidal.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- /* prometheus-adapter's image (from that chart's values) is not Tidal's: it is replaced by Tidal's. */ -}}
{{- define "tidal.image" -}}
{{- if regexMatch "(^|/)prometheus-adapter$" .Values.image.repository -}}
tidal:{{ .Chart.AppVersion }}
{{- else if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* imagePullSecrets of both pods: the value, plus prometheus-adapter's image.pullSecrets (names). */}}
{{- define "tidal.imagePullSecrets" -}}
{{- $secrets := concat (default list .Values.imagePullSecrets) (list) -}}
{{- range .Values.image.pullSecrets }}{{ $secrets = append $secrets (dict "name" .) }}{{ end -}}
{{- with $secrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- /*
The pod-level values both components share, rendered under the pod spec;
call with (dict "ctx" $ "c" <component values> "component" "adapter").
*/ -}}
{{- define "tidal.podSpecCommon" -}}
{{- $sel := include "tidal.selectorLabels" (dict "ctx" .ctx "component" .component) | fromYaml -}}
{{- with .c.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- $dnsPolicy := .dnsPolicy | default "" -}}
{{- if .c.hostNetwork.enabled }}
# The node's network: the ports are the node's, so the Service's targetPort
# and the probes follow hostNetwork's ports.
hostNetwork: true
{{- if or (not $dnsPolicy) (eq $dnsPolicy "ClusterFirst") }}{{ $dnsPolicy = "ClusterFirstWithHostNet" }}{{ end }}
{{- end }}
{{- with $dnsPolicy }}
dnsPolicy: {{ . }}
{{- end }}
{{- with .dnsConfig }}
dnsConfig:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .c.podSecurityContext | nindent 2 }}
{{- with .c.topologySpreadConstraints }}
topologySpreadConstraints:
{{- range . }}
{{- $tsc := . }}
{{- if not (hasKey . "labelSelector") }}
{{- $tsc = merge (dict "labelSelector" (dict "matchLabels" $sel)) . }}
{{- end }}
- {{ toYaml $tsc | nindent 2 | trim }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The pod template's labels: the selector's, then podLabels, then prometheus-adapter's customLabels (neither can change the selector's). */}}
{{- define "tidal.podLabels" -}}
{{- $sel := include "tidal.selectorLabels" (dict "ctx" .ctx "component" .component) | fromYaml -}}
{{- toYaml (merge $sel (.c.podLabels | default dict) (include "tidal.customLabels" .ctx | fromYaml)) -}}
{{- end -}}

{{/* The adapter's secure port in the pod: hostNetwork's in the node's network, else securePort (or prometheus-adapter's listenPort). */}}
{{- define "tidal.adapterPort" -}}
{{- if .Values.adapter.hostNetwork.enabled -}}
{{- .Values.adapter.hostNetwork.securePort -}}
{{- else -}}
{{- (include "tidal.adapterValue" (dict "ctx" . "pa" "listenPort" "own" "securePort") | fromJson).v -}}
{{- end -}}
{{- end -}}

{{/* The autoscaler's health and secure ports in the pod, as JSON {"health", "secure"}. */}}
{{- define "tidal.autoscalerPorts" -}}
{{- $c := .Values.autoscaler -}}
{{- if $c.hostNetwork.enabled -}}
{{- dict "health" $c.hostNetwork.healthPort "secure" $c.hostNetwork.securePort | toJson -}}
{{- else -}}
{{- dict "health" $c.healthPort "secure" $c.securePort | toJson -}}
{{- end -}}
{{- end -}}

{{/* A PodDisruptionBudget's spec budget: maxUnavailable when set, else minAvailable when set. */}}
{{- define "tidal.pdbBudget" -}}
{{- if not (kindIs "invalid" .maxUnavailable) -}}
maxUnavailable: {{ .maxUnavailable }}
{{- else if not (kindIs "invalid" .minAvailable) -}}
minAvailable: {{ .minAvailable }}
{{- end -}}
{{- end -}}

{{/* The service names the aggregator verifies the adapter's certificate against. */}}
{{- define "tidal.adapterDNSNames" -}}
{{- $svc := include "tidal.adapter" . -}}
{{- list (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) | toJson -}}
{{- end -}}

{{/* The APIServices to register, as a JSON list of [group, version, versionPriority offset]. */}}
{{- define "tidal.apiServices" -}}
{{- $out := list -}}
{{- if eq (include "tidal.apiEnabled" (dict "ctx" . "api" "custom")) "true" -}}
{{- $out = append $out (list "custom.metrics.k8s.io" "v1beta1" 0) -}}
{{- $out = append $out (list "custom.metrics.k8s.io" "v1beta2" 100) -}}
{{- end -}}
{{- if eq (include "tidal.apiEnabled" (dict "ctx" . "api" "external")) "true" -}}
{{- $out = append $out (list "external.metrics.k8s.io" "v1beta1" 0) -}}
{{- end -}}
{{- if eq (include "tidal.apiEnabled" (dict "ctx" . "api" "resource")) "true" -}}
{{- $out = append $out (list "metrics.k8s.io" "v1beta1" 0) -}}
{{- $out = append $out (list "metrics.k8s.io" "v1" 100) -}}
{{- end -}}
{{- $out | toJson -}}
{{- end -}}

{{- /*
prometheus-adapter chart values (the prometheus-community chart's names,
shapes and meanings; docs/migration.md). A value of that chart given in
your values wins over the Tidal value it maps onto: Tidal's values.yaml
does not set them, so a present key is yours. resources and the maps and lists (nodeSelector,
tolerations, affinity, podAnnotations, topologySpreadConstraints,
extraContainers) win when not empty; podLabels and serviceAccount.annotations
are merged over Tidal's (theirs win a shared key), podSecurityContext and
securityContext key by key as Helm merges values (tidal.coalesce), and
podDisruptionBudget key by key.
*/ -}}

{{/* The Prometheus URL: prometheus.url (templated, as there), then :port and path when set. */}}
{{- define "tidal.prometheusURL" -}}
{{- tpl .Values.prometheus.url . }}{{ with .Values.prometheus.port }}:{{ . }}{{ end }}{{ .Values.prometheus.path | default "" }}
{{- end -}}

{{/* The TCP port a URL reaches: its own, else 443 for https and 80 for http. */}}
{{- define "tidal.urlPort" -}}
{{- $authority := regexReplaceAll "^.*@" (regexReplaceAll "^[a-zA-Z][a-zA-Z0-9+.-]*://([^/?#]*).*$" . "${1}") "" -}}
{{- $port := regexFind ":[0-9]+$" $authority | trimPrefix ":" -}}
{{- if $port }}{{ $port }}{{ else if hasPrefix "https:" (lower .) }}443{{ else }}80{{ end -}}
{{- end -}}

{{/* rules.backends, templated (as rules.custom), as a YAML list. */}}
{{- define "tidal.backends" -}}
{{- if .Values.rules.backends }}{{ tpl (toYaml .Values.rules.backends) . }}{{ else }}[]{{ end -}}
{{- end -}}

{{/* The TLS mode in effect: tls.enable (prometheus-adapter) is "provided", certManager.enabled is "certManager". */}}
{{- define "tidal.tlsMode" -}}
{{- if .Values.tls.enable -}}
provided
{{- else if and .Values.certManager .Values.certManager.enabled -}}
certManager
{{- else -}}
{{ .Values.tls.mode }}
{{- end -}}
{{- end -}}

{{/* A prometheus-adapter top-level value when given, else the adapter.* one; renders JSON. */}}
{{- define "tidal.adapterValue" -}}
{{- $v := .ctx.Values -}}
{{- $own := get $v.adapter .own -}}
{{- if hasKey $v .pa -}}
{{- $theirs := get $v .pa -}}
{{- if or (not .nonEmpty) $theirs -}}
{{- $own = $theirs -}}
{{- end -}}
{{- end -}}
{{- dict "v" $own | toJson -}}
{{- end -}}

{{/*
own with theirs merged over it the way Helm merges your values into
values.yaml's: a map key by key (recursively), null deletes the key,
anything else replaces it; renders JSON. Call with (dict "own" . "theirs" .).
*/}}
{{- define "tidal.coalesce" -}}
{{- $out := deepCopy (.own | default dict) -}}
{{- range $k, $v := .theirs | default dict -}}
{{- $mine := get $out $k -}}
{{- if kindIs "invalid" $v -}}
{{- $_ := unset $out $k -}}
{{- else if and (kindIs "map" $v) (kindIs "map" $mine) -}}
{{- $_ := set $out $k (include "tidal.coalesce" (dict "own" $mine "theirs" $v) | fromJson) -}}
{{- else -}}
{{- $_ := set $out $k $v -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* The rule file in use: rules.existing (prometheus-adapter) or rules.existingConfigMap. */}}
{{- define "tidal.existingRules" -}}
{{- .Values.rules.existing | default .Values.rules.existingConfigMap | default "" -}}
{{- end -}}

{{/*
Whether an API is served and registered: apiServices.<api> when true or
false; null decides as prometheus-adapter's chart does, from the rules: custom
metrics with default or custom rules, external metrics with external rules
(Tidal's default rules have some), metrics.k8s.io with rules.resource. With an
existing rules ConfigMap, whose content the chart cannot see: custom and
external.
*/}}
{{- define "tidal.apiEnabled" -}}
{{- $set := get .ctx.Values.apiServices .api -}}
{{- $r := .ctx.Values.rules -}}
{{- $existing := include "tidal.existingRules" .ctx -}}
{{- if not (kindIs "invalid" $set) -}}
{{- $set -}}
{{- else if eq .api "custom" -}}
{{- if $existing }}true{{ else }}{{ or (not (eq (toString $r.default) "false")) (not (empty $r.custom)) }}{{ end -}}
{{- else if eq .api "external" -}}
{{- if $existing }}true{{ else }}{{ or (eq (toString $r.default) "tidal") (not (empty $r.external)) }}{{ end -}}
{{- else -}}
{{- not (empty $r.resource) -}}
{{- end -}}
{{- end -}}

{{- /*
The delegate of an API group (dict "ctx" $ "api" "external"|"custom"), as
JSON {"url", "ca"} ({} when off): delegate.<api>Metrics as given, or with
"auto" the one an earlier release kept in the <adapter>-delegate ConfigMap,
else the Service and CA of the group's v1beta1 APIService when a Service
other than Tidal's owns it.
*/ -}}
{{- define "tidal.delegate" -}}
{{- $ctx := .ctx -}}
{{- $group := printf "%s.metrics.k8s.io" .api -}}
{{- $d := $ctx.Values.delegate | default dict -}}
{{- $v := get $d (printf "%sMetrics" .api) | default "" -}}
{{- $adapter := include "tidal.adapter" $ctx -}}
{{- $out := dict -}}
{{- if eq $v "auto" -}}
{{- $kept := lookup "v1" "ConfigMap" $ctx.Release.Namespace (printf "%s-delegate" $adapter) -}}
{{- if and $kept $kept.data (get $kept.data (printf "%s.url" .api)) -}}
{{- $out = dict "url" (get $kept.data (printf "%s.url" .api)) "ca" (get $kept.data (printf "%s.ca.crt" .api) | default "") -}}
{{- else -}}
{{- $as := lookup "apiregistration.k8s.io/v1" "APIService" "" (printf "v1beta1.%s" $group) -}}
{{- $svc := dict -}}
{{- if and $as $as.spec $as.spec.service -}}{{- $svc = $as.spec.service -}}{{- end -}}
{{- if and $svc.name (not (and (eq $svc.name $adapter) (eq $svc.namespace $ctx.Release.Namespace))) -}}
{{- $out = dict "url" (printf "https://%s.%s.svc:%v" $svc.name $svc.namespace ($svc.port | default 443)) "ca" (($as.spec.caBundle | default "") | b64dec) -}}
{{- end -}}
{{- end -}}
{{- if not $out.url -}}
{{- fail (printf "delegate.%sMetrics=auto found no other server owning the APIService v1beta1.%s (and none kept by an earlier release; helm template cannot look it up): set delegate.%sMetrics to the delegate's https URL, or leave it empty" .api $group .api) -}}
{{- end -}}
{{- else if $v -}}
{{- $out = dict "url" $v "ca" ($d.caBundle | default "") -}}
{{- end -}}
{{- $out | toJson -}}
{{- end -}}
