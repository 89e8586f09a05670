package charts

import (
	"encoding/base64"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/config"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/cloudnode"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/labelsync"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/lifecycle"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
)

// Names the chart gives its objects for the release used in the tests.
const (
	webhookService  = chartName + "-webhook"
	metricsService  = chartName + "-metrics"
	servingCertName = chartName + "-webhook"
	servingSecret   = chartName + "-webhook-tls"
	caName          = chartName + "-ca"
	selfManagedCA   = chartName + "-webhook-ca"
	selfSignedName  = chartName + "-selfsigned"
	configSecret    = chartName + "-config"
	leaderElectRole = chartName + "-leader-election"
)

// ciValuesFiles returns the chart's ci/*.yaml values files, relative to the chart.
func ciValuesFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("only %d ci values files in %s", len(files), chartDir)
	}
	var out []string
	for _, f := range files {
		out = append(out, filepath.Join("ci", filepath.Base(f)))
	}
	return out
}

func TestHelmLint(t *testing.T) {
	cases := append([]string{""}, ciValuesFiles(t)...)
	for _, values := range cases {
		t.Run("values="+values, func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir, "--namespace", namespace}
			if values != "" {
				args = append(args, "-f", filepath.Join(chartDir, values))
			}
			out, err := runHelm(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Fatalf("helm lint: %s", out)
			}
		})
	}
}

// renderCase is one value combination and what must hold for it beyond the invariants.
type renderCase struct {
	values string
	set    []string
	check  func(t *testing.T, o objects)
}

