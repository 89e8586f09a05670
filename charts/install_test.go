package charts

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// The tests here run the install and migration commands of the docs, as written, against a
// real API server, then run the binary the way the resulting Deployment would run it: its
// args, the config file from the Secret its volume names, its ServiceAccount's permissions.
// Only what a Pod would get from the kubelet differs: listen addresses, the kubeconfig.

// installNamespace is where the docs install: kube-system.
const installNamespace = "kube-system"

// upstreamChart stands in for the upstream chart 1.1.0: its object names, kinds and Secret.
var upstreamChart = filepath.Join(repoRoot, "charts", "testdata", "upstream-1.1.0-chart")

// TestPlainManifestsOnUpstreamSecret runs the upstream controller's first install method with
// this project's manifest, without cert-manager: the Secret
// kube-system/xenorchestra-cloud-controller-manager created from an upstream config.yaml and
// kubectl apply of docs/deploy/cloud-controller-manager.yml, both exactly as docs/install.md
// writes them, on a cluster running upstream's own manifest, replaced with the commands of
// docs/migration.md. The Secret must be left as created, nothing of upstream's left, and the
// controller, run as the Deployment says, must read the Secret, fill its webhook's caBundle, be
// called by the API server for a Node CREATE and initialize Nodes.
func TestPlainManifestsOnUpstreamSecret(t *testing.T) {
	env := startInstallEnv(t)
	ctx := t.Context()
	x, vms := newInstallXO(t)
	kubeconfig := writeAdminKubeconfig(t, env)

	// Upstream's manifest, applied as its docs say; their Secret is created with the same
	// command as docs/install.md's.
	dir := t.TempDir()
	out, err := runHelm(t, "template", chartName, upstreamChart, "--namespace", installNamespace)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "upstream.yml"), []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	createSecret := docLine(t, "install.md", "kubectl -n kube-system create secret generic xenorchestra-cloud-controller-manager --from-file=config.yaml")
	apply := docLine(t, "install.md", "kubectl apply -f docs/deploy/cloud-controller-manager.yml")
	upstreamConfig := fmt.Sprintf("url: %s\ninsecure: false\ntoken: %q\n", x.URL, x.Token)
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(upstreamConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	runDocCommands(t, dir, kubeconfig, "kubectl apply -f upstream.yml\n"+createSecret)

	// docs/migration.md's commands, from a folder where docs/ is this repository's; its
	// kubectl apply is install.md's.
	if err := os.Symlink(filepath.Join(repoRoot, "docs"), filepath.Join(dir, "docs")); err != nil {
		t.Fatal(err)
	}
	block := docBlock(t, "migration.md", apply)
	runDocCommands(t, dir, kubeconfig, block)

	var secret corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: chartName}, &secret); err != nil {
		t.Fatal(err)
	}
	if got := string(secret.Data["config.yaml"]); got != upstreamConfig || len(secret.Data) != 1 {
		t.Errorf("the applied manifest changed the Secret %s: config.yaml %q, keys %d", chartName, got, len(secret.Data))
	}
	checkNothingOfUpstream(t, env)
	d := getDeployment(t, env, chartName)
	if s := configVolumeSecret(t, d); s != chartName {
		t.Errorf("the Deployment reads its config from Secret %q, want upstream's %s", s, chartName)
	}
	runAsDeployment(t, env, d).checkServes(t, env, x, vms)
}

