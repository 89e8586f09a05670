{{/*
The render-time refusals: what the values schema cannot express (rules across values, and checks
of chart-only values the binary never sees) and what the upstream chart's users carry over, each
with a message saying what to do instead. The config file's keys and types are the schema's
(generated from the binary's code), the binary's flags binary-flags.yaml's (generated too).
*/}}

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
metrics-certs: metrics.certificate
metrics-insecure-http: metrics.insecureHTTP
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
secure-port: use metrics.port (HTTPS with TokenReview and SubjectAccessReview, as upstream's secure port) and healthProbe.port
bind-address: use metrics.port and healthProbe.port (they listen on every address)
authorization-always-allow-paths: remove it (the health probes are anonymous; /metrics always needs a token allowed get on it)
authentication-skip-lookup: remove it (tokens are checked with TokenReview through the pod's ServiceAccount)
authentication-kubeconfig: remove it (tokens are checked with TokenReview through the pod's ServiceAccount)
authorization-kubeconfig: remove it (requests are authorized with SubjectAccessReview through the pod's ServiceAccount)
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
xoccm.validate fails the render on combinations that cannot work, and on upstream values that
have no meaning here, with a message saying what to change. Included once, from the Deployment.
*/}}
{{- define "xoccm.validate" -}}
{{- /* Durations are compared as the binary reads them: dateModify parses with Go's
time.ParseDuration, and (dateModify d $t0).Sub $t0 is d, or 0 when d does not parse. */ -}}
{{- $t0 := now -}}
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
{{- $le := dict "lease-duration" "15s" "renew-deadline" "10s" "retry-period" "2s" -}}
{{- range .Values.extraArgs -}}
{{- $flag := regexReplaceAll "^--?" . "" | splitn "=" 2 -}}
{{- if hasPrefix "leader-elect-" $flag._0 }}{{ $_ := set $le (trimPrefix "leader-elect-" $flag._0) ($flag._1 | default "") }}{{ end -}}
{{- end -}}
{{- $lease := (dateModify (get $le "lease-duration") $t0).Sub $t0 -}}
{{- $renew := (dateModify (get $le "renew-deadline") $t0).Sub $t0 -}}
{{- $retry := (dateModify (get $le "retry-period") $t0).Sub $t0 -}}
{{- if not (and (gt $retry 0) (lt $retry $renew) (lt $renew $lease)) -}}
{{- fail (printf "extraArgs: want 0 < --leader-elect-retry-period (%s) < --leader-elect-renew-deadline (%s) < --leader-elect-lease-duration (%s)" (get $le "retry-period") (get $le "renew-deadline") (get $le "lease-duration")) -}}
{{- end -}}
{{- if and (has "*" .Values.controllers) (gt (len .Values.controllers) 1) -}}
{{- fail (printf "controllers %s: \"*\" stands for every controller and goes alone" (toJson .Values.controllers)) -}}
{{- end -}}
{{- if and .Values.webhook.enabled (eq (include "xoccm.certMode" .) "selfManaged") -}}
{{- $sm := .Values.webhook.certificates.selfManaged -}}
{{- $cert := (dateModify $sm.certDuration $t0).Sub $t0 -}}
{{- if not (and (gt $cert 0) (lt $cert ((dateModify $sm.caDuration $t0).Sub $t0))) -}}
{{- fail (printf "webhook.certificates.selfManaged.certDuration %s must be positive and shorter than caDuration (%s): a serving certificate cannot outlive the CA that signs it" $sm.certDuration $sm.caDuration) -}}
{{- end -}}
{{- end -}}
{{- $chartFlags := include "xoccm.chartFlags" . | fromYaml -}}
{{- $upstreamFlags := include "xoccm.upstreamFlags" . | fromYaml -}}
{{- $binaryFlags := .Files.Get "binary-flags.yaml" | fromYamlArray -}}
{{- range .Values.extraArgs -}}
{{- $name := regexReplaceAll "^--?([^=]*)(=.*)?$" . "${1}" -}}
{{- if regexMatch "^--?v=[0-9]+$" . -}}
{{- else if hasKey $chartFlags $name -}}
{{- fail (printf "extraArgs: %s is set by the chart; use %s instead" . (get $chartFlags $name)) -}}
{{- else if hasKey $upstreamFlags $name -}}
{{- fail (printf "extraArgs: %s is a flag of the upstream controller, not of this one: %s" . (get $upstreamFlags $name)) -}}
{{- else if has $name (list "check-config" "version" "help" "h") -}}
{{- fail (printf "extraArgs: %s makes the binary exit at once, so the pod would restart forever" .) -}}
{{- else if not (has $name $binaryFlags) -}}
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
{{- $lookup := .Values.webhook.lookupTimeout -}}
{{- if ge ((dateModify $lookup $t0).Sub $t0) ((dateModify (printf "%ds" (int .Values.webhook.timeoutSeconds)) $t0).Sub $t0) -}}
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
{{- $delay := .Values.shutdownDelay -}}
{{- if le ((dateModify (printf "%ds" (sub (int .Values.terminationGracePeriodSeconds) 30)) $t0).Sub $t0) ((dateModify $delay $t0).Sub $t0) -}}
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
{{- include "xoccm.validateMetrics" . -}}
{{- end -}}

{{/*
xoccm.validateMetrics fails the render on metrics and alert values that cannot work together.
Included by xoccm.validate, last.
*/}}
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
