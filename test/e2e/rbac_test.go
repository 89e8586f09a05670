package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/cloudnode"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/labelsync"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/lifecycle"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/nodeevents"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// rbacModes are the ways the chart runs the binary that change what it asks of the API
// server: each controller alone, none (webhook only), all, without the webhook, the webhook's
// certificates from cert-manager (a mounted folder) or self-managed, and the metrics endpoint
// behind the API server's authorization (by default), over plain HTTP or off. name names the
// release's namespace and resources; set are helm --set-json flags.
var rbacModes = []struct {
	name string
	set  []string
}{
	{"all", nil},
	{"cloud-node", []string{`controllers=["cloud-node"]`}},
	{"lifecycle", []string{`controllers=["cloud-node-lifecycle"]`}},
	{"label-sync", []string{`controllers=["cloud-node-label-sync"]`}},
	{"webhook-only", []string{`controllers=[]`}},
	{"no-webhook", []string{`webhook.enabled=false`}},
	{"self-managed", []string{`webhook.certificates.mode="selfManaged"`}},
	{"webhook-only-self-managed", []string{`controllers=[]`, `webhook.certificates.mode="selfManaged"`}},
	{"metrics-self-signed", []string{`webhook.enabled=false`, `metrics.certificate="selfSigned"`}},
	{"metrics-insecure", []string{`metrics.insecureHTTP=true`}},
	{"metrics-off", []string{`metrics.enabled=false`}},
}

// TestChartRBACIsEnough renders the chart in each of rbacModes, installs that mode's
// ServiceAccount and RBAC, checks the roles grant nothing the mode does not use (no events
// update, no Node deletion without cloud-node-lifecycle, no nodes/status without cloud-node, no
// Node access without a controller, no token or access reviews without an authorized metrics
// endpoint; the metrics-reader role nothing but get on /metrics), and runs the binary with the
// Deployment's flags as that ServiceAccount through what the mode does: leader election, the
// webhook's admissions, initialization, address and label sync after a migration, the shutdown
// taint, a deletion, the events of each, scrapes of the metrics endpoint with real
// ServiceAccount tokens (none: 401, a ServiceAccount without the chart's metrics-reader role:
// 403, one bound to it: 200), and shutdown (the Lease released). It fails on any request the
// API server forbids (counted from its metrics, and the word in the binary's log). One API
// server serves every mode, each in its own namespace.
func TestChartRBACIsEnough(t *testing.T) {
	env := testenv.StartTest(t, testenv.Options{})
	var summary []string
	for _, m := range rbacModes {
		t.Run(m.name, func(t *testing.T) {
			start, forbidden := time.Now(), math.NaN() // NaN: failed before the binary started
			defer func() {
				summary = append(summary, fmt.Sprintf("%-26s %3g forbidden  %5.1fs", m.name, forbidden, time.Since(start).Seconds()))
			}()
			runRBACMode(t, env, m.name, m.set, &forbidden)
		})
	}
	t.Logf("mode, requests answered 403, time:\n%s", strings.Join(summary, "\n"))
}

// chartRun is what one rendering of the chart installs and runs.
type chartRun struct {
	namespace, serviceAccount string
	// args are the manager container's.
	args        []string
	controllers []string
	webhook     bool
	selfManaged bool
	// secureMetrics: the metrics endpoint is served behind the API server's authorization.
	secureMetrics bool
	// metricsReader is the chart's ClusterRole for scrapers ("" without secureMetrics).
	metricsReader string
	rbac          []*unstructured.Unstructured
	mwc           *admissionregistrationv1.MutatingWebhookConfiguration
}

func (r *chartRun) runs(controller string) bool { return slices.Contains(r.controllers, controller) }