// TestUpgradeFromUpstreamRelease installs the stand-in of the upstream chart as a Helm release
// (its config in values, so in its own Secret), runs the commands of docs/migration.md's
// "Switching without relabelling" as written, and checks the result: the release is this chart,
// nothing of upstream's is left that could run or hold permissions, the Secret docs/migration.md
// keeps for XO's CSI driver is there, and the controller, run as the Deployment says, initializes
// Nodes with the upstream config.
func TestUpgradeFromUpstreamRelease(t *testing.T) {
	env := startInstallEnv(t)
	ctx := t.Context()
	x, vms := newInstallXO(t)
	kubeconfig := writeAdminKubeconfig(t, env)
	dir := t.TempDir()

	// The upstream release, installed as upstream's docs say (helm upgrade -i) with its config
	// and replicaCount as user values.
	upstreamConfig := map[string]any{"url": x.URL, "insecure": false, "token": x.Token}
	values := filepath.Join(t.TempDir(), "xo-ccm.yaml")
	if err := os.WriteFile(values, []byte(toYAML(t, map[string]any{"config": upstreamConfig, "replicaCount": 1, "logVerbosityLevel": 5})), 0o600); err != nil {
		t.Fatal(err)
	}
	runDocCommands(t, dir, kubeconfig, fmt.Sprintf("helm upgrade -i --namespace=kube-system -f %s %s %s", values, chartName, upstreamChart))
	upstreamObjects := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: installNamespace, Name: chartName}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: installNamespace, Name: chartName}},
	}
	for _, o := range upstreamObjects {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatalf("the upstream release: %v", err)
		}
	}
	upstreamSecret := upstreamObjects[1].(*corev1.Secret).Data["config.yaml"]

	// The commands of docs/migration.md, from a folder where ./charts is this repository's.
	if err := os.Symlink(filepath.Join(repoRoot, "charts"), filepath.Join(dir, "charts")); err != nil {
		t.Fatal(err)
	}
	runDocCommands(t, dir, kubeconfig, docBlock(t, "migration.md", "helm -n $ns upgrade $release ./charts/"+chartName))

	// The release is this chart now.
	status := runDocCommands(t, dir, kubeconfig, "helm -n kube-system status "+chartName+" -o json")
	if !strings.Contains(status, `"status":"deployed"`) || !strings.Contains(status, `"version":2`) {
		t.Errorf("helm status after the upgrade: %.400s", status)
	}
	checkNothingOfUpstream(t, env)
	d := getDeployment(t, env, chartName)
	if r := ptr.Deref(d.Spec.Replicas, 0); r != 1 {
		t.Errorf("replicas %d, want upstream's replicaCount 1", r)
	}
	if got := mustFlag(t, d.Spec.Template.Spec.Containers[0].Args, "zap-log-level"); got != "debug" {
		t.Errorf("--zap-log-level=%s, want debug for upstream's logVerbosityLevel 5", got)
	}
	if s := configVolumeSecret(t, d); s != chartName+"-config" {
		t.Errorf("the Deployment reads its config from Secret %q, want the chart's %s-config", s, chartName)
	}
	// The Secret XO's CSI driver reads, put back under its name with the same file.
	var kept corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: chartName}, &kept); err != nil {
		t.Errorf("the upstream Secret is not back: %v", err)
	} else if string(kept.Data["config.yaml"]) != string(upstreamSecret) || kept.Labels["app.kubernetes.io/managed-by"] == "Helm" {
		t.Errorf("the Secret put back: config.yaml %q (was %q), labels %v", kept.Data["config.yaml"], upstreamSecret, kept.Labels)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.yaml")); err == nil {
		t.Error("the copy of config.yaml is left on disk")
	}

	p := runAsDeployment(t, env, d)
	p.checkServes(t, env, x, vms)

	// Rolling back, as docs/migration.md says: upstream's release again.
	runDocCommands(t, dir, kubeconfig, docBlock(t, "migration.md", "helm -n kube-system rollback "+chartName))
	var back appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: chartName}, &back); err != nil {
		t.Fatal(err)
	}
	if cs := back.Spec.Template.Spec.Containers; len(cs) != 1 || cs[0].Name != chartName {
		t.Errorf("after the rollback the Deployment runs %+v, want upstream's container only", cs)
	}
	var restored corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: chartName}, &restored); err != nil || restored.Labels["app.kubernetes.io/managed-by"] != "Helm" {
		t.Errorf("after the rollback upstream's Secret: %v, labels %v", err, restored.Labels)
	}
	mwcName, _ := flagValue(t, p.args, "webhook-configuration")
	if err := env.Client.Get(ctx, client.ObjectKey{Name: mwcName}, &admissionregistrationv1.MutatingWebhookConfiguration{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the rollback the MutatingWebhookConfiguration %s: %v, want it gone", mwcName, err)
	}
}