// renderCases are the important value combinations; every ci values file must appear.
var renderCases = map[string]renderCase{
	"defaults": {check: checkDefaults},
	// The upstream chart's own default values, with this chart's image (upstream's is refused).
	"upstreamDefaults": {values: upstreamValues, set: []string{"image.repository=" + image}, check: checkUpstreamDefaults},
	"config": {values: "ci/config-values.yaml", check: func(t *testing.T, o objects) {
		if got := configSecretOf(t, o); got != configSecret {
			t.Errorf("config mounted from Secret %q, want the rendered %q", got, configSecret)
		}
		cfg := loadRenderedConfig(t, o)
		if cfg.Clusters[0].URL != "https://xoa.example.com" || !cfg.Lifecycle.OutOfServiceTaint || cfg.Addresses.InternalCIDRs[0] != "10.0.0.0/8" {
			t.Errorf("rendered config lost values: %+v", cfg)
		}
		d, _ := deployment(t, o)
		if d.Spec.Template.Annotations["checksum/config"] == "" {
			t.Error("no checksum/config annotation: a config change would not roll the pods")
		}
	}},
	// The clusters list form: every token from a Secret, mounted read-only where the rendered
	// config's tokenFile points.
	"configClusters": {values: "ci/clusters-values.yaml", check: func(t *testing.T, o objects) {
		s := decode[corev1.Secret](t, o, "Secret", configSecretOf(t, o))
		var cfg struct {
			Clusters []map[string]any `json:"clusters"`
		}
		if err := yaml.Unmarshal([]byte(s.StringData["config.yaml"]), &cfg); err != nil {
			t.Fatal(err)
		}
		if len(cfg.Clusters) != 2 {
			t.Fatalf("rendered clusters %+v", cfg.Clusters)
		}
		d, c := deployment(t, o)
		for i, want := range []string{"xo-site-a", "xo-site-b"} {
			entry := cfg.Clusters[i]
			file, _ := entry["tokenFile"].(string)
			if _, ok := entry["tokenSecretRef"]; ok || entry["token"] != nil || file == "" {
				t.Fatalf("clusters[%d] rendered as %v: want a tokenFile and no token or tokenSecretRef", i, entry)
			}
			v, ro := volumeAt(t, d, c, path.Dir(file))
			if v == nil || v.Secret == nil || v.Secret.SecretName != want || !ro || path.Base(file) != "token" {
				t.Errorf("clusters[%d].tokenFile %s is not key token of Secret %s mounted read-only", i, file, want)
			}
		}
	}},
	"existingConfigSecret": {values: "ci/existing-secret-values.yaml", check: func(t *testing.T, o objects) {
		if s := o.ofKind("Secret"); len(s) != 0 {
			t.Errorf("Secrets rendered with existingConfigSecret: %v", s.kinds())
		}
		if got := configSecretOf(t, o); got != "xo-config" {
			t.Errorf("config mounted from Secret %q, want xo-config", got)
		}
		_, c := deployment(t, o)
		if got := mustFlag(t, c.Args, "config"); path.Base(got) != "xo.yaml" {
			t.Errorf("--config=%s, want the existingConfigSecretKey xo.yaml", got)
		}
	}},
	"issuerRef": {values: "ci/issuerref-values.yaml", check: func(t *testing.T, o objects) {
		if n := len(o.ofKind("Issuer")); n != 0 {
			t.Errorf("%d Issuers rendered with a user issuerRef", n)
		}
		if o.find("Certificate", caName) != nil {
			t.Error("CA Certificate rendered with a user issuerRef")
		}
		cert := decode[cmapi.Certificate](t, o, "Certificate", servingCertName)
		want := cmmeta.IssuerReference{Name: "cluster-ca", Kind: "ClusterIssuer", Group: "cert-manager.io"}
		if cert.Spec.IssuerRef != want {
			t.Errorf("issuerRef = %+v, want %+v", cert.Spec.IssuerRef, want)
		}
	}},
	"selfManagedCerts": {values: "ci/selfmanaged-certs-values.yaml", check: func(t *testing.T, o objects) {
		_, c := deployment(t, o)
		if got := mustFlag(t, c.Args, "webhook-certs"); got != app.CertsSelfManaged {
			t.Fatalf("--webhook-certs=%s, want %s", got, app.CertsSelfManaged)
		}
		if a, b := mustFlag(t, c.Args, "webhook-ca-duration"), mustFlag(t, c.Args, "webhook-cert-duration"); a != "17520h" || b != "720h" {
			t.Errorf("durations %s and %s, want the values' 17520h and 720h", a, b)
		}
	}},
	"tlsSecret": {values: "ci/tls-secret-values.yaml", check: func(t *testing.T, o objects) {
		mwc := decode[admissionregistrationv1.MutatingWebhookConfiguration](t, o, "MutatingWebhookConfiguration", chartName)
		if _, ok := mwc.Annotations["cert-manager.io/inject-ca-from"]; ok {
			t.Error("inject-ca-from set with a user's Secret")
		}
		if !strings.HasPrefix(string(mwc.Webhooks[0].ClientConfig.CABundle), "-----BEGIN CERTIFICATE-----") {
			t.Errorf("caBundle %.40q is not the values' PEM", mwc.Webhooks[0].ClientConfig.CABundle)
		}
		d, c := deployment(t, o)
		if v, _ := volumeAt(t, d, c, mustFlag(t, c.Args, "webhook-cert-dir")); v == nil || v.Secret == nil || v.Secret.SecretName != "my-webhook-tls" {
			t.Errorf("cert dir volume %+v, want Secret my-webhook-tls", v)
		}
	}},
	"singleReplica": {values: "ci/single-replica-values.yaml", check: func(t *testing.T, o objects) {
		d, _ := deployment(t, o)
		if *d.Spec.Replicas != 1 {
			t.Errorf("replicas = %d, want 1", *d.Spec.Replicas)
		}
		if n := len(o.ofKind("PodDisruptionBudget")); n != 0 {
			t.Errorf("%d PodDisruptionBudgets for 1 replica: it would block every drain", n)
		}
	}},
	"hostNetwork": {values: "ci/hostnetwork-values.yaml", check: func(t *testing.T, o objects) {
		d, c := deployment(t, o)
		spec := d.Spec.Template.Spec
		// The values' advice: the node's resolvers, which work before CoreDNS runs.
		if !spec.HostNetwork || spec.DNSPolicy != corev1.DNSDefault {
			t.Errorf("hostNetwork=%v dnsPolicy=%s, want true and Default", spec.HostNetwork, spec.DNSPolicy)
		}
		// A new cluster's Nodes are NotReady until the CNI runs; the default tolerations and
		// not-ready let the pods run there.
		for _, key := range []string{"node.cloudprovider.kubernetes.io/uninitialized", "node-role.kubernetes.io/control-plane", notReady} {
			if n := tolerationsOf(spec.Tolerations, key); n != 1 {
				t.Errorf("%d tolerations for %s, want 1: %+v", n, key, spec.Tolerations)
			}
		}
		for name, want := range map[string]int32{"webhook": 10260, "metrics": 10261, "health": 10262} {
			if got := containerPort(t, c, name); got != want {
				t.Errorf("port %s = %d, want %d", name, got, want)
			}
		}
	}},
	"noWebhook": {values: "ci/no-webhook-values.yaml", check: func(t *testing.T, o objects) {
		for _, kind := range []string{"MutatingWebhookConfiguration", "Certificate", "Issuer"} {
			if n := len(o.ofKind(kind)); n != 0 {
				t.Errorf("%d %s rendered with the webhook disabled", n, kind)
			}
		}
		if o.find("Service", webhookService) != nil {
			t.Error("webhook Service rendered with the webhook disabled")
		}
		d, c := deployment(t, o)
		if got := mustFlag(t, c.Args, "webhook"); got != "false" {
			t.Errorf("--webhook=%s, want false", got)
		}
		for _, f := range []string{"webhook-port", "webhook-cert-dir"} {
			if _, ok := flagValue(t, c.Args, f); ok {
				t.Errorf("--%s passed with the webhook disabled", f)
			}
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == servingSecret {
				t.Errorf("webhook certificate volume %q mounted with the webhook disabled", v.Name)
			}
		}
		for _, p := range c.Ports {
			if p.Name == "webhook" {
				t.Error("webhook port exposed with the webhook disabled")
			}
		}
	}},
	"monitoring": {values: "ci/monitoring-values.yaml", check: func(t *testing.T, o objects) {
		_, c := deployment(t, o)
		if got := mustFlag(t, c.Args, "metrics-certs"); got != "webhook" {
			t.Errorf("--metrics-certs=%s, want webhook", got)
		}
		sm := o.find("ServiceMonitor", chartName)
		if sm == nil {
			t.Fatalf("no ServiceMonitor; have %v", o.kinds())
		}
		checkServiceMonitor(t, o, *sm)
		if e := endpointOf(t, o); e.Authorization == nil || e.BearerTokenFile != "" || e.TLSConfig == nil || e.TLSConfig.CA == nil ||
			e.TLSConfig.CA.Secret == nil || e.TLSConfig.CA.Secret.Name != selfManagedCA {
			t.Errorf("ServiceMonitor endpoint %+v, want the values' authorization and the self-managed CA", e)
		}
		pr := o.find("PrometheusRule", chartName)
		if pr == nil {
			t.Fatalf("no PrometheusRule; have %v", o.kinds())
		}
		if strings.Contains(string(pr.doc), "XenOrchestraCCMNodesNotDescribedByWebhook") || !strings.Contains(string(pr.doc), "team: platform") {
			t.Errorf("PrometheusRule ignores the values:\n%s", pr.doc)
		}
		if o.find("ConfigMap", chartName+"-dashboard") == nil {
			t.Errorf("no dashboard ConfigMap; have %v", o.kinds())
		}
	}},
	"full": {values: "ci/full-values.yaml", check: func(t *testing.T, o objects) {
		d, c := deployment(t, o)
		if want := "ghcr.io/xenorchestra-k8s/xenorchestra-cloud-controller-manager@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"; c.Image != want {
			t.Errorf("image = %s, want %s", c.Image, want)
		}
		if got := mustFlag(t, c.Args, "controllers"); got != "cloud-node,cloud-node-lifecycle" {
			t.Errorf("--controllers=%s", got)
		}
		if got := mustFlag(t, c.Args, "webhook-host"); got != "0.0.0.0" {
			t.Errorf("extraArgs lost: --webhook-host=%s", got)
		}
		if len(c.Env) != 2 || c.Env[1].ValueFrom == nil || c.Env[1].ValueFrom.SecretKeyRef == nil {
			t.Errorf("env = %+v, want GOMEMLIMIT then extraEnv's XOA_TOKEN from a Secret", c.Env)
		}
		if d.Spec.Template.Spec.NodeSelector["node-role.kubernetes.io/control-plane"] != "" || len(d.Spec.Template.Spec.TopologySpreadConstraints) != 1 {
			t.Error("nodeSelector or topologySpreadConstraints lost")
		}
		pdb := decode[policyv1.PodDisruptionBudget](t, o, "PodDisruptionBudget", chartName)
		if pdb.Spec.MinAvailable.IntValue() != 2 {
			t.Errorf("PDB minAvailable = %s, want 2", pdb.Spec.MinAvailable.String())
		}
		if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.IfHealthyBudget {
			t.Errorf("PDB unhealthyPodEvictionPolicy = %v, want the values' IfHealthyBudget", p)
		}
		sm := o.find("ServiceMonitor", chartName)
		if sm == nil {
			t.Fatalf("no ServiceMonitor; have %v", o.kinds())
		}
		checkServiceMonitor(t, o, *sm)
	}},
}

// TestGoMemLimit checks that GOMEMLIMIT follows the container's memory limit, and is not set
// without one.
func TestGoMemLimit(t *testing.T) {
	_, c := deployment(t, render(t, "ci/config-values.yaml"))
	if len(c.Env) != 1 || c.Env[0].Name != "GOMEMLIMIT" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.ResourceFieldRef == nil ||
		c.Env[0].ValueFrom.ResourceFieldRef.Resource != "limits.memory" || c.Env[0].ValueFrom.ResourceFieldRef.ContainerName != c.Name {
		t.Errorf("env = %+v, want GOMEMLIMIT from the container's limits.memory", c.Env)
	}
	_, c = deployment(t, render(t, "ci/config-values.yaml", "resources.limits=null"))
	if len(c.Env) != 0 {
		t.Errorf("env = %+v without a memory limit, want none", c.Env)
	}
}

func TestRender(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range renderCases {
		covered[c.values] = true
	}
	for _, f := range ciValuesFiles(t) {
		if !covered[f] {
			t.Errorf("%s has no rendering case in renderCases", f)
		}
	}
	for name, c := range renderCases {
		t.Run(name, func(t *testing.T) {
			o := render(t, c.values, c.set...)
			checkInvariants(t, o)
			c.check(t, o)
		})
	}
}

