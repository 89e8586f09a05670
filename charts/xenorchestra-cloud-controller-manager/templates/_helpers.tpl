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
{{- if eq (include "xoccm.certMode" .) "existingSecret" -}}
{{- .Values.webhook.certificates.existingSecret.name -}}
{{- else -}}
{{- printf "%s-webhook-tls" (include "xoccm.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* xoccm.selfManagedCASecretName is the Secret of the CA with webhook.certificates.mode selfManaged. */}}
{{- define "xoccm.selfManagedCASecretName" -}}
{{- printf "%s-webhook-ca" (include "xoccm.fullname" .) -}}
{{- end -}}

{{/* xoccm.certMode is webhook.certificates.mode. */}}
{{- define "xoccm.certMode" -}}
{{- .Values.webhook.certificates.mode -}}
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
xoccm.hostNetwork is "true" when hostNetwork or its upstream alias useHostNetwork is set.
*/}}
{{- define "xoccm.hostNetwork" -}}
{{- if or .Values.hostNetwork .Values.useHostNetwork }}true{{ else }}false{{ end -}}
{{- end -}}

{{/*
xoccm.controllers is the --controllers value: controllers, or the upstream alias
enabledControllers when it is set (xoccm.validate refuses both at once).
*/}}
{{- define "xoccm.controllers" -}}
{{- if kindIs "slice" .Values.enabledControllers -}}
{{- join "," .Values.enabledControllers -}}
{{- else -}}
{{- join "," .Values.controllers -}}
{{- end -}}
{{- end -}}

{{/*
xoccm.verbosity is the klog verbosity of the upstream chart, or "" when none is given: the last
--v=N of extraArgs, else logVerbosityLevel (upstream passed --v=logVerbosityLevel first, then
extraArgs, and klog keeps the last).
*/}}
{{- define "xoccm.verbosity" -}}
{{- $v := "" -}}
{{- if not (kindIs "invalid" .Values.logVerbosityLevel) -}}
{{- $v = int .Values.logVerbosityLevel | toString -}}
{{- end -}}
{{- range .Values.extraArgs -}}
{{- if regexMatch "^--?v=[0-9]+$" . -}}
{{- $v = regexReplaceAll "^--?v=" . "" -}}
{{- end -}}
{{- end -}}
{{- $v -}}
{{- end -}}

{{/*
xoccm.logLevel is the --zap-log-level value: logLevel, or the upstream klog verbosity translated.
The binary logs at two levels, info (klog 0 to 2: steady-state messages) and debug (klog 3 and
more: every resolution and patch).
*/}}
{{- define "xoccm.logLevel" -}}
{{- $v := include "xoccm.verbosity" . -}}
{{- if eq $v "" -}}
{{- .Values.logLevel -}}
{{- else if ge (int $v) 3 -}}
debug
{{- else -}}
info
{{- end -}}
{{- end -}}

{{/*
xoccm.extraArgs is extraArgs without the upstream --v=N flags, which xoccm.logLevel translates.
Rendered as a YAML list.
*/}}
{{- define "xoccm.extraArgs" -}}
{{- $out := list -}}
{{- range .Values.extraArgs -}}
{{- if not (regexMatch "^--?v=[0-9]+$" .) -}}
{{- $out = append $out . -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* xoccm.env is extraEnv followed by its upstream alias extraEnvs, as a YAML list. */}}
{{- define "xoccm.env" -}}
{{- concat (.Values.extraEnv | default list) (.Values.extraEnvs | default list) | toYaml -}}
{{- end -}}

{{/*
xoccm.tolerations is tolerations, plus node.kubernetes.io/not-ready:NoSchedule with the host
network. On a new cluster every Node is NotReady until a CNI runs, and the CNI often waits for
initialized Nodes: only a pod in the host network can run before it (a pod-network pod gets no
IP), so with hostNetwork the controller must tolerate not-ready to break that cycle. Rendered as
a YAML list.
*/}}
{{- define "xoccm.tolerations" -}}
{{- $out := .Values.tolerations | default list -}}
{{- if eq (include "xoccm.hostNetwork" .) "true" -}}
{{- $has := false -}}
{{- range $out -}}
{{- if and (eq (.key | default "") "node.kubernetes.io/not-ready") (has (.effect | default "") (list "" "NoSchedule")) -}}
{{- $has = true -}}
{{- end -}}
{{- end -}}
{{- if not $has -}}
{{- $out = append $out (dict "key" "node.kubernetes.io/not-ready" "operator" "Exists" "effect" "NoSchedule") -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/*
xoccm.tokensDir is where the Secrets named by config.clusters[].tokenSecretRef are mounted, one
folder per Secret.
*/}}
{{- define "xoccm.tokensDir" -}}
/etc/xenorchestra-cloud-controller-manager/xo-tokens
{{- end -}}

{{/*
xoccm.config renders .Values.config for the config Secret. In the clusters list form every token
comes from a Secret: an entry's tokenSecretRef {name, key} becomes a tokenFile in the mounted
Secret (refused beside a tokenFile of the entry's own), and a plain token in an entry is refused
(the single-server form keeps token for compatibility with the upstream chart).
*/}}
{{- define "xoccm.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) -}}
{{- if hasKey $cfg "clusters" -}}
{{- $clusters := list -}}
{{- range $i, $c := $cfg.clusters -}}
{{- if hasKey $c "token" -}}
{{- fail (printf "config.clusters[%d].token: keep XO tokens out of values: put it in a Secret and set config.clusters[%d].tokenSecretRef {name, key}" $i $i) -}}
{{- end -}}
{{- if and $c.tokenSecretRef $c.tokenFile -}}
{{- fail (printf "config.clusters[%d]: set tokenFile or tokenSecretRef, not both (tokenSecretRef becomes the entry's tokenFile)" $i) -}}
{{- end -}}
{{- $entry := omit $c "tokenSecretRef" -}}
{{- with $c.tokenSecretRef -}}
{{- if or (not .name) (not .key) -}}
{{- fail (printf "config.clusters[%d].tokenSecretRef: name and key are both required" $i) -}}
{{- end -}}
{{- $_ := set $entry "tokenFile" (printf "%s/%s/%s" (include "xoccm.tokensDir" $) .name .key) -}}
{{- end -}}
{{- $clusters = append $clusters $entry -}}
{{- end -}}
{{- $_ := set $cfg "clusters" $clusters -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* xoccm.tokenSecrets lists, once each, the Secrets named by config.clusters[].tokenSecretRef. */}}
{{- define "xoccm.tokenSecrets" -}}
{{- $names := list -}}
{{- range ((.Values.config | default dict).clusters | default list) -}}
{{- with .tokenSecretRef }}{{ $names = append $names .name }}{{ end -}}
{{- end -}}
{{- $names | uniq | toJson -}}
{{- end -}}