// startInstallEnv starts an API server that, like a cluster's, reaches a webhook Service
// through its endpoints (here written by the test, as no kubelet runs Pods).
func startInstallEnv(t *testing.T) *testenv.Env {
	t.Helper()
	return testenv.StartTest(t, testenv.Options{APIServerArgs: map[string][]string{"enable-aggregator-routing": {"true"}}})
}

// newInstallXO starts a simulated XO with one pool, one host and two running VMs.
func newInstallXO(t *testing.T) (*testenv.XO, []string) {
	t.Helper()
	x := testenv.NewXO(t, testenv.XOOptions{})
	pool := x.AddPool(t, xosim.PoolSpec{NameLabel: "pool-a"})
	host := x.AddHost(t, xosim.HostSpec{PoolID: pool, NameLabel: "xcp-a-1"})
	var vms []string
	for i, name := range []string{"node-admitted", "node-initialized"} {
		vms = append(vms, x.AddVM(t, xosim.VMSpec{PoolID: pool, HostID: host, NameLabel: name, CPUs: 2, Memory: 2 * xosim.GiB,
			IPs: []string{"10.0.0." + strconv.Itoa(i+10)}}))
	}
	return x, vms
}

// writeAdminKubeconfig writes the API server's admin kubeconfig for kubectl and helm.
func writeAdminKubeconfig(t *testing.T, env *testenv.Env) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runDocCommands runs shell commands as a user would paste them (bash, stopping at the first
// failure), in dir, with the pinned kubectl and helm first in PATH and the test's API server
// as the cluster; it returns their standard output and fails the test on an error.
func runDocCommands(t *testing.T, dir, kubeconfig, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "PATH" && k != "KUBECONFIG" && !strings.HasPrefix(k, "HELM_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "PATH="+filepath.Dir(helmBin(t))+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig,
		"HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s\n%v\n%s%s", script, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// docLine returns line, failing the test unless a line of docs/<doc> is exactly it.
func docLine(t *testing.T, doc, line string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == line {
			return line
		}
	}
	t.Fatalf("docs/%s has no line %q", doc, line)
	return ""
}

// fencedShell matches a ```sh block of Markdown, indented or not.
var fencedShell = regexp.MustCompile("(?ms)^([ \t]*)```sh\n(.*?)^[ \t]*```")

// docBlock returns the ```sh block of docs/<doc> that contains a line starting with first,
// without its indentation.
func docBlock(t *testing.T, doc, first string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range fencedShell.FindAllStringSubmatch(string(b), -1) {
		var lines []string
		found := false
		for _, l := range strings.Split(strings.TrimSuffix(m[2], "\n"), "\n") {
			l = strings.TrimPrefix(l, m[1])
			found = found || strings.HasPrefix(l, first)
			lines = append(lines, l)
		}
		if found {
			return strings.Join(lines, "\n")
		}
	}
	t.Fatalf("docs/%s has no sh block with a line starting %q", doc, first)
	return ""
}

// getDeployment returns a Deployment of the install namespace; it must have one container.
func getDeployment(t *testing.T, env *testenv.Env, name string) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: installNamespace, Name: name}, &d); err != nil {
		t.Fatal(err)
	}
	if cs := d.Spec.Template.Spec.Containers; len(cs) != 1 || cs[0].Name != "manager" || !strings.HasPrefix(cs[0].Image, image+":") {
		t.Fatalf("Deployment %s containers %+v, want this controller's only", name, cs)
	}
	return &d
}

// configVolumeSecret returns the Secret of the volume mounted where --config points.
func configVolumeSecret(t *testing.T, d *appsv1.Deployment) string {
	t.Helper()
	c := &d.Spec.Template.Spec.Containers[0]
	v, _ := volumeAt(t, d, c, path.Dir(mustFlag(t, c.Args, "config")))
	if v == nil || v.Secret == nil {
		t.Fatalf("no Secret volume holds --config %s", mustFlag(t, c.Args, "config"))
	}
	return v.Secret.SecretName
}