// checkDefaults checks what the default values must give.
func checkDefaults(t *testing.T, o objects) {
	want := []string{
		"Certificate/" + caName, "Certificate/" + servingCertName,
		"ClusterRole/" + chartName, "ClusterRoleBinding/" + chartName,
		"ClusterRole/" + chartName + "-metrics-auth", "ClusterRoleBinding/" + chartName + "-metrics-auth",
		"ClusterRole/" + chartName + "-metrics-reader",
		"Deployment/" + chartName,
		"Issuer/" + caName, "Issuer/" + selfSignedName,
		"MutatingWebhookConfiguration/" + chartName,
		"PodDisruptionBudget/" + chartName,
		"Role/" + leaderElectRole, "RoleBinding/" + leaderElectRole,
		"Service/" + metricsService, "Service/" + webhookService,
		"ServiceAccount/" + chartName,
	}
	slices.Sort(want)
	if got := o.kinds(); !slices.Equal(got, want) {
		t.Errorf("objects:\n got %v\nwant %v", got, want)
	}
	d, c := deployment(t, o)
	spec := d.Spec.Template.Spec
	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %d, want 2", *d.Spec.Replicas)
	}
	if spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName = %q", spec.PriorityClassName)
	}
	if spec.HostNetwork {
		t.Error("hostNetwork on by default")
	}
	if psc := spec.SecurityContext; psc == nil || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
		t.Errorf("pod securityContext %+v, want runAsUser 65532 (the image's nonroot user)", psc)
	}
	// A pod-network pod cannot run on a Node without a CNI anyway.
	if n := tolerationsOf(spec.Tolerations, notReady); n != 0 {
		t.Errorf("not-ready tolerated without hostNetwork: %+v", spec.Tolerations)
	}
	for _, key := range []string{"node.cloudprovider.kubernetes.io/uninitialized", "node-role.kubernetes.io/control-plane"} {
		if !slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool {
			return tol.Key == key && tol.Operator == corev1.TolerationOpExists && tol.Effect == corev1.TaintEffectNoSchedule
		}) {
			t.Errorf("no toleration for %s: %+v", key, spec.Tolerations)
		}
	}
	// Soft anti-affinity across zones first, then nodes, selecting this release's pods.
	aa := spec.Affinity.PodAntiAffinity
	if aa == nil || len(aa.RequiredDuringSchedulingIgnoredDuringExecution) != 0 || len(aa.PreferredDuringSchedulingIgnoredDuringExecution) != 2 {
		t.Fatalf("podAntiAffinity = %+v, want two preferred terms", aa)
	}
	podLabels := labels.Set(d.Spec.Template.Labels)
	for i, key := range []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname"} {
		term := aa.PreferredDuringSchedulingIgnoredDuringExecution[i]
		sel := labels.SelectorFromSet(term.PodAffinityTerm.LabelSelector.MatchLabels)
		if term.PodAffinityTerm.TopologyKey != key || !sel.Matches(podLabels) {
			t.Errorf("anti-affinity term %d: key %s selector %v, want %s selecting the pods", i, term.PodAffinityTerm.TopologyKey, sel, key)
		}
	}
	// The defaults name no XO server: the config is the test's baseline, an existingConfigSecret.
	if configSecretOf(t, o) != "xo-config" {
		t.Error("--config is not the baseline's existingConfigSecret")
	}
	if s := o.ofKind("Secret"); len(s) != 0 {
		t.Errorf("Secrets rendered without config: %v", s.kinds())
	}
	if got, want := mustFlag(t, c.Args, "webhook-cert-dir"), app.NewOptions().WebhookCertDir; got != want {
		t.Errorf("--webhook-cert-dir=%s, want the binary's default %s", got, want)
	}
	if got := mustFlag(t, c.Args, "leader-elect"); got != "true" {
		t.Errorf("--leader-elect=%s", got)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources = %+v, want CPU and memory requests and a memory limit", c.Resources)
	}
	mwc := decode[admissionregistrationv1.MutatingWebhookConfiguration](t, o, "MutatingWebhookConfiguration", chartName)
	if fp := *mwc.Webhooks[0].FailurePolicy; fp != admissionregistrationv1.Ignore {
		t.Errorf("failurePolicy = %s, want Ignore", fp)
	}
	if ts := *mwc.Webhooks[0].TimeoutSeconds; ts != 5 {
		t.Errorf("timeoutSeconds = %d, want 5", ts)
	}
	pdb := decode[policyv1.PodDisruptionBudget](t, o, "PodDisruptionBudget", chartName)
	if pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != intstr.FromInt32(1) {
		t.Errorf("PDB minAvailable = %v, want 1", pdb.Spec.MinAvailable)
	}
	// While no replica is Ready (a wrong token, XO down: readiness waits for the first XO
	// listing), the default IfHealthyBudget would refuse every eviction, and a drain of their
	// nodes would hang forever.
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
		t.Errorf("PDB unhealthyPodEvictionPolicy = %v, want AlwaysAllow", p)
	}
	if o.find("ServiceMonitor", chartName) != nil {
		t.Error("ServiceMonitor rendered by default")
	}
}

