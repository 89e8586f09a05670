package kubelet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app/diagnose"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

const (
	// release is the Helm release; fullnameOverride makes it every object's name.
	release = "xoccm"
	// clusterSettle is the inventory's settle time in these installs: a replica is Ready one
	// settle time after its first listing (docs/install.md, "What Ready means").
	clusterSettle = 5 * time.Second
	// fakeTaint keeps Pods off the Nodes the test creates without a kubelet behind them.
	fakeTaint = "xoccm.test/no-kubelet"
)

// estate is the XO side of the cluster tests: one pool on two hosts, the real node's VM and
// VMs for the Nodes the test creates.
type estate struct {
	x           *testenv.XO
	pool, hostA string
	hostB       string
	realVM      string
	realVMName  string
	n           int
}

func newEstate(t *testing.T, c *realCluster) *estate {
	e := &estate{x: testenv.NewXO(t, testenv.XOOptions{Token: token, Host: c.nodeIP})}
	e.pool = e.x.AddPool(t, xosim.PoolSpec{NameLabel: "dc1-pool-a"})
	e.hostA = e.x.AddHost(t, xosim.HostSpec{PoolID: e.pool, NameLabel: "xcp-host-01"})
	e.hostB = e.x.AddHost(t, xosim.HostSpec{PoolID: e.pool, NameLabel: "xcp-host-02"})
	spec := xosim.VMSpec{PoolID: e.pool, HostID: e.hostA, CPUs: 2, Memory: xosim.GiB, IPs: []string{c.nodeIP}}
	if u := hostSystemUUID(); u != "" {
		spec.ID, spec.NameLabel = u, "vm-of-"+clusterNode
	} else {
		spec.NameLabel = clusterNode
	}
	e.realVMName = spec.NameLabel
	e.realVM = e.x.AddVM(t, spec)
	return e
}

// matchBy is how a test Node matches its VM.
type matchBy int

const (
	byUUID matchBy = iota
	byName
	byAddress
)

func (m matchBy) String() string { return [...]string{"uuid", "name", "address"}[m] }

// newNode adds a VM and returns a Node as its kubelet registers it, matching the VM only by m.
func (e *estate) newNode(t *testing.T, prefix string, m matchBy) (*corev1.Node, string) {
	e.n++
	i := e.n
	name := fmt.Sprintf("%s-%d", prefix, i)
	ip := fmt.Sprintf("10.253.%d.%d", i/250, i%250+1)
	spec := xosim.VMSpec{PoolID: e.pool, HostID: e.hostA, CPUs: 2, Memory: xosim.GiB, NameLabel: "vm-" + name, IPs: []string{ip}}
	opts := []testenv.NodeOption{testenv.WithTaints(corev1.Taint{Key: fakeTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule})}
	switch m {
	case byUUID:
		opts = append(opts, testenv.WithSystemUUID(""))
	case byName:
		spec.NameLabel = name
	case byAddress:
		opts = append(opts, testenv.WithNodeIP(ip))
	}
	vm := e.x.AddVM(t, spec)
	if m == byUUID {
		opts[len(opts)-1] = testenv.WithSystemUUID(vm)
	}
	return testenv.KubeletNode(name, opts...), vm
}

// labelled reports whether the Node as its CREATE returned carries the webhook's providerID.
func labelled(n *corev1.Node) bool {
	return strings.HasPrefix(n.Spec.ProviderID, node.ProviderName+"://") && n.Labels[node.LabelRegion] != ""
}

