{{- /* Checks across values that values.schema.json cannot explain well. */ -}}
{{- define "tidal.validate" -}}
{{- $p := .Values.prometheus -}}
{{- if not (or .Values.apiServices.custom .Values.apiServices.external .Values.apiServices.resource) -}}
{{- fail "apiServices: enable at least one of custom, external and resource; the adapter would serve nothing" -}}
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
{{- if and .Values.rules.existingConfigMap (or .Values.rules.custom .Values.rules.external .Values.rules.resource) -}}
{{- fail "rules: rules.custom, rules.external and rules.resource have no effect with rules.existingConfigMap: put them in that ConfigMap" -}}
{{- end -}}
{{- if and (eq .Values.tls.mode "certManager") .Values.tls.certManager.issuerRef .Values.tls.certManager.issuerRef.kind (not .Values.tls.certManager.issuerRef.name) -}}
{{- fail "tls.certManager.issuerRef: name is required when issuerRef is set" -}}
{{- end -}}
{{- end -}}