// checkInvariants checks what must hold for every value combination.
func checkInvariants(t *testing.T, o objects) {
	d, c := deployment(t, o)
	spec := d.Spec.Template.Spec

	// Every object is labelled as this release's, and namespaced objects are in its namespace.
	clusterScoped := map[string]bool{"ClusterRole": true, "ClusterRoleBinding": true, "MutatingWebhookConfiguration": true}
	for _, m := range o {
		l := m.obj.GetLabels()
		if l["app.kubernetes.io/name"] != chartName || l["app.kubernetes.io/instance"] != release {
			t.Errorf("%s %s lacks the release labels: %v", m.obj.GetKind(), m.obj.GetName(), l)
		}
		if ns := m.obj.GetNamespace(); clusterScoped[m.obj.GetKind()] != (ns == "") || (ns != "" && ns != namespace) {
			t.Errorf("%s %s in namespace %q", m.obj.GetKind(), m.obj.GetName(), ns)
		}
	}

	// The binary accepts the args.
	if err := binaryFlags(c.Args); err != nil {
		t.Errorf("the binary rejects the chart's args %q: %v", c.Args, err)
	}

	// The kubelet leaves a terminating pod the time to serve on for --shutdown-delay and then
	// stop gracefully.
	delay, err := time.ParseDuration(mustFlag(t, c.Args, "shutdown-delay"))
	if err != nil {
		t.Errorf("--shutdown-delay: %v", err)
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= delay+app.ManagerShutdownTimeout {
		t.Errorf("terminationGracePeriodSeconds %v does not exceed --shutdown-delay %s plus the manager's graceful stop %s", ptr.Deref(g, 30), delay, app.ManagerShutdownTimeout)
	}
	if len(c.Command) != 0 {
		t.Errorf("command %q overrides the image's entrypoint", c.Command)
	}

	// Hardened pod and container.
	psc, sc := spec.SecurityContext, c.SecurityContext
	if psc == nil || sc == nil {
		t.Fatal("no security context")
	}
	// The container's runAsUser is unset or the pod's: a podSecurityContext.runAsUser
	// (upstream's 10258) is not overridden by a chart default.
	checks := map[string]bool{
		"pod runAsNonRoot":               ptrTrue(psc.RunAsNonRoot),
		"pod runAsUser not root":         psc.RunAsUser != nil && *psc.RunAsUser != 0,
		"pod seccomp RuntimeDefault":     psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault,
		"runAsNonRoot":                   ptrTrue(sc.RunAsNonRoot),
		"runAsUser the pod's":            sc.RunAsUser == nil || (psc.RunAsUser != nil && *sc.RunAsUser == *psc.RunAsUser),
		"readOnlyRootFilesystem":         ptrTrue(sc.ReadOnlyRootFilesystem),
		"allowPrivilegeEscalation false": sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation,
		"drop ALL":                       sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) && len(sc.Capabilities.Add) == 0,
		"seccomp RuntimeDefault":         sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault,
		"not privileged":                 sc.Privileged == nil || !*sc.Privileged,
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("security context: not %s", what)
		}
	}

	// Probes on the health port the binary listens on.
	health := containerPort(t, c, "health")
	if got := portOf(t, mustFlag(t, c.Args, "health-probe-bind-address")); got != health {
		t.Errorf("--health-probe-bind-address port %d, container port health %d", got, health)
	}
	for name, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name || p.HTTPGet.Port != intstr.FromString("health") {
			t.Errorf("probe %s = %+v, want httpGet on port health", name, p)
		}
	}

	// The XO token never in args or env in clear.
	for _, a := range c.Args {
		if strings.Contains(strings.ToLower(a), "token") {
			t.Errorf("arg %q mentions a token", a)
		}
	}
	for _, e := range c.Env {
		if strings.Contains(strings.ToUpper(e.Name), "TOKEN") && e.Value != "" {
			t.Errorf("env %s has a plain value", e.Name)
		}
	}

	// Services select the pods and target ports the container has.
	podLabels := labels.Set(d.Spec.Template.Labels)
	if !labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(podLabels) {
		t.Errorf("Deployment selector %v does not match its pods %v", d.Spec.Selector.MatchLabels, podLabels)
	}
	for _, m := range o.ofKind("Service") {
		svc := decodeManifest[corev1.Service](t, m)
		if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
			t.Errorf("Service %s selector %v does not match the pods", svc.Name, svc.Spec.Selector)
		}
		for _, p := range svc.Spec.Ports {
			containerPort(t, c, p.TargetPort.String())
		}
	}
	if mustFlag(t, c.Args, "metrics-bind-address") != "0" {
		metrics := containerPort(t, c, "metrics")
		if got := portOf(t, mustFlag(t, c.Args, "metrics-bind-address")); got != metrics {
			t.Errorf("--metrics-bind-address port %d, container port metrics %d", got, metrics)
		}
		svc := decode[corev1.Service](t, o, "Service", metricsService)
		if svc.Spec.Ports[0].TargetPort != intstr.FromString("metrics") {
			t.Errorf("metrics Service targets %s", svc.Spec.Ports[0].TargetPort.String())
		}
	}

	// A PodDisruptionBudget exactly when there is more than one replica.
	pdbs := o.ofKind("PodDisruptionBudget")
	if (*d.Spec.Replicas > 1) != (len(pdbs) == 1) {
		t.Errorf("%d replicas but %d PodDisruptionBudgets", *d.Spec.Replicas, len(pdbs))
	}
	for _, m := range pdbs {
		pdb := decodeManifest[policyv1.PodDisruptionBudget](t, m)
		if !labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(podLabels) {
			t.Errorf("PDB selector %v does not match the pods", pdb.Spec.Selector.MatchLabels)
		}
	}

	checkConfigWiring(t, o)
	checkRBAC(t, o)
	checkMetricsRBAC(t, o, spec.ServiceAccountName, c)
	if mustFlag(t, c.Args, "webhook") == "true" {
		checkWebhookWiring(t, o)
	}
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// notReady is the taint of a Node whose kubelet is not ready, e.g. before a CNI runs.
const notReady = "node.kubernetes.io/not-ready"

// tolerationsOf counts the tolerations of the NoSchedule taint key.
func tolerationsOf(tols []corev1.Toleration, key string) int {
	n := 0
	for _, tol := range tols {
		if tol.Key == key && tol.Operator == corev1.TolerationOpExists && tol.Effect == corev1.TaintEffectNoSchedule {
			n++
		}
	}
	return n
}

// volumeAt returns the pod volume mounted at a path, and whether it is mounted read-only.
func volumeAt(t *testing.T, d *appsv1.Deployment, c *corev1.Container, mountPath string) (*corev1.Volume, bool) {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		if path.Clean(vm.MountPath) != path.Clean(mountPath) {
			continue
		}
		if vm.SubPath != "" {
			t.Errorf("volume %s mounted with subPath: updates would not reach the pod", vm.Name)
		}
		for i, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == vm.Name {
				return &d.Spec.Template.Spec.Volumes[i], vm.ReadOnly
			}
		}
		t.Fatalf("mount %s names no volume", vm.Name)
	}
	return nil, false
}

// configSecretOf returns the Secret the --config file comes from, checking that the file is
// the key of a Secret mounted read-only where --config points.
func configSecretOf(t *testing.T, o objects) string {
	t.Helper()
	d, c := deployment(t, o)
	p := mustFlag(t, c.Args, "config")
	v, ro := volumeAt(t, d, c, path.Dir(p))
	if v == nil || v.Secret == nil {
		t.Fatalf("--config=%s is not in a mounted Secret", p)
	}
	if !ro {
		t.Errorf("config Secret %s mounted read-write", v.Secret.SecretName)
	}
	if len(v.Secret.Items) != 0 {
		t.Errorf("config Secret projected with items %v: the whole Secret must be mounted", v.Secret.Items)
	}
	return v.Secret.SecretName
}

// checkConfigWiring checks that a rendered config Secret is the one mounted, under the key
// --config names.
func checkConfigWiring(t *testing.T, o objects) {
	_, c := deployment(t, o)
	p, ok := flagValue(t, c.Args, "config")
	if !ok {
		if n := len(o.ofKind("Secret")); n != 0 {
			t.Errorf("%d Secrets rendered but no --config", n)
		}
		return
	}
	name := configSecretOf(t, o)
	if m := o.find("Secret", name); m != nil {
		s := decodeManifest[corev1.Secret](t, *m)
		if _, ok := s.StringData[path.Base(p)]; !ok {
			t.Errorf("Secret %s has no key %s (--config=%s)", name, path.Base(p), p)
		}
	}
}

// loadRenderedConfig loads the rendered config Secret's file with the config package, as the
// binary does at start-up.
func loadRenderedConfig(t *testing.T, o objects) *config.Config {
	t.Helper()
	_, c := deployment(t, o)
	p := mustFlag(t, c.Args, "config")
	s := decode[corev1.Secret](t, o, "Secret", configSecretOf(t, o))
	file := filepath.Join(t.TempDir(), path.Base(p))
	if err := os.WriteFile(file, []byte(s.StringData[path.Base(p)]), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file, func(string) string { return "" })
	if err != nil {
		t.Fatalf("the binary would reject the rendered config: %v", err)
	}
	return cfg
}