// TestChartOnRealNode installs the release built by make release, from an OCI registry, with
// the real helm on a real single-node cluster and watches what an operator would: the Pods
// Running and Ready on the image containerd pulled by digest, Nodes labelled by the webhook Pod
// in their CREATE, the uninitialized taint lifted by the leader, a rollout and a failover with
// Nodes arriving, the security settings in the running container, what uninstall leaves, the
// upgrade from the previous release and the rollback to it with Nodes arriving, and the
// release's plain manifests applied with kubectl.
func TestChartOnRealNode(t *testing.T) {
	c := startRealCluster(t)
	e := newEstate(t, c)
	ctx := context.Background()
	const ns = "xoccm-system"

	// The VMs of the Nodes created below exist before the install: the replicas' first listing
	// has them (a VM added after a replica's listing reaches it by XO's event stream, a race
	// with a CREATE sent at once that matching by name or address would lose).
	var first []*corev1.Node
	var firstVMs []string
	for _, m := range []matchBy{byUUID, byName, byAddress} {
		n, vm := e.newNode(t, "create", m)
		first, firstVMs = append(first, n), append(firstVMs, vm)
	}

	// As users install it: helm upgrade -i from the OCI registry, the chart's version given.
	start := time.Now()
	c.helm(t, "upgrade", release, "-i", "--namespace", ns, "--create-namespace", "-f", c.values(t, e, "selfManaged", nil))
	c.waitPodsReady(t, ns, 2, 90*time.Second)
	t.Logf("helm upgrade -i %s --version %s → 2 Pods Ready: %s", c.chartRef(), c.release.chartVersion, time.Since(start).Round(time.Millisecond))

	t.Run("ImagePulledFromTheRegistryByDigest", func(t *testing.T) {
		ready, _, err := c.readyPods(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		c.checkPulled(t, ready, c.release)
	})

	t.Run("RealKubeletNodeInitializedByLeader", func(t *testing.T) {
		// The kubelet registered before the chart was installed: the leader described it and
		// lifted the taint.
		waitFor(t, nil, 60*time.Second, "the real Node initialized", func(ctx context.Context) (bool, error) {
			n, err := c.cs.CoreV1().Nodes().Get(ctx, clusterNode, metav1.GetOptions{})
			return err == nil && !node.HasTaint(n.Spec.Taints, node.TaintUninitialized, "") && n.Spec.ProviderID != "", nil
		})
		n, _ := c.cs.CoreV1().Nodes().Get(ctx, clusterNode, metav1.GetOptions{})
		wantDescribedOn(t, n, e, e.realVM, e.realVMName, clusterNode)
	})

	t.Run("CheckPasses", func(t *testing.T) {
		c.checkPasses(t, ns)
	})

	t.Run("NodesLabelledInTheirCreate", func(t *testing.T) {
		for i, n := range first {
			got, err := c.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if want := node.FormatProviderID(e.pool, firstVMs[i]); got.Spec.ProviderID != want {
				t.Errorf("Node %s (match by %s) came back from CREATE with providerID %q, want %q", n.Name, matchBy(i), got.Spec.ProviderID, want)
			}
		}
	})

	t.Run("RealKubeletRegistersLabelled", func(t *testing.T) {
		// The kubelet registers its Node again once it is deleted and the kubelet restarted:
		// this time the webhook Pod labels the kubelet's own CREATE, unless the API server found
		// the webhook Service without endpoints: the Pods run on this very Node, and the
		// EndpointSlice controller drops the endpoints of Pods whose Node is gone (a
		// single-node cluster's case; its log then says so, and cloud-node initializes it).
		apiLog := c.path("kube-apiserver.log")
		logStart := fileSize(apiLog)
		list, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + clusterNode})
		if err != nil {
			t.Fatal(err)
		}
		w, err := c.cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + clusterNode, ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		c.restartKubelet(t, func() {
			if err := c.cs.CoreV1().Nodes().Delete(ctx, clusterNode, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		})
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		var first *corev1.Node
		for first == nil {
			select {
			case ev := <-w.ResultChan():
				if n, ok := ev.Object.(*corev1.Node); ok && ev.Type == watch.Added {
					first = n
				}
			case <-wctx.Done():
				t.Fatal("the kubelet did not register its Node again within 60 s")
			}
		}
		if first.Spec.ProviderID == "" && len(noEndpointTimes(apiLog, logStart)) > 0 {
			t.Logf("the kubelet's CREATE was admitted unchanged: the API server found no endpoint of the webhook Service, whose Pods run on the deleted Node")
			if !node.HasTaint(first.Spec.Taints, node.TaintUninitialized, corev1.TaintEffectNoSchedule) {
				t.Error("the kubelet's Node, admitted unchanged, was stored without the uninitialized taint")
			}
		} else {
			wantDescribedOn(t, first, e, e.realVM, e.realVMName, clusterNode)
			// Described completely (the VM's address, the kubelet's --node-ip): born complete.
			if node.HasTaint(first.Spec.Taints, node.TaintUninitialized, "") || first.Annotations[node.AnnotationInitializedBy] != node.InitializedByWebhook {
				t.Errorf("the kubelet's Node, described at CREATE, was not born complete: taints %v, annotations %v", first.Spec.Taints, first.Annotations)
			}
		}
		waitFor(t, c.kubelet, 60*time.Second, "the real Node Ready and initialized", func(ctx context.Context) (bool, error) {
			n, err := c.cs.CoreV1().Nodes().Get(ctx, clusterNode, metav1.GetOptions{})
			return err == nil && nodeReady(n) && !node.HasTaint(n.Spec.Taints, node.TaintUninitialized, ""), nil
		})
		// The controller's Pods survived the kubelet's restart.
		c.waitPodsReady(t, ns, 2, 60*time.Second)
		// And the webhook Service routes to them again: while their Node was gone, the
		// EndpointSlice controller skipped them ("Node not found") and retries the Service with
		// a backoff of up to minutes, which no event of the Node's return shortens; a Pod Ready
		// but missing from the endpoints left the next test a single replica to route to
		// ("no endpoints available" when it terminated). A Service update resyncs it at once.
		c.resyncEndpoints(t, ns, release+"-webhook", 2)
	})

	t.Run("SecuritySettingsInTheRunningContainer", func(t *testing.T) {
		for _, p := range c.waitPodsReady(t, ns, 2, 30*time.Second) {
			c.checkContainerSecurity(t, p)
		}
	})

	t.Run("RolloutUnderLoad", func(t *testing.T) {
		c.changeUnderLoad(t, e, ns, "rollout of 2 replicas", "rollout", func(start time.Time) {
			c.helm(t, "upgrade", release, "--namespace", ns, "--reuse-values", "--set-string", "podAnnotations.rollout="+start.Format("150405"))
		})
	})

	t.Run("Failover", func(t *testing.T) {
		c.failover(t, e, ns)
	})

	t.Run("UninstallLeavesWhatTheDocsSay", func(t *testing.T) {
		c.helm(t, "uninstall", release, "--namespace", ns, "--wait")
		waitFor(t, nil, 60*time.Second, "the release's Pods gone", func(ctx context.Context) (bool, error) {
			l, err := c.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(l.Items) == 0, nil
		})
		// docs/install.md: the CA Secret the controller made stays; so does the Lease it held.
		var left []string
		add := func(kind string, l runtime.Object, err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			items, err := meta.ExtractList(l)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range items {
				if m, err := meta.Accessor(o); err == nil && (kind != "cluster" || strings.Contains(m.GetName(), release)) {
					left = append(left, kind+"/"+m.GetName())
				}
			}
		}
		lo := metav1.ListOptions{}
		l1, err := c.cs.CoreV1().Secrets(ns).List(ctx, lo)
		add("Secret", l1, err)
		l2, err := c.cs.CoreV1().ConfigMaps(ns).List(ctx, lo)
		add("ConfigMap", l2, err)
		l3, err := c.cs.CoreV1().ServiceAccounts(ns).List(ctx, lo)
		add("ServiceAccount", l3, err)
		l4, err := c.cs.CoreV1().Services(ns).List(ctx, lo)
		add("Service", l4, err)
		l5, err := c.cs.AppsV1().Deployments(ns).List(ctx, lo)
		add("Deployment", l5, err)
		l6, err := c.cs.PolicyV1().PodDisruptionBudgets(ns).List(ctx, lo)
		add("PodDisruptionBudget", l6, err)
		l7, err := c.cs.RbacV1().Roles(ns).List(ctx, lo)
		add("Role", l7, err)
		l8, err := c.cs.RbacV1().RoleBindings(ns).List(ctx, lo)
		add("RoleBinding", l8, err)
		l9, err := c.cs.CoordinationV1().Leases(ns).List(ctx, lo)
		add("Lease", l9, err)
		// Cluster-scoped objects named after the release.
		l10, err := c.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, lo)
		add("cluster", l10, err)
		l11, err := c.cs.RbacV1().ClusterRoles().List(ctx, lo)
		add("cluster", l11, err)
		l12, err := c.cs.RbacV1().ClusterRoleBindings().List(ctx, lo)
		add("cluster", l12, err)
		sort.Strings(left)
		want := []string{
			"ConfigMap/kube-root-ca.crt",        // kube-controller-manager's, in every namespace
			"Lease/" + app.LeaseName,            // the leader election's record
			"Secret/" + release + "-webhook-ca", // docs/install.md: the controller made it
			"ServiceAccount/default",            // the namespace's own
		}
		sort.Strings(want)
		if strings.Join(left, " ") != strings.Join(want, " ") {
			t.Errorf("after helm uninstall the namespace and cluster hold %q, want %q", left, want)
		}
	})

	t.Run("ExistingSecret", func(t *testing.T) {
		const ns = "xoccm-existing"
		ca := testenv.NewCA(t, "xoccm-test-webhook-ca")
		svc := release + "-webhook"
		crt, key := ca.Issue(t, 2, svc+"."+ns+".svc", svc, svc+"."+ns)
		c.createNamespace(t, ns)
		n, vm := e.newNode(t, "existing", byName) // before the install: see first above
		if _, err := c.cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "webhook-tls"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.helm(t, "install", release, "--namespace", ns, "-f", c.values(t, e, "existingSecret", map[string]any{
			"webhook": map[string]any{"certificates": map[string]any{"mode": "existingSecret",
				"existingSecret": map[string]any{"name": "webhook-tls", "caBundle": b64(ca.PEM)}}},
		}))
		c.waitPodsReady(t, ns, 2, 90*time.Second)
		c.createDescribed(t, e, n, vm)
		c.helm(t, "uninstall", release, "--namespace", ns, "--wait")
	})

	t.Run("ExistingSecretMissing", func(t *testing.T) {
		// A Secret name with a typo: the Pods are never Ready, and say why.
		const ns = "xoccm-missing"
		c.createNamespace(t, ns)
		ca := testenv.NewCA(t, "xoccm-test-webhook-ca")
		c.helm(t, "install", release, "--namespace", ns, "-f", c.values(t, e, "existingSecret", map[string]any{
			"webhook": map[string]any{"certificates": map[string]any{"mode": "existingSecret",
				"existingSecret": map[string]any{"name": "webhook-tsl", "caBundle": b64(ca.PEM)}}},
		}))
		var reason string
		waitFor(t, c.kubelet, 60*time.Second, "an event naming the missing Secret", func(ctx context.Context) (bool, error) {
			l, err := c.cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for _, ev := range l.Items {
				if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, `"webhook-tsl"`) {
					reason = ev.Reason + ": " + ev.Message
					return true, nil
				}
			}
			return false, nil
		})
		t.Logf("kubectl describe shows: %s", reason)
		ready, all, err := c.readyPods(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		if len(ready) != 0 || len(all) != 2 {
			t.Errorf("with the Secret missing: %d Pods, %d Ready; want 2 Pods, none Ready", len(all), len(ready))
		}
		c.helm(t, "uninstall", release, "--namespace", ns, "--wait")
	})

	t.Run("UpgradeFromPreviousRelease", func(t *testing.T) {
		c.upgradeFromPrevious(t, e)
	})

	t.Run("PlainManifestsFromRelease", func(t *testing.T) {
		c.plainManifests(t, e)
	})
}

