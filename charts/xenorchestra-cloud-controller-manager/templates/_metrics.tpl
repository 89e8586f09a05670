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

{{/* xoccm.validateMetrics fails the render on metrics values that cannot work together. */}}
{{- define "xoccm.validateMetrics" -}}
{{- if and .Values.metrics.insecureHTTP (ne .Values.metrics.certificate "auto") -}}
{{- fail (printf "metrics.certificate %s: metrics.insecureHTTP serves no certificate; remove one of them" .Values.metrics.certificate) -}}
{{- end -}}
{{- if and .Values.metrics.insecureHTTP (has "--profiling" .Values.extraArgs) -}}
{{- fail "extraArgs --profiling: the profiles are served only behind the metrics endpoint's authentication, which metrics.insecureHTTP turns off; remove one of them" -}}
{{- end -}}
{{- if and (eq .Values.metrics.certificate "webhook") (not .Values.webhook.enabled) -}}
{{- fail "metrics.certificate webhook: webhook.enabled is false, so there is no webhook certificate to serve; use selfSigned or auto" -}}
{{- end -}}
{{- $names := list -}}
{{- range include "xoccm.alertRules" . | fromYamlArray }}{{ $names = append $names .alert }}{{ end -}}
{{- range $name, $_ := .Values.prometheusRule.alerts -}}
{{- if not (has $name $names) -}}
{{- fail (printf "prometheusRule.alerts.%s: no such alert; the chart's alerts are %s" $name (join ", " $names)) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.prometheusRule.enabled (not .Values.metrics.enabled) -}}
{{- fail "prometheusRule.enabled needs metrics.enabled: the alerts read the controller's metrics" -}}
{{- end -}}
{{- end -}}
