package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app/diagnose"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
)

// TestCheckHealthyInstall runs `kubectl xenorchestra check` (the controller's binary under its
// kubectl plugin name) against a healthy installation: two controller processes (the real
// binary: webhook over TLS called by the API server, leader election, metrics served as by
// default, over HTTPS behind the API server's TokenReview and SubjectAccessReview), the XO
// simulator over verified TLS, and what check reads of a release made on the API server (a
// Deployment, its Pods and status, the config Secret it mounts): there is no kubelet here, so
// the replicas' metrics are read at --metrics-endpoints rather than through a port-forward,
// with the token of a ServiceAccount bound to a metrics-reader ClusterRole (the chart's rules)
// passed on stdin, and their certificate (the webhook's) verified with the webhook
// configuration's CA bundle, as check does. Nothing fails and nothing warns (XO is served over
// verified TLS here, so not even its plain-HTTP URL warning); explain through the same binary
// says the Node needs nothing.
func TestCheckHealthyInstall(t *testing.T) {
	env := testenv.StartTest(t, testenv.Options{Webhook: true})
	const ns = "kube-system"
	ensureNamespace(t, env.Client, ns)
	kubeconfig := writeKubeconfig(t, env)
	token := newToken(t)
	xo := newXO(t, token, true)
	vm := xo.addVM(t, xo.poolA, xo.hostA1, "healthy-node", "10.1.0.1")
	settings := fmt.Sprintf("url: %s\ntoken: %s\ninventory: {settleTime: 1s}\ncaBundle: |\n  %s\n", xo.URL, token,
		strings.ReplaceAll(strings.TrimSpace(string(xo.caPEM(t))), "\n", "\n  "))
	cfg := writeConfig(t, t.TempDir(), "config.yaml", settings)

	wo := env.WebhookInstallOptions
	// --metrics-certs=auto: each replica's metrics endpoint serves the webhook's certificate.
	a := startCCM(t, "replica-a", ccmArgs{kubeconfig: kubeconfig, config: cfg, leaderElect: true, webhookPort: wo.LocalServingPort, certDir: wo.LocalServingCertDir, secureMetrics: true})
	b := startCCM(t, "replica-b", ccmArgs{kubeconfig: kubeconfig, config: cfg, leaderElect: true, webhookPort: testenv.FreePort(t), certDir: wo.LocalServingCertDir, secureMetrics: true})
	a.waitReady(t, 30*time.Second)
	b.waitReady(t, 30*time.Second)
	installedRelease(t, env.Client, ns, settings)

	ctx := context.Background()
	n := testenv.KubeletNode("healthy-node")
	if err := env.Client.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	if n.Spec.ProviderID == "" {
		t.Fatal("the Node came back from its CREATE undescribed: the webhook did not answer")
	}
	testenv.WaitFor(t, 30*time.Second, "healthy-node initialized", func() error { return initialized(env.Client, "healthy-node") })

	// The operator's token for the replicas' metrics (the kubeconfig's user authenticates with a
	// client certificate, which a metrics endpoint does not take).
	mustCreate(t, env.Client, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "xoccm-metrics-reader"}, Rules: testenv.MetricsReaderRules})
	metricsToken := testenv.ServiceAccountToken(t, env.Config, ns, "operator", "xoccm-metrics-reader")

	plugin := filepath.Join(t.TempDir(), diagnose.PluginName)
	if err := os.Symlink(ccmBinary(t), plugin); err != nil {
		t.Fatal(err)
	}
	out, code := runPlugin(t, plugin, metricsToken+"\n", "check", "--kubeconfig="+kubeconfig,
		"--metrics-endpoints=https://"+a.metrics+",https://"+b.metrics, "--metrics-token-file=-", "-o", "json")
	var rep diagnose.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("check -o json: %v\n%s", err, out)
	}
	for _, s := range rep.Sections {
		for _, l := range s.Lines {
			if l.Status == diagnose.Failed || l.Status == diagnose.Warning {
				t.Errorf("%s: %s %s (fix: %s)", s.Name, l.Status, l.Message, l.Fix)
			}
		}
	}
	if code != 0 {
		t.Errorf("check exited %d, want 0", code)
	}
	for _, want := range []string{
		"Deployment xoccm available: 2 of 2 replicas ready",
		"the release's --config /etc/xenorchestra-cloud-controller-manager/config/config.yaml (Secret kube-system/xoccm-config)",
		"event stream subscribed",
		"the caBundle verifies the certificate served at 127.0.0.1",
		"a dry-run Node CREATE comes back described by the webhook",
		"leader: " + hostname(t) + "_",
		"replica https://" + a.metrics + ", XO server " + strings.TrimPrefix(xo.URL, "https://") + ": inventory current (event stream up",
		"replica https://" + b.metrics + ", XO server " + strings.TrimPrefix(xo.URL, "https://") + ": inventory current (event stream up",
		"1 of 1 Nodes initialized",
	} {
		if !reportHas(&rep, diagnose.OK, want) {
			t.Errorf("no ✔ line with %q", want)
		}
	}
	if bytes.Contains(out, []byte(token)) {
		t.Error("check printed the XO token")
	}
	if bytes.Contains(out, []byte(metricsToken)) {
		t.Error("check printed the metrics token")
	}

	out, code = runPlugin(t, plugin, "", "explain", "node", "healthy-node", "--kubeconfig="+kubeconfig)
	if code != 0 || !bytes.Contains(out, []byte("resolves to VM "+vm)) || !bytes.Contains(out, []byte("cloud-node: nothing to do")) {
		t.Errorf("explain exited %d:\n%s", code, out)
	}
}

