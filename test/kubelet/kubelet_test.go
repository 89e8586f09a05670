// Package kubelet_test is the strongest proof of the design: a genuine kubelet, started with
// --cloud-provider=external under a node identity against an API server enforcing the Node
// authorizer and NodeRestriction, registers its Node; the webhook patches that very CREATE
// (the Node is stored with its providerID and labels from the start) and the controller then
// lifts the uninitialized taint.
//
// It needs root (the kubelet tunes sysctls, bind-mounts its root folder and needs a --node-ip
// on a local interface) and the kubelet binary of hack/testbin.sh; it skips, saying so,
// without either. It restores every host change it or the kubelet makes.
package kubelet_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	crifake "k8s.io/cri-client/pkg/fake"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

const (
	token    = "kubelet-test-token-0123456789abcdefghijklmnop"
	nodeName = "xo-kubelet-node-1"
	// timeout bounds the whole test once the control plane runs.
	timeout = 60 * time.Second
)

// kubeletConfig is the KubeletConfiguration of every kubelet here: cgroup v1 allowed (cgroupfs),
// no QoS cgroups nor node allocatable enforcement, no swap check, no eviction thresholds, no
// iptables chains of its own, no image garbage collection (no image can be pulled again here),
// serving on an address (first verb) and port with no anonymous access, trusting the client
// certificates of a CA (a file, or "" for none: the API server's, for kubectl logs), with a
// CRI endpoint and a folder for the Pods' logs.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: %q
authorization:
  mode: AlwaysAllow
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
makeIPTablesUtilChains: false
containerRuntimeEndpoint: %[4]s
imageServiceEndpoint: %[4]s
podLogsDir: %s
syncFrequency: 10s
`

// TestRealKubeletRegistersInitializedNode runs the whole chain with a real kubelet as the
// client: the stored Node carries the providerID and labels from its first version (the
// webhook mutated the kubelet's own CREATE) and, described completely, no uninitialized taint
// (born complete): the real scheduler places a Pod on it at once and the kubelet runs it,
// while the controller writes nothing to the Node.
func TestRealKubeletRegistersInitializedNode(t *testing.T) {
	// Skipped where it cannot run, but never in CI (.ci/run sets REQUIRE_KUBELET_TEST=1).
	assets := requireRealNode(t, "kubelet", "kube-scheduler")
	kubeletBin := filepath.Join(assets, "kubelet")

	logs := &testenv.SyncBuffer{}
	ctrl.SetLogger(zap.New(zap.WriteTo(logs), zap.Level(zapcore.InfoLevel)))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller log:\n%s", tailString(logs.String(), 60))
		}
	})

	// XO: one pool, one host, the kubelet's VM. A real kubelet reports the host's DMI product
	// uuid as systemUUID, which the test cannot choose: the VM gets that uuid when there is
	// one, else the node's name (how PV/PVH guests without SMBIOS are matched).
	x := testenv.NewXO(t, testenv.XOOptions{Token: token})
	pool := x.AddPool(t, xosim.PoolSpec{NameLabel: "dc1-pool-a"})
	host := x.AddHost(t, xosim.HostSpec{PoolID: pool, NameLabel: "xcp-host-01"})
	nodeIP := addLoopbackIP(t)
	systemUUID := hostSystemUUID()
	vmSpec := xosim.VMSpec{PoolID: pool, HostID: host, CPUs: 2, Memory: xosim.GiB, IPs: []string{nodeIP}}
	if systemUUID != "" {
		vmSpec.ID, vmSpec.NameLabel = systemUUID, "vm-of-"+nodeName
		t.Logf("matching by systemUUID: the VM has the host's DMI product uuid %s", systemUUID)
	} else {
		vmSpec.NameLabel = nodeName
		t.Logf("no readable DMI product uuid: matching by name (VM name_label %s)", nodeName)
	}
	vm := x.AddVM(t, vmSpec)

	// Control plane enforcing node identities, with the webhook registered.
	start := time.Now()
	env := testenv.StartTest(t, testenv.Options{
		Webhook: true,
		APIServerArgs: map[string][]string{
			"authorization-mode":       {"Node,RBAC"},
			"enable-admission-plugins": {"NodeRestriction"},
		},
	})
	t.Logf("control plane started in %s", time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)

	// The controller, in-process, as the binary wires it.
	start = time.Now()
	probe := testenv.FreeAddr(t)
	o := app.NewOptions()
	wo := env.WebhookInstallOptions
	o.WebhookHost, o.WebhookPort, o.WebhookCertDir = wo.LocalServingHost, wo.LocalServingPort, wo.LocalServingCertDir
	o.LeaderElect = false
	o.MetricsBindAddress = "0"
	o.HealthProbeBindAddress = probe
	// A short settle time: a pool is trusted for name matches (this host has no DMI uuid) one
	// settle time after the first listing, and the controller is Ready then.
	const settle = time.Second
	o.ConfigFile = filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(o.ConfigFile, fmt.Appendf(nil, "url: %s\ntoken: %s\ninventory: {settleTime: %s}\n", x.URL, token, settle), 0o600); err != nil {
		t.Fatal(err)
	}
	mgrCtx, stopMgr := context.WithCancel(context.Background())
	// The controller's requests, to count its writes to the kubelet's Node.
	var writes testenv.RequestCounter
	var mgrErr error
	mgrDone := make(chan struct{})
	go func() {
		defer close(mgrDone)
		mgrErr = app.Run(mgrCtx, o, writes.Config(env.Config), func(string) string { return "" })
	}()
	t.Cleanup(func() {
		stopMgr()
		<-mgrDone
		if mgrErr != nil {
			t.Errorf("controller: %v", mgrErr)
		}
	})
	// Ready means the pool of the first listing is trusted: name matches are too.
	waitReady(ctx, t, "http://"+probe+"/readyz", mgrDone)
	t.Logf("controller ready (inventory synced and settled, webhook serving) in %s", time.Since(start).Round(time.Millisecond))

	// The kubelet's identity, as a TLS-bootstrapped kubelet ends up with.
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "system:node:" + nodeName, Groups: []string{"system:nodes"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	kubeconfigFile := filepath.Join(dir, "kubelet.kubeconfig")
	if err := os.WriteFile(kubeconfigFile, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}

	// A fake CRI runtime served from this process.
	cri := crifake.NewFakeRemoteRuntime()
	criEndpoint := "unix://" + filepath.Join(dir, "cri.sock")
	if err := cri.Start(criEndpoint); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cri.Stop)
	// Images the fake runtime "pulls" need a size, or the kubelet refuses them.
	cri.ImageService.SetFakeImageSize(1 << 20)

	rootDir := filepath.Join(dir, "root")
	configFile := filepath.Join(dir, "kubelet.yaml")
	cfg := fmt.Sprintf(kubeletConfig, "127.0.0.1", testenv.FreePort(t), "", criEndpoint, filepath.Join(dir, "pod-logs"))
	if err := os.WriteFile(configFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	// Watch from before the kubelet starts: the first event is the Node as first stored.
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Fatalf("%d Nodes before the kubelet started", len(list.Items))
	}
	w, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + nodeName, ResourceVersion: list.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	// Host changes of the kubelet, undone in t.Cleanup after it is killed (cleanups run last
	// registered first, and the kubelet's is registered last).
	saveSysctls(t)
	removeCreatedHostPaths(t)
	removeNewChains(t)
	unmountUnder(t, rootDir)
	kubelet := startProcess(t, "kubelet", kubeletBin, filepath.Join(dir, "kubelet.log"),
		"--config="+configFile,
		"--kubeconfig="+kubeconfigFile,
		"--root-dir="+rootDir,
		"--cert-dir="+filepath.Join(dir, "pki"),
		"--cloud-provider=external",
		"--hostname-override="+nodeName,
		"--node-ip="+nodeIP,
		"--register-node=true",
		"--v=1",
	)

	// The Node as first stored.
	first := nextNode(ctx, t, w, kubelet, watch.Added)
	registeredAt := time.Now()
	registered := registeredAt.Sub(kubelet.started)
	t.Logf("kubelet start → Node registered: %s (resourceVersion %s)", registered.Round(time.Millisecond), first.ResourceVersion)
	// Without DMI the kubelet reports the machine-id instead, which matches no VM: resolution
	// falls through to the name.
	t.Logf("the kubelet reported systemUUID %q", first.Status.NodeInfo.SystemUUID)
	if systemUUID != "" && !strings.EqualFold(first.Status.NodeInfo.SystemUUID, systemUUID) {
		t.Errorf("the kubelet reported systemUUID %q, the host's DMI product uuid is %q", first.Status.NodeInfo.SystemUUID, systemUUID)
	}
	wantDescribed(t, first, pool, host, vm, vmSpec.NameLabel)
	if got := first.Annotations["alpha.kubernetes.io/provided-node-ip"]; got != nodeIP {
		t.Errorf("annotation alpha.kubernetes.io/provided-node-ip = %q, want %q (the kubelet's --node-ip)", got, nodeIP)
	}
	// Born complete: the VM is known with an address (and the kubelet gave --node-ip), so the
	// webhook lifted the kubelet's uninitialized taint in the CREATE's own patch.
	if node.HasTaint(first.Spec.Taints, node.TaintUninitialized, "") || first.Annotations[node.AnnotationInitializedBy] != node.InitializedByWebhook {
		t.Errorf("first stored Node not born complete: taints %v, %s %q", first.Spec.Taints, node.AnnotationInitializedBy, first.Annotations[node.AnnotationInitializedBy])
	}
	// The first version has one writer, the kubelet, which did not send the providerID nor
	// our labels (managedFields record the request as sent, before mutating admission): they
	// were added by the webhook to the kubelet's own CREATE.
	if len(first.ManagedFields) == 0 {
		t.Error("first stored Node has no managedFields")
	}
	for _, mf := range first.ManagedFields {
		if mf.Manager != "kubelet" {
			t.Errorf("first stored Node has fields managed by %q (%s): want only the kubelet's CREATE", mf.Manager, mf.Operation)
		}
	}
	sent := managedFieldsOf(first, "kubelet")
	for _, f := range []string{`"f:providerID"`, `"f:` + node.LabelRegion + `"`, `"f:` + node.LabelVMName + `"`} {
		if strings.Contains(sent, f) {
			t.Errorf("the kubelet itself sent %s: the test does not prove the webhook set it (kubelet fields: %s)", f, sent)
		}
	}
	if !strings.Contains(sent, `"f:`+corev1.LabelHostname+`"`) {
		t.Errorf("the kubelet's fields lack its own %s label: %s", corev1.LabelHostname, sent)
	}
	if t.Failed() {
		t.FailNow()
	}

	// The kubelet sent its taints, the uninitialized one among them: the webhook removed it
	// from the kubelet's own request.
	if !strings.Contains(sent, `"f:taints"`) {
		t.Errorf("the kubelet did not send taints: the test does not prove the webhook lifted one (kubelet fields: %s)", sent)
	}

	// A Pod lands on it at once: the real scheduler binds it (no toleration of the
	// uninitialized taint) and the kubelet runs it, while cloud-node writes nothing to the Node.
	pod := schedulePod(t, env, cs, assets, dir)
	t.Logf("Node registered → a Pod scheduled on it and running: %s", time.Since(registeredAt).Round(time.Millisecond))
	testenv.Eventually(t, 10*time.Second, "cloud-node reconciled the Node, its queue empty", func() bool {
		return testenv.MetricValue(t, "controller_runtime_reconcile_total", map[string]string{"controller": "cloud-node"}) > 0 &&
			testenv.MetricValue(t, "workqueue_depth", map[string]string{"name": "cloud-node"}) == 0 &&
			testenv.MetricValue(t, "controller_runtime_active_workers", map[string]string{"controller": "cloud-node"}) == 0
	})
	if w := writes.NodeWrites(nodeName); w != 0 {
		t.Errorf("the controller wrote the born-complete Node %d times, want 0", w)
	}
	got, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantDescribed(t, got, pool, host, vm, vmSpec.NameLabel)
	if pod.Spec.NodeName != nodeName {
		t.Errorf("Pod %s bound to %q, want %q", pod.Name, pod.Spec.NodeName, nodeName)
	}
	select {
	case <-kubelet.exited:
		t.Errorf("the kubelet exited: %v", kubelet.err)
	default:
	}
}

// wantDescribed checks the providerID and labels the webhook sets for the VM.
func wantDescribed(t *testing.T, n *corev1.Node, pool, host, vm, vmName string) {
	t.Helper()
	if want := node.FormatProviderID(pool, vm); n.Spec.ProviderID != want {
		t.Errorf("providerID %q, want %q", n.Spec.ProviderID, want)
	}
	want := map[string]string{
		node.LabelRegion:       pool,
		node.LabelZone:         host,
		node.LabelInstanceType: "2vCPU-1GB",
		node.LabelPoolID:       pool,
		node.LabelPoolName:     "dc1-pool-a",
		node.LabelHostID:       host,
		node.LabelHostName:     "xcp-host-01",
		node.LabelVMName:       vmName,
		corev1.LabelHostname:   nodeName,
	}
	for k, v := range want {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if n.Annotations[node.AnnotationManagedLabels] == "" {
		t.Errorf("no %s annotation", node.AnnotationManagedLabels)
	}
}

// managedFieldsOf returns the fieldsV1 JSON of a manager's entries.
func managedFieldsOf(n *corev1.Node, manager string) string {
	var b bytes.Buffer
	for _, mf := range n.ManagedFields {
		if mf.Manager == manager && mf.FieldsV1 != nil {
			b.Write(mf.FieldsV1.GetRawBytes())
		}
	}
	return b.String()
}

// nextNode returns the Node of the next watch event, which must be of type want; it fails
// the test when the kubelet exits, the watch ends or ctx expires first.
func nextNode(ctx context.Context, t *testing.T, w watch.Interface, k *process, want watch.EventType) *corev1.Node {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the Node watch ended")
		}
		n, isNode := ev.Object.(*corev1.Node)
		if ev.Type != want || !isNode {
			t.Fatalf("watch event %s %T, want %s of a Node", ev.Type, ev.Object, want)
		}
		return n
	case <-k.exited:
		t.Fatalf("the kubelet exited: %v", k.err)
	case <-ctx.Done():
		t.Fatalf("waiting for a %s Node event: %v", want, ctx.Err())
	}
	return nil
}

// waitReady polls the controller's readiness endpoint.
func waitReady(ctx context.Context, t *testing.T, url string, done <-chan struct{}) {
	t.Helper()
	for {
		select {
		case <-done:
			t.Fatal("controller stopped before it was ready")
		case <-ctx.Done():
			t.Fatalf("controller not ready: %v", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		resp, err := http.Get(url) //nolint:gosec // loopback probe
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
	}
}

// tailString returns the last n lines of s.
func tailString(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// schedulePod starts the real kube-scheduler and creates a Pod that tolerates the not-ready
// taint (no kube-controller-manager lifts it here) but not the uninitialized one, and waits
// until the scheduler has bound it to the kubelet's Node and the kubelet runs it.
func schedulePod(t *testing.T, env *testenv.Env, cs kubernetes.Interface, assets, dir string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "system:kube-scheduler"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigFile := filepath.Join(dir, "scheduler.kubeconfig")
	if err := os.WriteFile(kubeconfigFile, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	startProcess(t, "kube-scheduler", filepath.Join(assets, "kube-scheduler"), filepath.Join(dir, "kube-scheduler.log"),
		"--kubeconfig="+kubeconfigFile,
		"--authentication-kubeconfig="+kubeconfigFile,
		"--authorization-kubeconfig="+kubeconfigFile,
		"--leader-elect=false",
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", testenv.FreePort(t)),
		"--cert-dir="+filepath.Join(dir, "scheduler-certs"),
	)
	// No kube-controller-manager makes the namespace's ServiceAccount.
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "lands-at-once"},
		Spec: corev1.PodSpec{
			NodeSelector:                 map[string]string{corev1.LabelHostname: nodeName},
			AutomountServiceAccountToken: ptr.To(false),
			Tolerations:                  []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists}},
			Containers:                   []corev1.Container{{Name: "c", Image: "registry.invalid/pause:1"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods("default").Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	testenv.WaitFor(t, timeout, "the Pod bound to the Node and running", func() error {
		p, err := cs.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("Pod bound to %q, phase %s, conditions %v", p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
		}
		pod = p
		return nil
	})
	return pod
}
