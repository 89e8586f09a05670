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
xoccm.chartFlags maps each flag the chart sets from values to the value to use instead: such a
flag in extraArgs would be given twice, and the binary keeps the last one silently.
*/}}
{{- define "xoccm.chartFlags" -}}
config: config or existingConfigSecret
controllers: controllers
webhook: webhook.enabled
webhook-port: webhook.port
webhook-cert-dir: nothing (the serving certificate's Secret is mounted there)
webhook-certs: webhook.certificates.mode
webhook-ca-secret: nothing (with webhook.certificates.mode selfManaged the CA is in the Secret <fullname>-webhook-ca)
webhook-dns-names: nothing (the webhook Service's names)
webhook-configuration: nothing (the chart's MutatingWebhookConfiguration)
webhook-ca-duration: webhook.certificates.selfManaged.caDuration
webhook-cert-duration: webhook.certificates.selfManaged.certDuration
webhook-lookup-timeout: webhook.lookupTimeout
webhook-initialize: webhook.initialize
metrics-bind-address: metrics.enabled and metrics.port
health-probe-bind-address: healthProbe.port
leader-elect: nothing (leader election is always on, so that replicas never act at once)
leader-elect-namespace: nothing (the Lease is in the release namespace, where the chart's Role grants it)
kube-api-qps: kubeAPI.qps
kube-api-burst: kubeAPI.burst
workers: workers
shutdown-delay: shutdownDelay
zap-log-level: logLevel
{{- end -}}

{{/*
xoccm.upstreamFlags maps flags of the upstream controller (vatesfr/xenorchestra-cloud-controller-manager,
a k8s.io/cloud-provider binary) that this binary does not have to what to do instead; passed
through, any of them would stop the binary at start-up. --v=N is translated (xoccm.logLevel).
*/}}
{{- define "xoccm.upstreamFlags" -}}
v: use logLevel (--v=N with a number is translated to it)
cloud-provider: remove it (this binary serves Xen Orchestra only)
cloud-config: use config or existingConfigSecret (the chart passes --config)
use-service-account-credentials: remove it (the controllers act as the chart's ServiceAccount)
secure-port: use healthProbe.port and metrics.port (plain HTTP here)
bind-address: use healthProbe.port and metrics.port (plain HTTP here)
authorization-always-allow-paths: remove it (probes and metrics need no authorization here)
authentication-skip-lookup: remove it (probes and metrics need no authentication here)
authentication-kubeconfig: remove it (probes and metrics need no authentication here)
authorization-kubeconfig: remove it (probes and metrics need no authorization here)
leader-elect-resource-name: remove it (the Lease is xenorchestra-cloud-controller-manager in the release namespace)
leader-elect-resource-namespace: remove it (the Lease is in the release namespace)
leader-elect-resource-lock: remove it (the lock is always a Lease)
cluster-name: remove it (no meaning here)
node-status-update-frequency: remove it (Nodes follow XO events; XO is relisted every inventory.resyncPeriod in config)
node-monitor-period: remove it (Nodes follow XO events; XO is relisted every inventory.resyncPeriod in config)
concurrent-node-syncs: use workers
configure-cloud-routes: remove it (no route controller here)
allocate-node-cidrs: remove it (no route controller here)
cluster-cidr: remove it (no route controller here)
{{- end -}}

{{/*
xoccm.passFlags are the binary's flags extraArgs may pass (cmd/app.Options.AddFlags and
controller-runtime's --kubeconfig, less the chart's own and those that exit at once); any other
flag would stop the binary at start-up. charts/values_test.go keeps the three lists and the
binary's flags in step.
*/}}
{{- define "xoccm.passFlags" -}}
- webhook-host
- profiling
- leader-elect-lease-duration
- leader-elect-renew-deadline
- leader-elect-retry-period
- zap-devel
- zap-encoder
- zap-stacktrace-level
- zap-time-encoding
- kubeconfig
{{- end -}}

{{/*
xoccm.seconds is the duration .value (a Go duration string: numbers with units h, m, s, ms, us,
ns, several as in 1h30m, or 0) in seconds, as a float; it fails the render naming .key when the
value is not one. The binary parses the same strings with time.ParseDuration.
*/}}
{{- define "xoccm.seconds" -}}
{{- $v := toString .value -}}
{{- if not (regexMatch "^-?(([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|ms|s|m|h))+$|^0$" $v) -}}
{{- fail (printf "%s %q is not a duration: numbers with units (h, m, s, ms), e.g. 90s, 168h or 1h30m" .key $v) -}}
{{- end -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|ms|s|m|h)" $v -1 -}}
{{- $unit := regexReplaceAll "^[0-9.]+" . "" -}}
{{- $total = addf $total (mulf (trimSuffix $unit . | float64) (get (dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0) $unit)) -}}
{{- end -}}
{{- if hasPrefix "-" $v }}{{ $total = mulf $total -1.0 }}{{ end -}}
{{- $total -}}
{{- end -}}

{{/*
xoccm.singleKeys are the config keys of the single-server form, which config.clusters replaces
(config/load.go's singleKeys).
*/}}
{{- define "xoccm.singleKeys" -}}
- enabled
- name
- url
- insecure
- token
- tokenFile
- caFile
- caBundle
- region
- pools
{{- end -}}

{{/*
xoccm.validate fails the render on combinations that cannot work, and on upstream values that
have no meaning here, with a message saying what to change. Included once, from the Deployment.
*/}}
{{- define "xoccm.validate" -}}
{{- if not .Values.image.repository -}}
{{- fail "image.repository is empty: remove it to use the default (ghcr.io/xenorchestra-k8s/xenorchestra-cloud-controller-manager), or set your mirror of that image" -}}
{{- end -}}
{{- $config := .Values.config | default dict -}}
{{- $clusters := hasKey $config "clusters" -}}
{{- range list "username" "password" -}}
{{- if hasKey $config . -}}
{{- fail (printf "config.%s: the controller authenticates with an XO authentication token, not a user and password: create one (xo-cli create-token <xo-url> <user>, or in XO's web UI) and set config.token (or config.clusters[].tokenSecretRef)" .) -}}
{{- end -}}
{{- end -}}
{{- if $clusters -}}
{{- $on := false -}}
{{- range $config.clusters }}{{ if or (not (hasKey . "enabled")) .enabled }}{{ $on = true }}{{ end }}{{ end -}}
{{- if and $config.clusters (not $on) -}}
{{- fail "config.clusters: every entry has enabled: false: enable at least one (to stop the controller, scale it to 0 with replicaCount)" -}}
{{- end -}}
{{- else if and (hasKey $config "enabled") (not $config.enabled) -}}
{{- fail "config.enabled: false switches off the only XO server, and the controller would do nothing: to stop it, scale it to 0 (replicaCount)" -}}
{{- end -}}
{{- if hasKey $config "clientTimeout" -}}
{{- fail "config.clientTimeout is the upstream controller's name for config.requestTimeout: rename it" -}}
{{- end -}}
{{- if and (hasKey $config "tokenSecretRef") (not $clusters) -}}
{{- fail "config.tokenSecretRef is for config.clusters entries: in the single-server form, put the token in config.token, in existingConfigSecret, or in XOA_TOKEN from a Secret (extraEnv with valueFrom.secretKeyRef)" -}}
{{- end -}}
{{- if and .Values.config .Values.existingConfigSecret -}}
{{- fail "set either config or existingConfigSecret, not both" -}}
{{- end -}}
{{- range $list := list "extraEnv" "extraEnvs" -}}
{{- range (get $.Values $list | default list) -}}
{{- if eq .name "XOA_USER" "XOA_PASSWORD" -}}
{{- fail (printf "%s %s: the controller authenticates with an XO authentication token, not a user and password: create one (xo-cli create-token <xo-url> <user>, or in XO's web UI) and set config.token, config.clusters[].tokenSecretRef or XOA_TOKEN from a Secret" $list .name) -}}
{{- end -}}
{{- if and $clusters (eq .name "XOA_URL" "XOA_TOKEN" "XOA_INSECURE") -}}
{{- fail (printf "%s %s applies to the single-server form only: with config.clusters, set each entry's url, insecure and tokenSecretRef" $list .name) -}}
{{- end -}}
{{- if and (eq .name "XOA_TOKEN") (hasKey . "value") -}}
{{- fail (printf "%s %s has a plain value: take it from a Secret with valueFrom.secretKeyRef (or put token in config)" $list .name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $clusters -}}
{{- range include "xoccm.singleKeys" . | fromYamlArray -}}
{{- if hasKey $config . -}}
{{- fail (printf "config.%s belongs to the single-server form: with config.clusters, set it in each entry" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $le := dict "lease-duration" "15s" "renew-deadline" "10s" "retry-period" "2s" -}}
{{- range .Values.extraArgs -}}
{{- $m := regexFind "^--?leader-elect-(lease-duration|renew-deadline|retry-period)=.*$" . -}}
{{- if $m -}}
{{- $_ := set $le (regexReplaceAll "^--?leader-elect-([a-z-]+)=.*$" $m "${1}") (regexReplaceAll "^[^=]*=" $m "") -}}
{{- end -}}
{{- end -}}
{{- $lease := include "xoccm.seconds" (dict "key" "extraArgs --leader-elect-lease-duration" "value" (get $le "lease-duration")) | float64 -}}
{{- $renew := include "xoccm.seconds" (dict "key" "extraArgs --leader-elect-renew-deadline" "value" (get $le "renew-deadline")) | float64 -}}
{{- $retry := include "xoccm.seconds" (dict "key" "extraArgs --leader-elect-retry-period" "value" (get $le "retry-period")) | float64 -}}
{{- if not (and (gt $retry 0.0) (lt $retry $renew) (lt $renew $lease)) -}}
{{- fail (printf "extraArgs: want 0 < --leader-elect-retry-period (%s) < --leader-elect-renew-deadline (%s) < --leader-elect-lease-duration (%s)" (get $le "retry-period") (get $le "renew-deadline") (get $le "lease-duration")) -}}
{{- end -}}
{{- if and (has "*" .Values.controllers) (gt (len .Values.controllers) 1) -}}
{{- fail (printf "controllers %s: \"*\" stands for every controller and goes alone" (toJson .Values.controllers)) -}}
{{- end -}}
{{- if and .Values.webhook.enabled (eq (include "xoccm.certMode" .) "selfManaged") -}}
{{- $sm := .Values.webhook.certificates.selfManaged -}}
{{- $ca := include "xoccm.seconds" (dict "key" "webhook.certificates.selfManaged.caDuration" "value" $sm.caDuration) | float64 -}}
{{- $cert := include "xoccm.seconds" (dict "key" "webhook.certificates.selfManaged.certDuration" "value" $sm.certDuration) | float64 -}}
{{- if le $ca 0.0 -}}
{{- fail (printf "webhook.certificates.selfManaged.caDuration %s must be positive" (toString $sm.caDuration)) -}}
{{- end -}}
{{- if not (and (gt $cert 0.0) (lt $cert $ca)) -}}
{{- fail (printf "webhook.certificates.selfManaged.certDuration %s must be positive and shorter than caDuration (%s): a serving certificate cannot outlive the CA that signs it" (toString $sm.certDuration) (toString $sm.caDuration)) -}}
{{- end -}}
{{- end -}}
{{- $chartFlags := include "xoccm.chartFlags" . | fromYaml -}}
{{- $upstreamFlags := include "xoccm.upstreamFlags" . | fromYaml -}}
{{- $passFlags := include "xoccm.passFlags" . | fromYamlArray -}}
{{- range .Values.extraArgs -}}
{{- $name := regexReplaceAll "^--?([^=]*)(=.*)?$" . "${1}" -}}
{{- if regexMatch "^--?v=[0-9]+$" . -}}
{{- else if hasKey $chartFlags $name -}}
{{- fail (printf "extraArgs: %s is set by the chart; use %s instead" . (get $chartFlags $name)) -}}
{{- else if hasKey $upstreamFlags $name -}}
{{- fail (printf "extraArgs: %s is a flag of the upstream controller, not of this one: %s" . (get $upstreamFlags $name)) -}}
{{- else if has $name (list "check-config" "version" "help" "h") -}}
{{- fail (printf "extraArgs: %s makes the binary exit at once, so the pod would restart forever" .) -}}
{{- else if not (has $name $passFlags) -}}
{{- fail (printf "extraArgs: %s is not a flag of this binary, which would stop at start-up (a flag and its value are one item: --flag=value); flags: docs/configuration.md#flags" .) -}}
{{- end -}}
{{- end -}}
{{- if and (include "xoccm.verbosity" .) (ne (toString .Values.logLevel) "info") -}}
{{- fail "set logLevel, or the upstream logVerbosityLevel (or --v in extraArgs), not both" -}}
{{- end -}}
{{- if and (kindIs "slice" .Values.enabledControllers) (ne (join "," .Values.controllers) "*") (ne (join "," .Values.controllers) (join "," .Values.enabledControllers)) -}}
{{- fail "set controllers, or its upstream alias enabledControllers, not both" -}}
{{- end -}}
{{- if and (eq (include "xoccm.controllers" .) "") (not .Values.webhook.enabled) -}}
{{- fail "controllers is empty and webhook.enabled is false: the pods would run nothing" -}}
{{- end -}}
{{- if .Values.useDaemonSet -}}
{{- fail "useDaemonSet: this chart deploys a Deployment only (the controllers run on the Lease holder, the webhook on every replica); remove useDaemonSet and set replicaCount (2 or more), with nodeSelector and hostNetwork to place the pods as a DaemonSet did" -}}
{{- end -}}
{{- if and (not (kindIs "invalid" .Values.existingConfigSecretPath)) (not (has .Values.existingConfigSecretPath (list "config.yaml" .Values.existingConfigSecretKey))) -}}
{{- fail "existingConfigSecretPath: remove it; the whole Secret is mounted and the file keeps its key's name (existingConfigSecretKey)" -}}
{{- end -}}
{{- if regexMatch "(^|/)vatesfr/xenorchestra-cloud-controller-manager$" .Values.image.repository -}}
{{- fail (printf "image.repository %s is the upstream controller's image, which does not understand this chart's flags: remove image.repository (default ghcr.io/xenorchestra-k8s/xenorchestra-cloud-controller-manager)" .Values.image.repository) -}}
{{- end -}}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.enabled) -}}
{{- fail "metrics.serviceMonitor.enabled needs metrics.enabled: there would be no metrics Service to scrape" -}}
{{- end -}}
{{- if and .Values.certManager.issuerRef (ne (include "xoccm.certMode" .) "certManager") -}}
{{- fail (printf "certManager.issuerRef is set but webhook.certificates.mode is %s: cert-manager issues nothing in that mode; remove issuerRef or use mode certManager" (include "xoccm.certMode" .)) -}}
{{- end -}}
{{- if and .Values.webhook.enabled .Values.metrics.enabled (eq (int .Values.webhook.port) (int .Values.metrics.port)) -}}
{{- fail "webhook.port and metrics.port must differ" -}}
{{- end -}}
{{- $pdb := .Values.podDisruptionBudget -}}
{{- $replicas := int .Values.replicaCount -}}
{{- if and $pdb.enabled (gt $replicas 1) -}}
{{- $min := toString $pdb.minAvailable -}}
{{- if hasSuffix "%" $min -}}
{{- /* Kubernetes rounds a minAvailable percentage up: ceil(percent * replicas / 100). */ -}}
{{- $need := div (add (mul (trimSuffix "%" $min | int) $replicas) 99) 100 -}}
{{- if ge $need $replicas -}}
{{- fail (printf "podDisruptionBudget.minAvailable %s of replicaCount %d is %d pods: it must be less than replicaCount (a percentage is rounded up), or no node running a replica could ever be drained" $min $replicas $need) -}}
{{- end -}}
{{- else if ge (int $pdb.minAvailable) $replicas -}}
{{- fail "podDisruptionBudget.minAvailable must be less than replicaCount, or no node running a replica could ever be drained" -}}
{{- end -}}
{{- end -}}
{{- if .Values.webhook.enabled -}}
{{- $lookup := toString .Values.webhook.lookupTimeout -}}
{{- $lookupS := include "xoccm.seconds" (dict "key" "webhook.lookupTimeout" "value" $lookup) | float64 -}}
{{- if or (le $lookupS 0.0) (gt $lookupS 10.0) -}}
{{- fail (printf "webhook.lookupTimeout %s must be above 0 and at most 10s" $lookup) -}}
{{- end -}}
{{- if ge $lookupS (float64 (int .Values.webhook.timeoutSeconds)) -}}
{{- fail (printf "webhook.lookupTimeout %s must be below webhook.timeoutSeconds (%ds): the API server stops waiting for the webhook after timeoutSeconds, so its XO read must end well before; lower lookupTimeout or raise timeoutSeconds" $lookup (int .Values.webhook.timeoutSeconds)) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.webhook.enabled (eq (include "xoccm.certMode" .) "existingSecret") -}}
{{- $ca := toString .Values.webhook.certificates.existingSecret.caBundle -}}
{{- $fix := "set it to the CA certificate (the one that signed the Secret's tls.crt) in base64, e.g. the output of base64 -w0 ca.crt" -}}
{{- if contains "-----BEGIN" $ca -}}
{{- fail (printf "webhook.certificates.existingSecret.caBundle %q is PEM text, but the chart takes the caBundle base64-encoded: %s" (trunc 40 $ca) $fix) -}}
{{- end -}}
{{- /* b64dec returns the decoding error's text for what is not base64: no PEM block either. */ -}}
{{- $pem := b64dec $ca -}}
{{- if not (regexMatch "-----BEGIN CERTIFICATE-----\\s*[A-Za-z0-9+/=\\s]+-----END CERTIFICATE-----" $pem) -}}
{{- fail (printf "webhook.certificates.existingSecret.caBundle %q does not decode from base64 to a PEM CERTIFICATE block (it gives %q): %s" (trunc 40 $ca) (trunc 40 $pem) $fix) -}}
{{- end -}}
{{- if regexMatch "-----BEGIN [A-Z ]*PRIVATE KEY-----" $pem -}}
{{- fail (printf "webhook.certificates.existingSecret.caBundle %q holds a private key, which must never go into the cluster-wide MutatingWebhookConfiguration: keep only the CA certificate; %s" (trunc 40 $ca) $fix) -}}
{{- end -}}
{{- end -}}
{{- $delay := toString .Values.shutdownDelay -}}
{{- $delayS := 0.0 -}}
{{- if regexMatch "^[0-9]+(\\.[0-9]+)?(ms|s|m)$" $delay -}}
{{- $unit := regexReplaceAll "^[0-9.]+" $delay "" -}}
{{- $delayS = mulf (trimSuffix $unit $delay | float64) (get (dict "ms" 0.001 "s" 1 "m" 60) $unit) -}}
{{- else if ne $delay "0" -}}
{{- fail (printf "shutdownDelay %s: one number and one unit (ms, s or m), or 0" $delay) -}}
{{- end -}}
{{- if le (float64 (int .Values.terminationGracePeriodSeconds)) (addf $delayS 30) -}}
{{- fail (printf "terminationGracePeriodSeconds %d must exceed shutdownDelay (%s) plus 30 s, the longest the controller takes to stop once the delay is over: the kubelet would kill it mid-shutdown; raise terminationGracePeriodSeconds or lower shutdownDelay" (int .Values.terminationGracePeriodSeconds) $delay) -}}
{{- end -}}
{{- $hp := int .Values.healthProbe.port -}}
{{- if or (and .Values.webhook.enabled (eq $hp (int .Values.webhook.port))) (and .Values.metrics.enabled (eq $hp (int .Values.metrics.port))) -}}
{{- fail "healthProbe.port must differ from webhook.port and metrics.port" -}}
{{- end -}}
{{- if and (not .Values.existingConfigSecret) (not $clusters) (not $config.url) -}}
{{- $env := dict -}}
{{- range concat (.Values.extraEnv | default list) (.Values.extraEnvs | default list) }}{{ $_ := set $env .name true }}{{ end -}}
{{- if not $env.XOA_URL -}}
{{- fail "no XO server to talk to: set config (url and token, or clusters), existingConfigSecret, or XOA_URL and XOA_TOKEN in extraEnv" -}}
{{- end -}}
{{- end -}}
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