// runRBACMode runs one mode and sets forbidden to how many requests the API server forbade its
// binary.
func runRBACMode(t *testing.T, env *testenv.Env, name string, set []string, forbidden *float64) {
	ctx := context.Background()
	c := env.Client
	r := renderRun(t, "rbac-"+name, "xoccm-"+name, set...)

	ensureNamespace(t, c, r.namespace)
	for _, obj := range r.rbac {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	user := envtest.User{
		Name:   "system:serviceaccount:" + r.namespace + ":" + r.serviceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + r.namespace, "system:authenticated"},
	}
	checkLeastPrivilege(t, env, user, r)

	au, err := env.ControlPlane.AddUser(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := au.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}

	token := newToken(t)
	f := newXO(t, token, false)
	// A short settle time: the deletion waits for it.
	cfg := writeConfig(t, t.TempDir(), "config.yaml", fmt.Sprintf("url: %s\ntoken: %q\ninventory: {settleTime: 1s}\n", f.URL, token))

	// The Deployment's flags, but for what points into the pod (the config Secret, the
	// certificate volume, the Service's names, ports on every interface), with a debug log for
	// failures (startCCM's level logs HTTP bodies) and no shutdown delay (no Service routes to
	// this process).
	var extra []string
	for _, a := range r.args {
		flagName, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch flagName {
		case "config", "webhook-port", "webhook-cert-dir", "webhook-dns-names", "metrics-bind-address",
			"health-probe-bind-address", "zap-log-level", "shutdown-delay":
		default:
			extra = append(extra, a)
		}
	}
	extra = append(extra, "--zap-log-level=debug", "--shutdown-delay=0s")
	var webhookURL string
	var caBundle []byte
	if r.webhook {
		port := testenv.FreePort(t)
		// localhost: the self-managed certificate is for DNS names only.
		webhookURL = fmt.Sprintf("https://localhost:%d%s", port, webhook.Path)
		extra = append(extra, "--webhook-host=127.0.0.1", fmt.Sprintf("--webhook-port=%d", port))
		if r.selfManaged {
			extra = append(extra, "--webhook-dns-names=localhost")
		} else {
			// What cert-manager would mount, and its cainjector put in the caBundle.
			ca := testenv.NewCA(t, "rbac-"+name)
			caBundle = ca.PEM
			extra = append(extra, "--webhook-cert-dir="+ca.CertDir(t, 1, "localhost"))
		}
		// The chart's configuration, pointed at this process instead of the Service.
		for i := range r.mwc.Webhooks {
			r.mwc.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To(webhookURL), CABundle: caBundle}
		}
		if err := c.Create(ctx, r.mwc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), r.mwc) })
	}

	forbiddenBefore := forbiddenRequests(t, env)
	// leaderElect false only keeps startCCM's kube-system Lease out: the chart's
	// --leader-elect=true and --leader-elect-namespace (its release namespace) come after.
	p := startCCM(t, name, ccmArgs{kubeconfig: kubeconfigPath, config: cfg, extra: extra, secureMetrics: r.secureMetrics})
	// However the mode ends (a wait that times out ends the test at once), the process stops
	// and what the API server forbade it is counted: a missing grant shows as such.
	defer func() {
		if code := p.stop(t); code != 0 {
			t.Errorf("exit code %d", code)
		}
		if m := regexp.MustCompile(`(?i)[^\n]*\bforbidden\b[^\n]*`).Find(p.out.Bytes()); m != nil {
			t.Errorf("the controller was forbidden something: %s", m)
		}
		*forbidden = forbiddenRequests(t, env) - forbiddenBefore
		if *forbidden != 0 {
			t.Errorf("the API server answered %g requests with 403", *forbidden)
		}
		var l coordinationv1.Lease
		if t.Failed() {
			return // perhaps before it was leader
		}
		if err := c.Get(ctx, types.NamespacedName{Namespace: r.namespace, Name: app.LeaseName}, &l); err != nil {
			t.Error(err)
		} else if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "" {
			t.Errorf("the Lease is still held by %s after the shutdown", h)
		}
	}()
	p.waitReady(t, 30*time.Second)
	if r.secureMetrics {
		checkMetricsAccess(t, env, r, p, caBundle)
	}

	prefix := name + "-"
	vmInit := f.addVM(t, f.poolA, f.hostA1, prefix+"init", "10.9.0.1")
	vmGone := f.addVM(t, f.poolA, f.hostA1, prefix+"gone", "10.9.0.2")
	vmHalt := f.addVM(t, f.poolA, f.hostA1, prefix+"halt", "10.9.0.3")
	vmProbe := f.addVM(t, f.poolA, f.hostA1, prefix+"probe", "10.9.0.4")
	if r.webhook {
		// The API server calls the webhook once it trusts it: at once with the caBundle of
		// cert-manager, once the controller has written it when self-managed.
		i := 0
		testenv.WaitFor(t, 30*time.Second, "Node CREATE mutated by the webhook", func() error {
			i++
			n := testenv.KubeletNode(fmt.Sprintf("%sprobe-%d", prefix, i), testenv.WithSystemUUID(f.systemUUID(t, vmProbe)))
			env.AddNode(t, n)
			if n.Spec.ProviderID == "" {
				return errors.New("admitted without the webhook's mutation")
			}
			return nil
		})
	}

	// Nodes the controllers work on: "init" as its kubelet registers it when cloud-node runs
	// (initialized by an earlier controller otherwise), the others already initialized and
	// NotReady (the shutdown taint and the deletion need it), and one whose VM XO does not know.
	preInitialized := func(vm string) testenv.NodeOption {
		spec, _ := f.sim.VM(vm)
		return testenv.UpstreamInitialized(testenv.UpstreamVM{
			PoolID: f.poolA, PoolName: "pool-a", HostID: f.hostA1, HostName: "xcp-a-1",
			VMID: vm, VMName: spec.NameLabel, InstanceType: "2vcpu-2gb",
		})
	}
	initOpts := []testenv.NodeOption{testenv.WithSystemUUID(f.systemUUID(t, vmInit))}
	if !r.runs(cloudnode.Name) {
		initOpts = append(initOpts, preInitialized(vmInit))
	}
	env.AddNode(t, testenv.KubeletNode(prefix+"init", initOpts...))
	for _, n := range []struct{ name, vm string }{{"gone", vmGone}, {"halt", vmHalt}} {
		env.AddNode(t, testenv.KubeletNode(prefix+n.name, testenv.WithSystemUUID(f.systemUUID(t, n.vm)), preInitialized(n.vm), testenv.WithReady(false)))
	}
	env.AddNode(t, testenv.KubeletNode(prefix+"unknown", testenv.WithSystemUUID("44444444-5555-4666-8777-888888888888")))

	if r.runs(cloudnode.Name) {
		testenv.WaitFor(t, 30*time.Second, prefix+"init initialized", func() error { return initialized(c, prefix+"init") })
	}
	if err := f.sim.Migrate(vmInit, f.hostA2); err != nil {
		t.Fatal(err)
	}
	if err := f.sim.SetAddresses(vmInit, map[string]string{"0/ipv4/0": "10.9.1.1"}); err != nil {
		t.Fatal(err)
	}
	if err := f.sim.SetPowerState(vmHalt, xo.PowerStateHalted); err != nil {
		t.Fatal(err)
	}
	if err := f.sim.RemoveVM(vmGone); err != nil {
		t.Fatal(err)
	}

	// What each part of the mode must have done, and the event it tells it by.
	type want struct {
		what  string
		done  func() bool
		node  string
		event string
	}
	var wants []want
	if r.webhook {
		wants = append(wants, want{"webhook: an unknown VM reported", func() bool { return true }, prefix + "unknown", nodeevents.ReasonVMNotResolved})
	}
	if r.runs(cloudnode.Name) {
		wants = append(wants, want{"cloud-node: initialized", func() bool { return true }, prefix + "init", cloudnode.ReasonNodeInitialized},
			want{"cloud-node: new address", func() bool {
				return slices.ContainsFunc(env.Node(t, prefix+"init").Status.Addresses, func(a corev1.NodeAddress) bool { return a.Address == "10.9.1.1" })
			}, prefix + "init", cloudnode.ReasonAddressesUpdated})
	}
	if r.runs(labelsync.Name) {
		wants = append(wants, want{"label-sync: zone after the migration", func() bool {
			return env.Node(t, prefix+"init").Labels[node.LabelZone] == f.hostA2
		}, prefix + "init", labelsync.ReasonNodeZoneChanged})
	}
	if r.runs(lifecycle.Name) {
		wants = append(wants, want{"lifecycle: shutdown taint", func() bool {
			return node.HasTaint(env.Node(t, prefix+"halt").Spec.Taints, node.TaintShutdown, corev1.TaintEffectNoSchedule)
		}, prefix + "halt", lifecycle.ReasonNodeShutdown},
			want{"lifecycle: deletion", func() bool { return !env.NodeExists(t, prefix+"gone") }, prefix + "gone", lifecycle.ReasonDeletedNode})
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	for _, w := range wants {
		testenv.Eventually(t, 30*time.Second, w.what, func() bool {
			if !w.done() {
				return false
			}
			if w.event == "" {
				return true
			}
			list, err := cs.EventsV1().Events("").List(ctx, metav1.ListOptions{})
			return err == nil && slices.ContainsFunc(list.Items, func(e eventsv1.Event) bool {
				return e.Regarding.Name == w.node && e.Reason == w.event
			})
		})
	}
	// Leader election: the Lease in the release namespace, and its event.
	testenv.Eventually(t, 30*time.Second, "the Lease held and its event", func() bool {
		var l coordinationv1.Lease
		if err := c.Get(ctx, types.NamespacedName{Namespace: r.namespace, Name: app.LeaseName}, &l); err != nil || ptr.Deref(l.Spec.HolderIdentity, "") == "" {
			return false
		}
		list, err := cs.CoreV1().Events(r.namespace).List(ctx, metav1.ListOptions{})
		return err == nil && slices.ContainsFunc(list.Items, func(e corev1.Event) bool { return e.Reason == "LeaderElection" })
	})
}

