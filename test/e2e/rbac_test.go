package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// TestChartRBACIsEnough runs the binary as the chart's ServiceAccount, with exactly the RBAC
// the chart installs (the rendered docs/deploy manifest, which a chart test keeps current),
// through initialization, migration, shutdown, deletion and leader election, and fails on any
// request the API server forbids.
func TestChartRBACIsEnough(t *testing.T) {
	env := testenv.StartTest(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client

	var serviceAccount string
	for _, obj := range chartRBAC(t) {
		if obj.GetKind() == "ServiceAccount" {
			serviceAccount = obj.GetName()
		}
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	if serviceAccount == "" {
		t.Fatal("the manifest has no ServiceAccount")
	}
	user, err := env.ControlPlane.AddUser(envtest.User{
		Name:   "system:serviceaccount:kube-system:" + serviceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
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
	forbiddenBefore := forbiddenRequests(t, env)
	p := startCCM(t, "ccm", ccmArgs{kubeconfig: kubeconfigPath, config: cfg, leaderElect: true})
	p.waitReady(t, 30*time.Second)

	vmInit := f.addVM(t, f.poolA, f.hostA1, "rbac-init", "10.9.0.1")
	vmGone := f.addVM(t, f.poolA, f.hostA1, "rbac-gone", "10.9.0.2")
	vmHalt := f.addVM(t, f.poolA, f.hostA1, "rbac-halt", "10.9.0.3")
	for _, n := range []struct{ name, vm string }{{"rbac-init", vmInit}, {"rbac-gone", vmGone}, {"rbac-halt", vmHalt}} {
		env.AddNode(t, testenv.KubeletNode(n.name, testenv.WithSystemUUID(f.systemUUID(t, n.vm))))
	}
	env.AddNode(t, testenv.KubeletNode("rbac-unknown", testenv.WithSystemUUID("44444444-5555-4666-8777-888888888888")))
	for _, name := range []string{"rbac-init", "rbac-gone", "rbac-halt"} {
		testenv.WaitFor(t, 30*time.Second, name+" initialized", func() error { return initialized(c, name) })
	}
	if err := f.sim.Migrate(vmInit, f.hostA2); err != nil {
		t.Fatal(err)
	}
	if err := f.sim.SetPowerState(vmHalt, xo.PowerStateHalted); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"rbac-gone", "rbac-halt"} {
		if err := testenv.SetReady(ctx, c, name, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.sim.RemoveVM(vmGone); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "migration, shutdown taint and deletion", func() bool {
		n := env.Node(t, "rbac-init")
		h := env.Node(t, "rbac-halt")
		return n.Labels[node.LabelZone] == f.hostA2 && !env.NodeExists(t, "rbac-gone") &&
			node.HasTaint(h.Spec.Taints, node.TaintShutdown, corev1.TaintEffectNoSchedule)
	})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	testenv.Eventually(t, 30*time.Second, "events written", func() bool {
		list, err := cs.EventsV1().Events("").List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) > 0
	})
	if code := p.stop(t); code != 0 {
		t.Errorf("exit code %d", code)
	}
	if m := regexp.MustCompile(`(?i)[^\n]*\bforbidden\b[^\n]*`).Find(p.out.Bytes()); m != nil {
		t.Errorf("the controller was forbidden something: %s", m)
	}
	if after := forbiddenRequests(t, env); after != forbiddenBefore {
		t.Errorf("the API server answered %g requests with 403", after-forbiddenBefore)
	}
}

// chartRBAC returns the ServiceAccount and RBAC objects of the rendered manifest.
func chartRBAC(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "deploy", "cloud-controller-manager.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(string(data), "\n---") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{Object: m}
		switch obj.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			out = append(out, obj)
		}
	}
	if len(out) < 5 {
		t.Fatalf("found %d RBAC objects in the manifest", len(out))
	}
	return out
}

// forbiddenRequests sums the API server's apiserver_request_total with code 403.
func forbiddenRequests(t *testing.T, env *testenv.Env) float64 {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	s := bufio.NewScanner(bytes.NewReader(raw))
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(line, "apiserver_request_total{") && strings.Contains(line, `code="403"`) {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}