// runPlugin runs the binary as the kubectl plugin with args and stdin on its standard input, and
// returns its standard output and exit status.
func runPlugin(t *testing.T, plugin, stdin string, args ...string) ([]byte, int) {
	t.Helper()
	cmd := exec.Command(plugin, args...)
	cmd.Env = testenv.CommandEnv()
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl-xenorchestra %s → exit %d\n%s%s", strings.Join(args, " "), code, out, stderr.String())
	return out, code
}

// reportHas reports whether a line of this status holds want.
func reportHas(r *diagnose.Report, st diagnose.Status, want string) bool {
	for _, s := range r.Sections {
		for _, l := range s.Lines {
			if l.Status == st && strings.Contains(l.Message, want) {
				return true
			}
		}
	}
	return false
}

// installedRelease makes what the chart installs and check reads, as the cluster's controllers
// would leave it: the config Secret, the Deployment (available, two replicas ready) mounting it
// with the chart's flags, and its Pods Running, one named after this machine (the processes'
// hostname, in the Lease's holder identity, as a Pod's hostname is its name).
func installedRelease(t *testing.T, c client.Client, ns, config string) {
	t.Helper()
	ctx := context.Background()
	const dir = "/etc/xenorchestra-cloud-controller-manager/config"
	mustCreate(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "xoccm-config", Namespace: ns, Labels: testenv.ReleaseLabels("xoccm")},
		StringData: map[string]string{"config.yaml": config}})
	d := testenv.ChartDeployment(ns, "xoccm", []string{"--config=" + dir + "/config.yaml", "--leader-elect=true", "--leader-elect-namespace=" + ns},
		map[string]string{"xoccm-config": dir})
	mustCreate(t, c, d)
	if err := testenv.SetDeploymentAvailable(ctx, c, d, true); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{hostname(t), "xoccm-other"} {
		if err := testenv.CreateRunningPod(ctx, c, testenv.RunningPod(d, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// mustCreate creates obj.
func mustCreate(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// hostname is this machine's name, lower-cased: the controller processes' identity in the
// Lease starts with it.
func hostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return strings.ToLower(h)
}