// checkMetricsAccess scrapes the mode's metrics endpoint with real ServiceAccount tokens: none
// is refused (401), one of a ServiceAccount without the chart's metrics-reader ClusterRole too
// (403), one bound to it is served (200). The endpoint reviews each token and access as the
// chart's ServiceAccount: a missing grant shows as a 500 and as a request the API server
// forbade. The certificate is verified with the webhook's CA (webhookCA, or the self-managed
// CA's Secret), except the self-signed one of a mode without the webhook. Then it asks the API
// server (SubjectAccessReview) whether the metrics-reader role grants anything more than get on
// /metrics.
func checkMetricsAccess(t *testing.T, env *testenv.Env, r *chartRun, p *ccmProcess, webhookCA []byte) {
	t.Helper()
	ctx := context.Background()
	var roots *x509.CertPool
	switch {
	case r.selfManaged:
		var ref string
		for _, a := range r.args {
			if v, ok := strings.CutPrefix(a, "--webhook-ca-secret="); ok {
				ref = v
			}
		}
		ns, name, _ := strings.Cut(ref, "/")
		var s corev1.Secret
		testenv.WaitFor(t, 30*time.Second, "the self-managed CA Secret", func() error {
			return env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &s)
		})
		webhookCA = s.Data["ca.crt"]
		fallthrough
	case r.webhook:
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(webhookCA) {
			t.Fatal("no webhook CA to verify the metrics endpoint with")
		}
	}
	c := testenv.MetricsClient(roots, "localhost")
	url := "https://" + p.metrics + "/metrics"
	reader := testenv.ServiceAccountToken(t, env.Config, r.namespace, "prometheus", r.metricsReader)
	nobody := testenv.ServiceAccountToken(t, env.Config, r.namespace, "nobody")
	for _, tc := range []struct {
		who, token string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a ServiceAccount without the metrics-reader role", nobody, http.StatusForbidden},
		{"a ServiceAccount bound to the metrics-reader role", reader, http.StatusOK},
	} {
		code, body, err := testenv.Scrape(c, url, tc.token)
		if err != nil || code != tc.want {
			t.Errorf("metrics, %s: %d %.200s %v; want %d", tc.who, code, body, err, tc.want)
		}
		if tc.want == http.StatusOK && !bytes.Contains(body, []byte("xenorchestra_build_info")) {
			t.Errorf("metrics, %s: no xenorchestra_build_info in %.200s", tc.who, body)
		}
	}

	// The role grants get on /metrics and nothing else.
	cs := kubernetes.NewForConfigOrDie(env.Config)
	sa := "system:serviceaccount:" + r.namespace + ":prometheus"
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + r.namespace, "system:authenticated"}
	for _, a := range []struct {
		nonResource *authorizationv1.NonResourceAttributes
		resource    *authorizationv1.ResourceAttributes
		allowed     bool
	}{
		{nonResource: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}, allowed: true},
		{nonResource: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "post"}},
		{nonResource: &authorizationv1.NonResourceAttributes{Path: "/debug/pprof/heap", Verb: "get"}},
		{resource: &authorizationv1.ResourceAttributes{Resource: "nodes", Verb: "list"}},
		{resource: &authorizationv1.ResourceAttributes{Namespace: r.namespace, Resource: "secrets", Verb: "get"}},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: sa, Groups: groups, NonResourceAttributes: a.nonResource, ResourceAttributes: a.resource,
		}}
		res, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status.Allowed != a.allowed {
			t.Errorf("%s bound to %s: %+v%+v allowed %v, want %v", sa, r.metricsReader, a.nonResource, a.resource, res.Status.Allowed, a.allowed)
		}
	}
}