// checkRBAC checks that the roles grant exactly what the binary needs with the controllers it
// runs (Node deletion for cloud-node-lifecycle, nodes/status for cloud-node, no Node access
// for the webhook alone), the Lease narrowed to its name, bound to the pods' ServiceAccount.
// test/e2e's TestChartRBACIsEnough runs the binary on these roles in each mode.
func checkRBAC(t *testing.T, o objects) {
	d, c := deployment(t, o)
	sa := d.Spec.Template.Spec.ServiceAccountName
	if o.find("ServiceAccount", sa) == nil {
		t.Errorf("pods run as ServiceAccount %q, which is not rendered", sa)
	}
	controllers := strings.Split(mustFlag(t, c.Args, "controllers"), ",")
	runs := func(name string) bool { return slices.Contains(controllers, "*") || slices.Contains(controllers, name) }
	cr := decode[rbacv1.ClusterRole](t, o, "ClusterRole", chartName)
	var wantCluster []rbacv1.PolicyRule
	if runs(cloudnode.Name) || runs(lifecycle.Name) || runs(labelsync.Name) {
		wantCluster = append(wantCluster, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch"}})
	}
	if runs(lifecycle.Name) {
		wantCluster = append(wantCluster, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"delete"}})
	}
	if runs(cloudnode.Name) {
		wantCluster = append(wantCluster, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}})
	}
	wantCluster = append(wantCluster,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	)
	if !reflect.DeepEqual(cr.Rules, wantCluster) {
		t.Errorf("ClusterRole rules:\n%s\nwant:\n%s", toYAML(t, cr.Rules), toYAML(t, wantCluster))
	}
	role := decode[rbacv1.Role](t, o, "Role", leaderElectRole)
	wantRole := []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{app.LeaseName}, Verbs: []string{"get", "update"}},
	}
	if !reflect.DeepEqual(role.Rules, wantRole) {
		t.Errorf("Role rules:\n%s\nwant:\n%s", toYAML(t, role.Rules), toYAML(t, wantRole))
	}
	wantSubject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: namespace}}
	crb := decode[rbacv1.ClusterRoleBinding](t, o, "ClusterRoleBinding", chartName)
	if crb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name}) || !reflect.DeepEqual(crb.Subjects, wantSubject) {
		t.Errorf("ClusterRoleBinding = %+v %+v", crb.RoleRef, crb.Subjects)
	}
	rb := decode[rbacv1.RoleBinding](t, o, "RoleBinding", leaderElectRole)
	if rb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}) || !reflect.DeepEqual(rb.Subjects, wantSubject) {
		t.Errorf("RoleBinding = %+v %+v", rb.RoleRef, rb.Subjects)
	}
}

// checkWebhookWiring checks the webhook end to end: the configuration is the Go code's, it
// calls the Service, which reaches the container's webhook port; the serving certificate covers
// the Service's names, its Secret is what the binary reads as --webhook-cert-dir, and the
// configuration's CA comes from that certificate.
func checkWebhookWiring(t *testing.T, o objects) {
	d, c := deployment(t, o)
	mwc := decode[admissionregistrationv1.MutatingWebhookConfiguration](t, o, "MutatingWebhookConfiguration", chartName)
	if len(mwc.Webhooks) != 1 {
		t.Fatalf("%d webhooks, want 1", len(mwc.Webhooks))
	}
	got := mwc.Webhooks[0]
	want := webhook.Configuration(mwc.Name, got.ClientConfig.Service, *got.FailurePolicy, *got.TimeoutSeconds).Webhooks[0]
	want.ClientConfig.CABundle = got.ClientConfig.CABundle // checked below, by mode
	if !reflect.DeepEqual(got, want) {
		t.Errorf("webhook differs from webhook.Configuration:\n got:\n%s\nwant:\n%s", toYAML(t, got), toYAML(t, want))
	}

	// clientConfig → Service → container port → --webhook-port.
	ref := got.ClientConfig.Service
	if ref == nil || got.ClientConfig.URL != nil {
		t.Fatalf("clientConfig = %+v, want a Service and no URL", got.ClientConfig)
	}
	if ref.Name != webhookService || ref.Namespace != namespace || ref.Path == nil || *ref.Path != webhook.Path {
		t.Errorf("clientConfig.service = %s/%s path %s, want %s/%s path %s", ref.Namespace, ref.Name, ptr.Deref(ref.Path, ""), namespace, webhookService, webhook.Path)
	}
	svc := decode[corev1.Service](t, o, "Service", webhookService)
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	var target *intstr.IntOrString
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			target = &p.TargetPort
		}
	}
	if target == nil {
		t.Fatalf("Service %s has no port %d", svc.Name, port)
	}
	if got := containerPort(t, c, target.String()); got != int32(atoi(t, mustFlag(t, c.Args, "webhook-port"))) {
		t.Errorf("Service targets container port %d, the binary listens on --webhook-port=%s", got, mustFlag(t, c.Args, "webhook-port"))
	}

	wantDNS := []string{svc.Name, svc.Name + "." + namespace, svc.Name + "." + namespace + ".svc", svc.Name + "." + namespace + ".svc.cluster.local"}
	ann, certManager := mwc.Annotations["cert-manager.io/inject-ca-from"]
	mode, _ := flagValue(t, c.Args, "webhook-certs")
	if !certManager {
		if n := len(o.ofKind("Certificate")) + len(o.ofKind("Issuer")); n != 0 {
			t.Errorf("%d cert-manager objects rendered without cert-manager", n)
		}
	}
	switch {
	case mode == app.CertsSelfManaged:
		checkSelfManagedCerts(t, o, mwc, wantDNS)
		return
	case !certManager:
		// Bring your own: the Secret is mounted as the cert dir, the caBundle is the value.
		if len(got.ClientConfig.CABundle) == 0 {
			t.Fatal("no caBundle and no cert-manager injection: the API server could not verify the webhook")
		}
		certDir := mustFlag(t, c.Args, "webhook-cert-dir")
		v, ro := volumeAt(t, d, c, certDir)
		if v == nil || v.Secret == nil || v.Secret.SecretName == servingSecret || !ro {
			t.Fatalf("--webhook-cert-dir=%s: volume %+v (read-only %v), want the user's Secret read-only", certDir, v, ro)
		}
		// Not optional: a Secret name with a typo must stop the pod in ContainerCreating with
		// a FailedMount event naming it, not run a replica that never serves.
		if ptrTrue(v.Secret.Optional) {
			t.Errorf("the user's certificate Secret %s is mounted optional", v.Secret.SecretName)
		}
		return
	}
	if len(got.ClientConfig.CABundle) != 0 {
		t.Error("caBundle rendered with cert-manager: cainjector sets it")
	}

	// inject-ca-from names the serving Certificate.
	certNS, certName, _ := strings.Cut(ann, "/")
	if certNS != namespace || certName != servingCertName {
		t.Errorf("inject-ca-from = %q, want %s/%s", ann, namespace, servingCertName)
	}
	cert := decode[cmapi.Certificate](t, o, "Certificate", certName)

	// The Certificate covers every name of the Service.
	if !slices.Equal(cert.Spec.DNSNames, wantDNS) {
		t.Errorf("dnsNames = %v, want %v", cert.Spec.DNSNames, wantDNS)
	}
	if cert.Spec.IsCA || !slices.Contains(cert.Spec.Usages, cmapi.UsageServerAuth) {
		t.Errorf("serving certificate isCA=%v usages=%v", cert.Spec.IsCA, cert.Spec.Usages)
	}
	if cert.Spec.PrivateKey == nil || cert.Spec.PrivateKey.RotationPolicy != cmapi.RotationPolicyAlways {
		t.Error("serving certificate key not rotated on renewal")
	}
	checkDurations(t, cert)

	// Its Secret is mounted read-only at --webhook-cert-dir, optional: on a new cluster
	// cert-manager cannot issue it before the Nodes are initialized, and the pod must start
	// to initialize them.
	certDir := mustFlag(t, c.Args, "webhook-cert-dir")
	v, ro := volumeAt(t, d, c, certDir)
	if v == nil || v.Secret == nil || v.Secret.SecretName != cert.Spec.SecretName || !ro {
		t.Fatalf("--webhook-cert-dir=%s: volume %+v (read-only %v), want Secret %s read-only", certDir, v, ro, cert.Spec.SecretName)
	}
	if !ptrTrue(v.Secret.Optional) {
		t.Errorf("certificate volume %s not optional with cert-manager: a new cluster could not bootstrap", v.Name)
	}

	// The issuer chain: the chart's CA Issuer, backed by the CA Certificate's Secret, signed by
	// the self-signed Issuer; or the user's issuerRef.
	if cert.Spec.IssuerRef.Kind == "Issuer" && cert.Spec.IssuerRef.Name == caName {
		caIssuer := decode[cmapi.Issuer](t, o, "Issuer", caName)
		ca := decode[cmapi.Certificate](t, o, "Certificate", caName)
		if caIssuer.Spec.CA == nil || caIssuer.Spec.CA.SecretName != ca.Spec.SecretName {
			t.Errorf("CA Issuer %+v does not use the CA Certificate's Secret %s", caIssuer.Spec.CA, ca.Spec.SecretName)
		}
		if !ca.Spec.IsCA || ca.Spec.IssuerRef.Kind != "Issuer" {
			t.Errorf("CA Certificate isCA=%v issuerRef=%+v", ca.Spec.IsCA, ca.Spec.IssuerRef)
		}
		self := decode[cmapi.Issuer](t, o, "Issuer", ca.Spec.IssuerRef.Name)
		if self.Spec.SelfSigned == nil {
			t.Errorf("CA Certificate issued by %s, which is not self-signed", self.Name)
		}
		checkDurations(t, ca)
		if ca.Spec.Duration.Duration <= cert.Spec.Duration.Duration {
			t.Errorf("CA lifetime %s not longer than the serving certificate's %s", ca.Spec.Duration.Duration, cert.Spec.Duration.Duration)
		}
	} else if cert.Spec.IssuerRef.Name == "" {
		t.Error("serving certificate has no issuer")
	}
}

