{{/*
Names and derived values of the metrics endpoint, its alerts and its dashboard.
*/}}

{{/*
xoccm.metricsCertificate is the certificate the metrics endpoint serves: webhook or selfSigned
(metrics.certificate with auto resolved), "" with insecureHTTP.
*/}}
{{- define "xoccm.metricsCertificate" -}}
{{- if not .Values.metrics.insecureHTTP -}}
{{- $c := .Values.metrics.certificate -}}
{{- if eq $c "auto" -}}
{{- ternary "webhook" "selfSigned" .Values.webhook.enabled -}}
{{- else -}}
{{- $c -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* xoccm.metricsSecure is "true" when the metrics endpoint is served, over HTTPS. */}}
{{- define "xoccm.metricsSecure" -}}
{{- if and .Values.metrics.enabled (not .Values.metrics.insecureHTTP) }}true{{ end -}}
{{- end -}}

{{/*
xoccm.metricsCAConfigMapName holds the webhook's CA for the ServiceMonitor with
webhook.certificates.mode existingSecret, whose CA is only in values (caBundle).
*/}}
{{- define "xoccm.metricsCAConfigMapName" -}}
{{- printf "%s-metrics-ca" (include "xoccm.fullname" .) -}}
{{- end -}}

{{/* xoccm.metricsReaderRoleName is the ClusterRole granting get on /metrics. */}}
{{- define "xoccm.metricsReaderRoleName" -}}
{{- printf "%s-metrics-reader" (include "xoccm.fullname" .) -}}
{{- end -}}

{{/*
xoccm.metricsSelector is the PromQL label matchers of the controller's series: the labels a
ServiceMonitor of the metrics Service gives them, or prometheusRule.selector.
*/}}
{{- define "xoccm.metricsSelector" -}}
{{- .Values.prometheusRule.selector | default (printf "job=%q,namespace=%q" (include "xoccm.metricsServiceName" .) .Release.Namespace) -}}
{{- end -}}