// checkLeastPrivilege asks the API server (SubjectAccessReview) whether user may do what r's
// mode never does, cluster-wide and in its namespace.
func checkLeastPrivilege(t *testing.T, env *testenv.Env, user envtest.User, r *chartRun) {
	t.Helper()
	type access struct{ group, resource, subresource, verb string }
	var denied []access
	// Neither event recorder updates an Event: client-go's create, then patch a repeat.
	denied = append(denied, access{"", "events", "", "update"}, access{"events.k8s.io", "events", "", "update"})
	if !r.runs(lifecycle.Name) {
		denied = append(denied, access{"", "nodes", "", "delete"})
	}
	if !r.runs(cloudnode.Name) {
		// status.addresses are cloud-node's alone.
		denied = append(denied, access{"", "nodes", "status", "patch"})
	}
	if len(r.controllers) == 0 {
		// The webhook reads the Node from the admission request, never from the API server.
		for _, v := range []string{"get", "list", "watch", "patch"} {
			denied = append(denied, access{"", "nodes", "", v})
		}
	}
	if !r.secureMetrics {
		// Only the metrics endpoint's authentication and authorization review anything.
		denied = append(denied, access{"authentication.k8s.io", "tokenreviews", "", "create"},
			access{"authorization.k8s.io", "subjectaccessreviews", "", "create"})
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	for _, a := range denied {
		// Cluster-wide (a ClusterRole) or in the release namespace (a Role there).
		for _, ns := range []string{"", r.namespace} {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user.Name, Groups: user.Groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: ns, Group: a.group, Resource: a.resource, Subresource: a.subresource, Verb: a.verb,
				},
			}}
			res, err := cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status.Allowed {
				what := a.resource
				if a.subresource != "" {
					what += "/" + a.subresource
				}
				if a.group != "" {
					what += "." + a.group
				}
				t.Errorf("--controllers=%s --webhook=%v: the chart grants %s %s (namespace %q), which this mode never does",
					strings.Join(r.controllers, ","), r.webhook, a.verb, what, ns)
				break
			}
		}
	}
}

