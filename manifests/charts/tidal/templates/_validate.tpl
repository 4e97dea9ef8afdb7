{{- /* Checks across values that values.schema.json cannot explain well. */ -}}
{{- define "tidal.validate" -}}
{{- $p := .Values.prometheus -}}
{{- $apis := list -}}
{{- range $api := list "custom" "external" "resource" -}}
{{- if eq (include "tidal.apiEnabled" (dict "ctx" $ "api" $api)) "true" }}{{ $apis = append $apis $api }}{{ end -}}
{{- end -}}
{{- if not $apis -}}
{{- fail "apiServices: enable at least one of custom, external and resource (or give rules that need one); the adapter would serve nothing" -}}
{{- end -}}
{{- if and $p.basicAuth.existingSecret $p.bearerToken.existingSecret -}}
{{- fail "prometheus: set either basicAuth.existingSecret or bearerToken.existingSecret, not both" -}}
{{- end -}}
{{- if and $p.basicAuth.existingSecret $p.httpConfig.existingSecret -}}
{{- fail "prometheus: basicAuth.existingSecret and httpConfig.existingSecret both configure the HTTP client file: put basic_auth in your httpConfig file instead" -}}
{{- end -}}
{{- if and $p.ca.existingSecret $p.ca.existingConfigMap -}}
{{- fail "prometheus.ca: set either existingSecret or existingConfigMap, not both" -}}
{{- end -}}
{{- if and .Values.rules.existing .Values.rules.existingConfigMap (ne .Values.rules.existing .Values.rules.existingConfigMap) -}}
{{- fail "rules: rules.existing (prometheus-adapter's name) and rules.existingConfigMap name different ConfigMaps: set one" -}}
{{- end -}}
{{- if and (include "tidal.existingRules" .) (or .Values.rules.custom .Values.rules.external .Values.rules.resource .Values.rules.backends) -}}
{{- fail "rules: rules.custom, rules.external, rules.resource and rules.backends have no effect with rules.existing or rules.existingConfigMap: put them in that ConfigMap (and allow its backends' ports with networkPolicy.extraEgress)" -}}
{{- end -}}
{{- /* prometheus-adapter chart values: TLS. */ -}}
{{- $cmEnabled := and .Values.certManager .Values.certManager.enabled -}}
{{- if .Values.tls.enable -}}
{{- if ne .Values.tls.mode "selfSigned" -}}
{{- fail (printf "tls: tls.enable (prometheus-adapter's certificate as values) and tls.mode=%s both say where the serving certificate comes from: set one" .Values.tls.mode) -}}
{{- end -}}
{{- if $cmEnabled -}}
{{- fail "tls: tls.enable and certManager.enabled both say where the serving certificate comes from: set one" -}}
{{- end -}}
{{- range $k := list "ca" "certificate" "key" -}}
{{- if not (regexMatch "-----BEGIN [A-Z ]+-----" (toString (get $.Values.tls $k))) -}}
{{- fail (printf "tls.%s: with tls.enable it must hold a PEM block (-----BEGIN ...)" $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and $cmEnabled (eq .Values.tls.mode "existingSecret") -}}
{{- fail "tls: certManager.enabled (prometheus-adapter's name for tls.mode=certManager) and tls.mode=existingSecret: set one" -}}
{{- end -}}
{{- /* prometheus-adapter chart values: the Prometheus URL. */ -}}
{{- if and $p.port (regexMatch "^https?://[^/]*:[0-9]+(/|$)" (tpl $p.url .)) -}}
{{- fail (printf "prometheus: url %q has a port and prometheus.port (%v) adds another: set the port in one of them" $p.url $p.port) -}}
{{- end -}}
{{- if not (regexMatch "^https?://[^/?#\\s]+(/[^\\s]*)?$" (include "tidal.prometheusURL" .)) -}}
{{- fail (printf "prometheus: %q (url, port and path) is not an http(s) URL, e.g. http://prometheus.monitoring.svc:9090" (include "tidal.prometheusURL" .)) -}}
{{- end -}}
{{- /* prometheus-adapter chart values Tidal's chart cannot honour: refused rather than ignored. */ -}}
{{- if and .Values.hostNetwork .Values.hostNetwork.enabled -}}
{{- fail "hostNetwork.enabled: prometheus-adapter's value, which would keep the adapter on listenPort (6443, kube-apiserver's on control-plane nodes): set adapter.hostNetwork.enabled and adapter.hostNetwork.securePort instead (docs/chart.md)" -}}
{{- end -}}
{{- range $k := list "extraVolumes" "extraVolumeMounts" "env" -}}
{{- if get $.Values $k -}}
{{- fail (printf "%s: Tidal's chart mounts Prometheus credentials from prometheus.bearerToken, .ca, .clientCert, .basicAuth and .httpConfig Secrets instead; move them there (see docs/migration.md), and anything else to adapter.extraVolumes, adapter.extraVolumeMounts or adapter.extraEnv" $k) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.rbac (eq (toString .Values.rbac.create) "false") -}}
{{- fail "rbac.create=false: Tidal's chart always creates the adapter's RBAC; remove the value" -}}
{{- end -}}
{{- if and .Values.serviceAccount (or (eq (toString .Values.serviceAccount.create) "false") .Values.serviceAccount.name) -}}
{{- fail "serviceAccount.create/name: Tidal's chart always creates its own service accounts (<fullname>-adapter, <fullname>-autoscaler); remove the value" -}}
{{- end -}}
{{- if and .Values.psp .Values.psp.create -}}
{{- fail "psp.create: PodSecurityPolicy is gone from Kubernetes; remove the value" -}}
{{- end -}}
{{- if and (eq (include "tidal.tlsMode" .) "certManager") .Values.tls.certManager.issuerRef .Values.tls.certManager.issuerRef.kind (not .Values.tls.certManager.issuerRef.name) -}}
{{- fail "tls.certManager.issuerRef: name is required when issuerRef is set" -}}
{{- end -}}
{{- /* Never a silent takeover: an APIService this release would register
that another server's Service owns stops the install, unless it is
external.metrics.k8s.io shared with that server (delegate.*). Helm refuses
objects of other releases anyway; this also names objects applied without
Helm, and says what to do. helm template cannot look up: nothing to check. */ -}}
{{- if ne (toString .Values.apiServices.register) "false" -}}
{{- $adapter := include "tidal.adapter" . -}}
{{- $shares := dict "external.metrics.k8s.io" (include "tidal.delegate" (dict "ctx" . "api" "external") | fromJson).url "custom.metrics.k8s.io" (include "tidal.delegate" (dict "ctx" . "api" "custom") | fromJson).url -}}
{{- range $api := include "tidal.apiServices" . | fromJsonArray -}}
{{- $name := printf "%s.%s" (index $api 1) (index $api 0) -}}
{{- $as := lookup "apiregistration.k8s.io/v1" "APIService" "" $name -}}
{{- if and $as $as.spec $as.spec.service -}}
{{- $svc := $as.spec.service -}}
{{- $ours := and (eq $svc.name $adapter) (eq $svc.namespace $.Release.Namespace) -}}
{{- $shared := get $shares (index $api 0) -}}
{{- if not (or $ours $shared) -}}
{{- $api := get (dict "custom.metrics.k8s.io" "custom" "external.metrics.k8s.io" "external" "metrics.k8s.io" "resource") (index $api 0) -}}
{{- $share := ternary "" (printf ", delegate.%sMetrics=auto to share the group with it" $api) (eq $api "resource") -}}
{{- fail (printf "APIService %s is served by %s/%s, not by this release's adapter: set apiServices.register=false and follow docs/migration.md to replace that server without a gap%s, or turn this API off (apiServices.%s=false)" $name $svc.namespace $svc.name $share $api) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