// checkSelfManagedCerts checks --webhook-certs=self-managed: no certificate volume, the
// serving certificate for every name of the Service, the CA Secret and the configuration
// named, durations the binary accepts, and RBAC narrowed to that Secret and configuration.
func checkSelfManagedCerts(t *testing.T, o objects, mwc *admissionregistrationv1.MutatingWebhookConfiguration, wantDNS []string) {
	d, c := deployment(t, o)
	if _, ok := flagValue(t, c.Args, "webhook-cert-dir"); ok {
		t.Error("--webhook-cert-dir passed with self-managed certificates")
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil && (v.Secret.SecretName == servingSecret || v.Secret.SecretName == selfManagedCA) {
			t.Errorf("certificate volume %q mounted with self-managed certificates", v.Name)
		}
	}
	if len(mwc.Webhooks[0].ClientConfig.CABundle) != 0 {
		t.Error("caBundle rendered with self-managed certificates: the controller writes it")
	}
	if got := mustFlag(t, c.Args, "webhook-dns-names"); got != strings.Join(wantDNS, ",") {
		t.Errorf("--webhook-dns-names=%s, want %s", got, strings.Join(wantDNS, ","))
	}
	if got := mustFlag(t, c.Args, "webhook-ca-secret"); got != namespace+"/"+selfManagedCA {
		t.Errorf("--webhook-ca-secret=%s, want %s/%s", got, namespace, selfManagedCA)
	}
	if got := mustFlag(t, c.Args, "webhook-configuration"); got != mwc.Name {
		t.Errorf("--webhook-configuration=%s, want %s", got, mwc.Name)
	}
	role := decode[rbacv1.Role](t, o, "Role", selfManagedCA)
	wantRole := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{selfManagedCA}, Verbs: []string{"get", "list", "watch", "update"}},
	}
	if !reflect.DeepEqual(role.Rules, wantRole) {
		t.Errorf("Role %s rules:\n%s\nwant:\n%s", role.Name, toYAML(t, role.Rules), toYAML(t, wantRole))
	}
	cr := decode[rbacv1.ClusterRole](t, o, "ClusterRole", selfManagedCA)
	wantCluster := []rbacv1.PolicyRule{{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"},
		ResourceNames: []string{mwc.Name}, Verbs: []string{"get", "list", "watch", "patch"}}}
	if !reflect.DeepEqual(cr.Rules, wantCluster) {
		t.Errorf("ClusterRole %s rules:\n%s\nwant:\n%s", cr.Name, toYAML(t, cr.Rules), toYAML(t, wantCluster))
	}
	sa := d.Spec.Template.Spec.ServiceAccountName
	wantSubject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: namespace}}
	rb := decode[rbacv1.RoleBinding](t, o, "RoleBinding", selfManagedCA)
	crb := decode[rbacv1.ClusterRoleBinding](t, o, "ClusterRoleBinding", selfManagedCA)
	if rb.RoleRef.Name != role.Name || !reflect.DeepEqual(rb.Subjects, wantSubject) || crb.RoleRef.Name != cr.Name || !reflect.DeepEqual(crb.Subjects, wantSubject) {
		t.Errorf("bindings: %+v %+v / %+v %+v", rb.RoleRef, rb.Subjects, crb.RoleRef, crb.Subjects)
	}
}

// checkDurations checks the lifetimes cert-manager would accept.
func checkDurations(t *testing.T, cert *cmapi.Certificate) {
	t.Helper()
	if cert.Spec.Duration == nil || cert.Spec.Duration.Duration < time.Hour {
		t.Errorf("Certificate %s duration %v, want at least 1h", cert.Name, cert.Spec.Duration)
		return
	}
	if rb := cert.Spec.RenewBefore; rb != nil && rb.Duration >= cert.Spec.Duration.Duration {
		t.Errorf("Certificate %s renewBefore %s not shorter than its duration %s", cert.Name, rb.Duration, cert.Spec.Duration.Duration)
	}
}