// renderChart renders the chart with helm as release fullname (the name of every resource) in
// namespace, with the XO configuration in an existing Secret and set (--set-json flags), and
// returns its objects.
func renderChart(t *testing.T, namespace, fullname string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	dir, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"template", fullname, filepath.Join(testenv.RepoRoot(), "charts", "xenorchestra-cloud-controller-manager"),
		"--namespace", namespace, "--set-json", fmt.Sprintf("fullnameOverride=%q", fullname), "--set-json", `existingConfigSecret="xo-config"`}
	for _, s := range set {
		args = append(args, "--set-json", s)
	}
	cmd := exec.Command(filepath.Join(dir, "helm"), args...)
	// No kubeconfig or helm state of the machine may leak into the render.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(t.TempDir(), "none"), "HELM_CACHE_HOME="+t.TempDir(),
		"HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		if m != nil {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
}

// renderRun renders the chart as renderChart does and returns what the test installs and runs
// of it.
func renderRun(t *testing.T, namespace, fullname string, set ...string) *chartRun {
	t.Helper()
	r := &chartRun{namespace: namespace}
	for _, obj := range renderChart(t, namespace, fullname, set...) {
		switch obj.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			r.rbac = append(r.rbac, obj)
		case "MutatingWebhookConfiguration":
			r.mwc = &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, r.mwc); err != nil {
				t.Fatal(err)
			}
		case "Deployment":
			pod, _, _ := unstructured.NestedMap(obj.Object, "spec", "template", "spec")
			r.serviceAccount, _ = pod["serviceAccountName"].(string)
			containers, _ := pod["containers"].([]any)
			for _, ctr := range containers {
				if ctr, _ := ctr.(map[string]any); ctr["name"] == "manager" {
					r.args, _, _ = unstructured.NestedStringSlice(ctr, "args")
				}
			}
		}
	}
	for _, a := range r.args {
		switch {
		case strings.HasPrefix(a, "--controllers="):
			v := strings.TrimPrefix(a, "--controllers=")
			if v == "*" {
				r.controllers = app.AllControllers
			} else if v != "" {
				r.controllers = strings.Split(v, ",")
			}
		case a == "--webhook=true":
			r.webhook = true
		case a == "--webhook-certs="+app.CertsSelfManaged:
			r.selfManaged = true
		case strings.HasPrefix(a, "--metrics-certs="):
			r.secureMetrics = true
		}
	}
	for _, obj := range r.rbac {
		if obj.GetKind() == "ClusterRole" && strings.HasSuffix(obj.GetName(), "-metrics-reader") {
			r.metricsReader = obj.GetName()
		}
	}
	switch {
	case r.serviceAccount == "" || len(r.args) == 0:
		t.Fatal("the render has no Deployment with a manager container and a ServiceAccount")
	case len(r.rbac) < 5:
		t.Fatalf("the render has %d RBAC objects", len(r.rbac))
	case r.webhook != (r.mwc != nil):
		t.Fatalf("--webhook=%v but MutatingWebhookConfiguration %v", r.webhook, r.mwc != nil)
	case r.secureMetrics != (r.metricsReader != ""):
		t.Fatalf("metrics behind authorization %v but metrics-reader ClusterRole %q", r.secureMetrics, r.metricsReader)
	}
	return r
}

// forbiddenRequests counts the requests the API server has answered 403: those its
// authorization filter refused (authorization_attempts_total with result denied, or no-opinion:
// RBAC grants or says nothing, and nothing is a refusal), which never reach the handlers that
// apiserver_request_total counts, plus any other 403 (that counter's code 403).
func forbiddenRequests(t *testing.T, env *testenv.Env) float64 {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("\nauthorization_attempts_total{")) {
		t.Fatal("the API server's metrics have no authorization_attempts_total")
	}
	return metricSum(raw, "authorization_attempts_total", `result="denied"`) +
		metricSum(raw, "authorization_attempts_total", `result="no-opinion"`) +
		metricSum(raw, "apiserver_request_total", `code="403"`)
}