// checkNothingOfUpstream checks that no workload but this controller's Deployment is left, nor
// upstream's RBAC, which would still grant the ServiceAccount (the same name here) upstream's
// permissions.
func checkNothingOfUpstream(t *testing.T, env *testenv.Env) {
	t.Helper()
	ctx := t.Context()
	for _, gone := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:" + chartName}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "system:" + chartName}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: installNamespace, Name: "system:" + chartName + ":extension-apiserver-authentication-reader"}},
	} {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(gone), gone); !apierrors.IsNotFound(err) {
			t.Errorf("upstream's %T %s is left (%v)", gone, gone.GetName(), err)
		}
	}
	var deployments appsv1.DeploymentList
	var daemonSets appsv1.DaemonSetList
	if err := env.Client.List(ctx, &deployments); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.List(ctx, &daemonSets); err != nil {
		t.Fatal(err)
	}
	if len(deployments.Items) != 1 || deployments.Items[0].Name != chartName || len(daemonSets.Items) != 0 {
		t.Errorf("%d Deployments and %d DaemonSets, want this controller's Deployment only", len(deployments.Items), len(daemonSets.Items))
	}
	getDeployment(t, env, chartName)
}

// ccmBinary builds the controller binary for one test.
func ccmBinary(t *testing.T) string {
	t.Helper()
	out, err := testenv.BuildCommand(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// deployedCCM is the binary run as a Deployment's container.
type deployedCCM struct {
	args        []string
	out         *testenv.SyncBuffer
	host        string // the webhook's listen address, "" when only loopback exists
	webhookPort int
}

// hostIPv4 returns a non-loopback IPv4 address of this machine, which an Endpoints object may
// hold (the API server refuses loopback ones), or "" when there is none.
func hostIPv4() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// runAsDeployment runs the binary with the Deployment's container args, the config file read
// from the Secret its config volume names (the key --config names), as its ServiceAccount with
// the RBAC installed; only the listen addresses and the kubeconfig are the test's.
func runAsDeployment(t *testing.T, env *testenv.Env, d *appsv1.Deployment) *deployedCCM {
	t.Helper()
	ctx := t.Context()
	c := d.Spec.Template.Spec.Containers[0]
	var secret corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: configVolumeSecret(t, d)}, &secret); err != nil {
		t.Fatal(err)
	}
	key := path.Base(mustFlag(t, c.Args, "config"))
	if len(secret.Data[key]) == 0 {
		t.Fatalf("Secret %s has no key %s", secret.Name, key)
	}
	dir := t.TempDir()
	config := filepath.Join(dir, key)
	if err := os.WriteFile(config, secret.Data[key], 0o600); err != nil {
		t.Fatal(err)
	}
	sa := d.Spec.Template.Spec.ServiceAccountName
	user, err := env.ControlPlane.AddUser(envtest.User{
		Name:   "system:serviceaccount:" + d.Namespace + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + d.Namespace, "system:authenticated"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}

	p := &deployedCCM{out: &testenv.SyncBuffer{}, host: hostIPv4(), webhookPort: testenv.FreePort(t)}
	listen := p.host
	if listen == "" {
		listen = "127.0.0.1"
	}
	for _, a := range c.Args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch name {
		case "config":
			a = "--config=" + config
		case "webhook-port":
			a = "--webhook-port=" + strconv.Itoa(p.webhookPort)
		case "metrics-bind-address":
			a = "--metrics-bind-address=" + testenv.FreeAddr(t)
		case "health-probe-bind-address":
			a = "--health-probe-bind-address=" + testenv.FreeAddr(t)
		}
		p.args = append(p.args, a)
	}
	p.args = append(p.args, "--webhook-host="+listen, "--kubeconfig="+kubeconfig)

	cmd := exec.Command(ccmBinary(t), p.args...)
	cmd.Stdout, cmd.Stderr = p.out, p.out
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "XOA_") && k != "KUBECONFIG" && !strings.HasPrefix(k, "KUBERNETES_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("args %q\n--- controller output (tail) ---\n%s", p.args, tailOf(p.out.String(), 6000))
		}
	})
	return p
}

