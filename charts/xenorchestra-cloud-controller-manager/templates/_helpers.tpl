{{/*
Names, labels and the few derived values every template shares.
*/}}

{{/* xoccm.name is the chart name, or nameOverride. */}}
{{- define "xoccm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
xoccm.fullname is the prefix of every resource name: fullnameOverride, else the release name when
it contains the chart name, else <release>-<name>. Kept at 50 characters so that the longest
suffix ("-webhook-tls") still fits in a 63-character name.
*/}}
{{- define "xoccm.fullname" -}}
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

{{/* xoccm.chart is <chart>-<version> for the helm.sh/chart label. */}}
{{- define "xoccm.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* xoccm.selectorLabels select the pods; they never change across upgrades. */}}
{{- define "xoccm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "xoccm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* xoccm.labels go on every object. */}}
{{- define "xoccm.labels" -}}
helm.sh/chart: {{ include "xoccm.chart" . }}
{{ include "xoccm.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: xenorchestra-cloud-controller-manager
{{- end -}}

{{/* xoccm.serviceAccountName is the ServiceAccount the pods run as. */}}
{{- define "xoccm.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "xoccm.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* xoccm.image is repository:tag, or repository@digest when a digest is set. */}}
{{- define "xoccm.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
xoccm.leaseName is the leader-election Lease of the binary (cmd/app.LeaseName); the Role narrows
get and update to it.
*/}}
{{- define "xoccm.leaseName" -}}
xenorchestra-cloud-controller-manager
{{- end -}}

{{/* xoccm.webhookServiceName is the Service the API server calls the webhook through. */}}
{{- define "xoccm.webhookServiceName" -}}
{{- printf "%s-webhook" (include "xoccm.fullname" .) -}}
{{- end -}}

{{/* xoccm.metricsServiceName is the Service Prometheus scrapes. */}}
{{- define "xoccm.metricsServiceName" -}}
{{- printf "%s-metrics" (include "xoccm.fullname" .) -}}
{{- end -}}

{{/* xoccm.webhookCertificateName is the serving Certificate named by inject-ca-from. */}}
{{- define "xoccm.webhookCertificateName" -}}
{{- printf "%s-webhook" (include "xoccm.fullname" .) -}}
{{- end -}}

{{/* xoccm.webhookCertSecretName is the Secret of the serving certificate, mounted as the cert dir. */}}
{{- define "xoccm.webhookCertSecretName" -}}
{{- printf "%s-webhook-tls" (include "xoccm.fullname" .) -}}
{{- end -}}

{{/* xoccm.caName names the chart's self-signed CA: its Certificate, Secret and CA Issuer. */}}
{{- define "xoccm.caName" -}}
{{- printf "%s-ca" (include "xoccm.fullname" .) -}}
{{- end -}}

{{/* xoccm.selfSignedIssuerName is the Issuer that signs the chart's CA. */}}
{{- define "xoccm.selfSignedIssuerName" -}}
{{- printf "%s-selfsigned" (include "xoccm.fullname" .) -}}
{{- end -}}

{{/* xoccm.configSecretName is the Secret holding the XO configuration, or "" when there is none. */}}
{{- define "xoccm.configSecretName" -}}
{{- if .Values.config -}}
{{- printf "%s-config" (include "xoccm.fullname" .) -}}
{{- else if .Values.existingConfigSecret -}}
{{- .Values.existingConfigSecret -}}
{{- end -}}
{{- end -}}

{{/* xoccm.configKey is the Secret key of the configuration file. */}}
{{- define "xoccm.configKey" -}}
{{- if .Values.config -}}
config.yaml
{{- else -}}
{{- .Values.existingConfigSecretKey -}}
{{- end -}}
{{- end -}}

{{/* Mount points inside the container. certDir is the binary's --webhook-cert-dir default. */}}
{{- define "xoccm.configDir" -}}
/etc/xenorchestra-cloud-controller-manager/config
{{- end -}}
{{- define "xoccm.certDir" -}}
/etc/xenorchestra-cloud-controller-manager/tls
{{- end -}}

{{/*
xoccm.validate fails the render on combinations that cannot work, with a message saying what to
change. Included once, from the Deployment.
*/}}
{{- define "xoccm.validate" -}}
{{- if and .Values.config .Values.existingConfigSecret -}}
{{- fail "set either config or existingConfigSecret, not both" -}}
{{- end -}}
{{- range .Values.extraEnv -}}
{{- if and (eq .name "XOA_TOKEN" "XOA_PASSWORD") (hasKey . "value") -}}
{{- fail (printf "extraEnv %s has a plain value: take it from a Secret with valueFrom.secretKeyRef (or put token in config)" .name) -}}
{{- end -}}
{{- end -}}
{{- range .Values.extraArgs -}}
{{- if regexMatch "^--?(config|webhook|webhook-port|webhook-cert-dir|metrics-bind-address|health-probe-bind-address|leader-elect|leader-elect-namespace)(=|$)" . -}}
{{- fail (printf "extraArgs: %s is set by the chart; use the matching value instead" .) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.webhook.enabled .Values.metrics.enabled (eq (int .Values.webhook.port) (int .Values.metrics.port)) -}}
{{- fail "webhook.port and metrics.port must differ" -}}
{{- end -}}
{{- $pdb := .Values.podDisruptionBudget -}}
{{- if and $pdb.enabled (gt (int .Values.replicaCount) 1) (not (kindIs "string" $pdb.minAvailable)) (ge (int $pdb.minAvailable) (int .Values.replicaCount)) -}}
{{- fail "podDisruptionBudget.minAvailable must be less than replicaCount, or no node running a replica could ever be drained" -}}
{{- end -}}
{{- $hp := int .Values.healthProbe.port -}}
{{- if or (and .Values.webhook.enabled (eq $hp (int .Values.webhook.port))) (and .Values.metrics.enabled (eq $hp (int .Values.metrics.port))) -}}
{{- fail "healthProbe.port must differ from webhook.port and metrics.port" -}}
{{- end -}}
{{- end -}}