// checkServiceMonitor checks that a ServiceMonitor scrapes the metrics Service's port.
func checkServiceMonitor(t *testing.T, o objects, m manifest) {
	var sm struct {
		Spec struct {
			Selector          struct{ MatchLabels map[string]string } `json:"selector"`
			NamespaceSelector struct{ MatchNames []string }           `json:"namespaceSelector"`
			Endpoints         []struct{ Port, Path string }           `json:"endpoints"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(m.doc, &sm); err != nil {
		t.Fatal(err)
	}
	var selected []string
	for _, sm2 := range o.ofKind("Service") {
		if labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(sm2.obj.GetLabels())) {
			selected = append(selected, sm2.obj.GetName())
		}
	}
	if !slices.Equal(selected, []string{metricsService}) {
		t.Errorf("ServiceMonitor selects Services %v, want [%s]", selected, metricsService)
	}
	if !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{namespace}) {
		t.Errorf("ServiceMonitor namespaces %v", sm.Spec.NamespaceSelector.MatchNames)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v", sm.Spec.Endpoints)
	}
}

func TestRenderRejects(t *testing.T) {
	testCA := testenv.NewCA(t, "webhook-ca")
	cases := map[string]struct {
		set  []string
		want string
	}{
		"config and existing Secret":      {[]string{"config.url=https://xo", "existingConfigSecret=s"}, "either config or existingConfigSecret"},
		"plain token in env":              {[]string{"extraEnv[0].name=XOA_TOKEN", "extraEnv[0].value=abc"}, "plain value"},
		"chart-owned flag in args":        {[]string{"extraArgs[0]=--config=/x"}, "set by the chart"},
		"leader-elect in args":            {[]string{"extraArgs[0]=--leader-elect=false"}, "set by the chart"},
		"lease namespace in args":         {[]string{"extraArgs[0]=--leader-elect-namespace=x"}, "set by the chart"},
		"PDB blocking drains":             {[]string{"podDisruptionBudget.minAvailable=2"}, "less than replicaCount"},
		"PDB of 100%":                     {[]string{"podDisruptionBudget.minAvailable=100%"}, "podDisruptionBudget.minAvailable 100% of replicaCount 2 is 2 pods: it must be less than replicaCount"},
		"PDB percentage rounded up":       {[]string{"replicaCount=3", "podDisruptionBudget.minAvailable=67%"}, "67% of replicaCount 3 is 3 pods"},
		"lookupTimeout of timeoutSeconds": {[]string{"webhook.timeoutSeconds=1", "webhook.lookupTimeout=1s"}, "webhook.lookupTimeout 1s must be below webhook.timeoutSeconds (1s)"},
		"lookupTimeout in ms too long":    {[]string{"webhook.timeoutSeconds=2", "webhook.lookupTimeout=2000.5ms"}, "webhook.lookupTimeout 2000.5ms must be below webhook.timeoutSeconds (2s)"},
		"lookupTimeout above timeout":     {[]string{"webhook.timeoutSeconds=5", "webhook.lookupTimeout=10s"}, "webhook.timeoutSeconds"},
		"port clash":                      {[]string{"metrics.port=9443"}, "must differ"},
		"health port clash":               {[]string{"healthProbe.port=10258"}, "must differ"},
		"unknown value":                   {[]string{"replicas=3"}, "additional properties 'replicas' not allowed"},
		"unknown config key":              {[]string{"config.urll=https://xo"}, "additional properties 'urll' not allowed"},
		"plain token in clusters":         {[]string{"config.clusters[0].url=https://xo", "config.clusters[0].token=abc"}, "config.clusters[0].token: keep XO tokens out of values: put it in a Secret"},
		"failurePolicy":                   {[]string{"webhook.failurePolicy=Deny"}, "failurePolicy"},
		"timeoutSeconds above 30":         {[]string{"webhook.timeoutSeconds=31"}, "timeoutSeconds"},
		"unknown controller":              {[]string{"controllers[0]=cloud-route"}, "controllers"},
		"bad duration":                    {[]string{"webhook.lookupTimeout=1 second"}, "lookupTimeout"},
		"bad log level":                   {[]string{"logLevel=verbose"}, "logLevel"},
		"issuerRef without name":          {[]string{"certManager.issuerRef.kind=ClusterIssuer"}, "name"},
		"secret key with a slash":         {[]string{"existingConfigSecretKey=a/b"}, "existingConfigSecretKey"},
		"no ServiceAccount name":          {[]string{"serviceAccount.create=false"}, "serviceAccount.name is required"},
		"zero replicas":                   {[]string{"replicaCount=0"}, "replicaCount"},
		"fullnameOverride too long":       {[]string{"fullnameOverride=" + strings.Repeat("a", 51)}, "fullnameOverride"},
		"image digest not a sha256":       {[]string{"image.digest=latest"}, "digest"},
		"extraArgs not a flag":            {[]string{"extraArgs[0]=verbose"}, "extraArgs"},
		"extraEnv token from literal":     {[]string{"extraEnv[0].name=XOA_PASSWORD", "extraEnv[0].value=x"}, "extraEnv XOA_PASSWORD: the controller authenticates with an XO authentication token, not a user and password"},
		"ServiceMonitor without metrics":  {[]string{"metrics.enabled=false", "metrics.serviceMonitor.enabled=true"}, "metrics.serviceMonitor.enabled needs metrics.enabled"},
		"alerts without metrics":          {[]string{"metrics.enabled=false", "prometheusRule.enabled=true"}, "prometheusRule.enabled needs metrics.enabled"},
		"unknown alert":                   {[]string{"prometheusRule.alerts.XenOrchestraCCMDwn.enabled=false"}, "prometheusRule.alerts.XenOrchestraCCMDwn: no such alert; the chart's alerts are XenOrchestraCCMDown, "},
		"alert for not a duration":        {[]string{"prometheusRule.alerts.XenOrchestraCCMDown.for=soon"}, "for"},
		"webhook certificate, no webhook": {[]string{"webhook.enabled=false", "metrics.certificate=webhook"}, "metrics.certificate webhook: webhook.enabled is false"},
		"profiles over plain HTTP":        {[]string{"metrics.insecureHTTP=true", "extraArgs[0]=--profiling"}, "extraArgs --profiling: the profiles are served only behind"},
		"insecure with a certificate":     {[]string{"metrics.insecureHTTP=true", "metrics.certificate=selfSigned"}, "metrics.certificate selfSigned: metrics.insecureHTTP serves no certificate"},
		"unknown metrics certificate":     {[]string{"metrics.certificate=letsencrypt"}, "certificate"},
		"nothing to run":                  {[]string{"controllers=null", "webhook.enabled=false"}, "the pods would run nothing"},
		"workers in args":                 {[]string{"extraArgs[0]=--workers=8"}, "--workers=8 is set by the chart; use workers"},
		"controllers in args":             {[]string{"extraArgs[0]=--controllers=cloud-node"}, "use controllers"},
		"kube-api-qps in args":            {[]string{"extraArgs[0]=--kube-api-qps=10"}, "use kubeAPI.qps"},
		"kube-api-burst in args":          {[]string{"extraArgs[0]=-kube-api-burst=10"}, "use kubeAPI.burst"},
		"log level in args":               {[]string{"extraArgs[0]=--zap-log-level=debug"}, "use logLevel"},
		"lookup timeout in args":          {[]string{"extraArgs[0]=--webhook-lookup-timeout=2s"}, "use webhook.lookupTimeout"},
		"bare leader-elect in args":       {[]string{"extraArgs[0]=--leader-elect"}, "set by the chart"},
		"unknown flag in args":            {[]string{"extraArgs[0]=--nope=1"}, "--nope=1 is not a flag of this binary"},
		"flag and value with a space":     {[]string{"extraArgs[0]=--zap-encoder console"}, "is not a flag of this binary"},
		"check-config in args":            {[]string{"extraArgs[0]=--check-config"}, "exit at once"},
		"lookupTimeout above 10s":         {[]string{"webhook.lookupTimeout=11s"}, "lookupTimeout"},
		"unknown certificates mode":       {[]string{"webhook.certificates.mode=vault"}, "mode"},
		"existingSecret without name":     {[]string{"webhook.certificates.mode=existingSecret", "webhook.certificates.existingSecret.caBundle=QQ=="}, "name"},
		"existingSecret without CA":       {[]string{"webhook.certificates.mode=existingSecret", "webhook.certificates.existingSecret.name=s"}, "caBundle"},
		"caBundle without existingSecret": {[]string{"webhook.certificates.existingSecret.caBundle=QQ=="}, "caBundle"},
		"issuerRef when self-managed":     {[]string{"webhook.certificates.mode=selfManaged", "certManager.issuerRef.name=ca"}, "certManager.issuerRef is set but webhook.certificates.mode is selfManaged"},
		"self-managed flag in args":       {[]string{"extraArgs[0]=--webhook-certs=self-managed"}, "use webhook.certificates.mode"},
		"caBundle PEM text":               {[]string{"webhook.certificates.mode=existingSecret", "webhook.certificates.existingSecret.name=s", "webhook.certificates.existingSecret.caBundle=-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}, `webhook.certificates.existingSecret.caBundle "-----BEGIN CERTIFICATE-----\nMIIB\n-----EN" is PEM text, but the chart takes the caBundle base64-encoded: set it to the CA certificate`},
		"caBundle not a certificate":      {[]string{"webhook.certificates.mode=existingSecret", "webhook.certificates.existingSecret.name=s", "webhook.certificates.existingSecret.caBundle=" + base64.StdEncoding.EncodeToString([]byte("hello\n"))}, `webhook.certificates.existingSecret.caBundle "aGVsbG8K" does not decode from base64 to a PEM CERTIFICATE block (it gives "hello\n"): set it to the CA certificate (the one that signed the Secret's tls.crt) in base64, e.g. the output of base64 -w0 ca.crt`},
		"caBundle not base64":             {[]string{"webhook.certificates.mode=existingSecret", "webhook.certificates.existingSecret.name=s", "webhook.certificates.existingSecret.caBundle=QQ"}, `caBundle "QQ" does not decode from base64 to a PEM CERTIFICATE block`},
		"caBundle with a private key":     {[]string{"webhook.certificates.mode=existingSecret", "webhook.certificates.existingSecret.name=s", "webhook.certificates.existingSecret.caBundle=" + base64.StdEncoding.EncodeToString(append(testCA.PEM, "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIA==\n-----END EC PRIVATE KEY-----\n"...))}, "holds a private key"},
		"grace period too short":          {[]string{"terminationGracePeriodSeconds=35"}, "terminationGracePeriodSeconds 35 must exceed shutdownDelay (5s) plus 30 s"},
		"grace period, 1m delay":          {[]string{"shutdownDelay=1m", "terminationGracePeriodSeconds=90"}, "terminationGracePeriodSeconds 90 must exceed shutdownDelay (1m) plus 30 s"},
		"shutdownDelay of two units":      {[]string{"shutdownDelay=1m30s"}, "shutdownDelay"},
		"shutdownDelay negative":          {[]string{"shutdownDelay=-1s"}, "shutdownDelay"},
		"shutdown-delay in args":          {[]string{"extraArgs[0]=--shutdown-delay=1s"}, "use shutdownDelay"},
		"tokenFile and tokenSecretRef":    {[]string{"config.clusters[0].url=https://xo", "config.clusters[0].tokenFile=/t/token", "config.clusters[0].tokenSecretRef.name=s", "config.clusters[0].tokenSecretRef.key=token"}, "config.clusters[0]: set tokenFile or tokenSecretRef, not both"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := runHelm(t, templateArgs(namespace, "", c.set...)...)
			if err == nil {
				t.Fatalf("rendered without error:\n%.400s", out)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error does not mention %q:\n%v", c.want, err)
			}
		})
	}
}

// TestRenderGuardsAccept renders the values next to what TestRenderRejects refuses, so that
// the guards refuse no more than they must.
func TestRenderGuardsAccept(t *testing.T) {
	testCA := testenv.NewCA(t, "webhook-ca")
	cases := map[string][]string{
		"PDB of 50%":                      {"podDisruptionBudget.minAvailable=50%"},
		"PDB of 66% of 3":                 {"replicaCount=3", "podDisruptionBudget.minAvailable=66%"},
		"PDB of 0%":                       {"podDisruptionBudget.minAvailable=0%"},
		"PDB of 100% for one replica":     {"replicaCount=1", "podDisruptionBudget.minAvailable=100%"},
		"PDB of 100% disabled":            {"podDisruptionBudget.enabled=false", "podDisruptionBudget.minAvailable=100%"},
		"lookupTimeout under timeout":     {"webhook.timeoutSeconds=1", "webhook.lookupTimeout=999ms"},
		"lookupTimeout 10s of 11":         {"webhook.timeoutSeconds=11", "webhook.lookupTimeout=10s"},
		"lookupTimeout in ns":             {"webhook.timeoutSeconds=1", "webhook.lookupTimeout=999999999ns"},
		"lookupTimeout without a webhook": {"webhook.enabled=false", "webhook.timeoutSeconds=1", "webhook.lookupTimeout=10s"},
		"grace period just long enough":   {"shutdownDelay=500ms", "terminationGracePeriodSeconds=31"},
		"no shutdown delay":               {"shutdownDelay=0s", "terminationGracePeriodSeconds=31"},
		"caBundle of two certificates":    {"webhook.certificates.mode=existingSecret", "webhook.certificates.existingSecret.name=s", "webhook.certificates.existingSecret.caBundle=" + base64.StdEncoding.EncodeToString(append(append([]byte(nil), testCA.PEM...), testenv.NewCA(t, "next").PEM...))},
	}
	for name, set := range cases {
		t.Run(name, func(t *testing.T) {
			render(t, "", set...)
		})
	}
}

// TestFullnameFitsEverySuffix renders with the longest allowed name prefix: Service names must
// stay DNS labels, and Certificate names label values (cert-manager labels its requests with
// them), so at most 63 characters each.
func TestFullnameFitsEverySuffix(t *testing.T) {
	long := strings.Repeat("x", 60)
	o := render(t, "", "nameOverride=y", "fullnameOverride="+long[:50])
	for _, m := range o {
		switch m.obj.GetKind() {
		case "Service", "Certificate":
			if n := len(m.obj.GetName()); n > 63 {
				t.Errorf("%s name %q is %d characters", m.obj.GetKind(), m.obj.GetName(), n)
			}
		}
	}
	if o.find("Certificate", long[:50]+"-webhook") == nil || o.find("Service", long[:50]+"-webhook") == nil {
		t.Errorf("objects: %v", o.kinds())
	}
	// The longest release name helm allows (53) is cut to the same prefix length.
	out, err := runHelm(t, "template", long[:53], chartDir, "--namespace", namespace, "--set", baselineXO)
	if err != nil {
		t.Fatal(err)
	}
	o, err = parseManifests([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range o.ofKind("Service") {
		if n := len(m.obj.GetName()); n > 63 {
			t.Errorf("Service name %q is %d characters", m.obj.GetName(), n)
		}
	}
}

func toYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return n
}