// createDescribed creates a Node as its kubelet does and fails the test unless the CREATE's
// answer carries the providerID of its VM vm (the webhook described it), then waits until the
// Node is initialized.
func (c *realCluster) createDescribed(t *testing.T, e *estate, n *corev1.Node, vm string) {
	t.Helper()
	got, err := c.cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := node.FormatProviderID(e.pool, vm); got.Spec.ProviderID != want {
		t.Errorf("Node %s came back from CREATE with providerID %q, want %q", n.Name, got.Spec.ProviderID, want)
	}
	c.waitInitialized(t, []string{n.Name}, 30*time.Second)
}

// resyncEndpoints has the EndpointSlice controller sync the Service now (an annotation
// changed) and waits until its EndpointSlices hold want ready endpoints.
func (c *realCluster) resyncEndpoints(t *testing.T, ns, svc string, want int) {
	t.Helper()
	ctx := context.Background()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"xoccm.test/resync":%q}}}`, time.Now().Format(time.RFC3339Nano))
	if _, err := c.cs.CoreV1().Services(ns).Patch(ctx, svc, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c.kubelet, 30*time.Second, fmt.Sprintf("%d ready endpoints of Service %s", want, svc), func(ctx context.Context) (bool, error) {
		return c.readyEndpoints(ctx, ns, svc) == want, nil
	})
}

// serviceSlices lists the Service's EndpointSlices.
func (c *realCluster) serviceSlices(ctx context.Context, ns, svc string) (*discoveryv1.EndpointSliceList, error) {
	return c.cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
}

// readyEndpoints counts the ready endpoints of the Service's EndpointSlices: where the API
// server routes admissions (0 on error).
func (c *realCluster) readyEndpoints(ctx context.Context, ns, svc string) int {
	l, err := c.serviceSlices(ctx, ns, svc)
	if err != nil {
		return 0
	}
	n := 0
	for _, s := range l.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				n++
			}
		}
	}
	return n
}

// endpointsState describes the Service's EndpointSlices: each endpoint's Pod and conditions.
func (c *realCluster) endpointsState(ctx context.Context, ns, svc string) string {
	l, err := c.serviceSlices(ctx, ns, svc)
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, s := range l.Items {
		for _, ep := range s.Endpoints {
			name := ""
			if ep.TargetRef != nil {
				name = ep.TargetRef.Name
			}
			parts = append(parts, fmt.Sprintf("%s/%s ready=%v serving=%v terminating=%v", s.Name, name, deref(ep.Conditions.Ready), deref(ep.Conditions.Serving), deref(ep.Conditions.Terminating)))
		}
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

func deref(b *bool) string {
	if b == nil {
		return "nil"
	}
	return strconv.FormatBool(*b)
}

func (c *realCluster) createNamespace(t *testing.T, ns string) {
	t.Helper()
	if _, err := c.cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// fileSize returns the size of a file (0 when it cannot be read).
func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// TestNoEndpointTimes: the API server's "failing open ... no endpoints available" lines of the
// webhook's Service are found, from the offset on, with their klog time.
func TestNoEndpointTimes(t *testing.T) {
	lines := []string{
		`W1128 04:12:11.000001   29120 dispatcher.go:210] Failed calling webhook, failing open nodes.k8s.xenorchestra: failed calling webhook "nodes.k8s.xenorchestra": failed to call webhook: Post "https://xoccm-webhook.xoccm-system.svc:443/mutate-v1-node?timeout=5s": no endpoints available for service "xoccm-webhook"`,
		`W1128 04:12:12.004703   29120 dispatcher.go:210] Failed calling webhook, failing open nodes.k8s.xenorchestra: failed calling webhook "nodes.k8s.xenorchestra": failed to call webhook: Post "https://xoccm-webhook.xoccm-system.svc:443/mutate-v1-node?timeout=5s": no endpoints available for service "xoccm-webhook"`,
		`W1128 04:12:13.000000   29120 dispatcher.go:210] Failed calling webhook, failing open nodes.k8s.xenorchestra: failed calling webhook "nodes.k8s.xenorchestra": failed to call webhook: Post "https://xoccm-webhook.xoccm-system.svc:443/mutate-v1-node?timeout=5s": context deadline exceeded`,
	}
	f := filepath.Join(t.TempDir(), "kube-apiserver.log")
	if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got := noEndpointTimes(f, int64(len(lines[0])+1))
	want := time.Date(time.Now().Year(), 11, 28, 4, 12, 12, 4703000, time.Local)
	if len(got) != 1 || !got[0].Equal(want) {
		t.Fatalf("got %v, want [%v]", got, want)
	}
}

// checkPasses runs check against the chart's Pods, as an operator would after the install,
// with the admin's kubeconfig and the token of a ServiceAccount bound to the chart's
// metrics-reader ClusterRole (the admin's kubeconfig authenticates with a client certificate,
// which the metrics endpoint does not take): the webhook's served certificate and the replicas'
// metrics, over HTTPS and verified with the webhook's CA, are reached through port-forwards to
// the Pods, through the API server and the kubelet. It waits until nothing fails (the
// Deployment counts as available minReadySeconds after its Pods are Ready), then checks what
// passed. The one warning allowed is the XO URL's plain HTTP (the simulator's).
func (c *realCluster) checkPasses(t *testing.T, ns string) {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "metrics-token")
	token := testenv.ServiceAccountToken(t, c.cfg, ns, "check-metrics", release+"-metrics-reader")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	var rep *diagnose.Report
	var took time.Duration
	start, runs := time.Now(), 0
	waitFor(t, c.kubelet, 90*time.Second, "check with nothing failed", func(ctx context.Context) (bool, error) {
		o := diagnose.NewOptions()
		o.Kubeconfig, o.Namespace, o.MetricsTokenFile = c.kubeconfig, ns, tokenFile
		began := time.Now()
		rep, runs = diagnose.Check(ctx, o), runs+1
		took = time.Since(began)
		return rep.Failed == 0, nil
	})
	var text strings.Builder
	if err := rep.WriteText(&text, false); err != nil {
		t.Fatal(err)
	}
	t.Logf("check passed %s after the real Node was initialized (run %d, which took %s):\n%s", time.Since(start).Round(time.Millisecond), runs, took.Round(time.Millisecond), text.String())
	ok := map[string]bool{}
	for _, s := range rep.Sections {
		for _, l := range s.Lines {
			switch {
			case l.Status == diagnose.OK:
				ok[s.Name+": "+l.Message] = true
			case l.Status == diagnose.Warning && !strings.Contains(l.Message, "url uses http"):
				t.Errorf("unexpected warning in %s: %s", s.Name, l.Message)
			}
		}
	}
	has := func(section, part string) bool {
		for k := range ok {
			if strings.HasPrefix(k, section+": ") && strings.Contains(k, part) {
				return true
			}
		}
		return false
	}
	for _, want := range [][2]string{
		{"Release", "Deployment " + release + " available: 2 of 2 replicas ready"},
		{"Configuration", "(Secret " + ns + "/" + release + "-config)"},
		{"Webhook", "Service " + ns + "/" + release + "-webhook has 2 ready endpoint(s)"},
		{"Webhook", "the caBundle verifies the certificate served at Pod " + release + "-"},
		{"Webhook", "a dry-run Node CREATE comes back described by the webhook"},
		{"Leader election", "leader: " + release + "-"},
		{"Replicas' inventories", "inventory current (event stream up"},
		{"Nodes", "1 of 1 Nodes initialized"},
	} {
		if !has(want[0], want[1]) {
			t.Errorf("no ✔ line in %s with %q", want[0], want[1])
		}
	}
}