// tailOf returns the last n bytes of s.
func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// checkServes checks that the controller does its job: it fills the caBundle of its webhook
// configuration, the API server calls the webhook through its Service for a Node CREATE (the
// Node comes back described: providerID set), and the controllers initialize a Node.
func (p *deployedCCM) checkServes(t *testing.T, env *testenv.Env, x *testenv.XO, vms []string) {
	t.Helper()
	ctx := t.Context()
	mwcName, _ := flagValue(t, p.args, "webhook-configuration")
	testenv.WaitFor(t, 60*time.Second, "the caBundle of "+mwcName, func() error {
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		if err := env.Client.Get(ctx, client.ObjectKey{Name: mwcName}, &mwc); err != nil {
			return err
		}
		if len(mwc.Webhooks) == 0 || len(mwc.Webhooks[0].ClientConfig.CABundle) == 0 {
			return fmt.Errorf("no caBundle yet")
		}
		return nil
	})

	uuid := func(vm string) string {
		u, ok := x.Sim.GuestSystemUUID(vm)
		if !ok {
			t.Fatalf("no VM %s", vm)
		}
		return u
	}
	if p.host == "" {
		t.Log("no non-loopback address: the API server's call of the webhook through its Service is not checked")
	} else {
		// What the EndpointSlice controller would write for a Ready pod at this address.
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		if err := env.Client.Get(ctx, client.ObjectKey{Name: mwcName}, &mwc); err != nil {
			t.Fatal(err)
		}
		svcRef := mwc.Webhooks[0].ClientConfig.Service
		var svc corev1.Service
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: svcRef.Namespace, Name: svcRef.Name}, &svc); err != nil {
			t.Fatal(err)
		}
		portName := svc.Spec.Ports[0].Name
		eps := &corev1.Endpoints{ //nolint:staticcheck // the API server's resolver may still read Endpoints
			ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name},
			Subsets: []corev1.EndpointSubset{{ //nolint:staticcheck // as above
				Addresses: []corev1.EndpointAddress{{IP: p.host}},
				Ports:     []corev1.EndpointPort{{Name: portName, Port: int32(p.webhookPort), Protocol: corev1.ProtocolTCP}}, //nolint:staticcheck // as above
			}},
		}
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name + "-test", Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{p.host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: ptr.To(int32(p.webhookPort)), Protocol: ptr.To(corev1.ProtocolTCP)}},
		}
		for _, o := range []client.Object{eps, slice} {
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		i := 0
		testenv.WaitFor(t, 60*time.Second, "a Node described at CREATE by the webhook", func() error {
			i++
			n := testenv.KubeletNode("admitted-"+strconv.Itoa(i), testenv.WithSystemUUID(uuid(vms[0])))
			if err := env.Client.Create(ctx, n); err != nil {
				return err
			}
			if n.Spec.ProviderID == "" {
				_ = env.Client.Delete(ctx, n)
				return fmt.Errorf("node %s admitted without a providerID", n.Name)
			}
			return nil
		})
	}

	n := testenv.KubeletNode("initialized", testenv.WithSystemUUID(uuid(vms[1])))
	if err := env.Client.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 60*time.Second, "the Node initialized by the controllers", func() error {
		var got corev1.Node
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(n), &got); err != nil {
			return err
		}
		switch {
		case node.HasTaint(got.Spec.Taints, node.TaintUninitialized, ""):
			return fmt.Errorf("still tainted %s", node.TaintUninitialized)
		case !strings.HasSuffix(got.Spec.ProviderID, "/"+vms[1]) || got.Labels[node.LabelZone] == "":
			return fmt.Errorf("providerID %q labels %v", got.Spec.ProviderID, got.Labels)
		case got.Annotations[node.AnnotationManagedLabels] == "":
			return fmt.Errorf("no %s annotation: not labelled by this controller", node.AnnotationManagedLabels)
		}
		return nil
	})
}
