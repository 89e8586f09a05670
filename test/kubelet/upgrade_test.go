package kubelet_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// upgradeFromPrevious installs the previous release (built from its commit, published to the
// registry), registers Nodes under it, upgrades to this checkout's release while Nodes keep
// arriving, then rolls back to the previous release while Nodes keep arriving. Nodes admitted
// unlabelled while a replica was Ready fail the test, and so does any label removed from any
// Node from before the upgrade until after the rollback.
func (c *realCluster) upgradeFromPrevious(t *testing.T, e *estate) {
	const ns = "xoccm-upgrade"
	ctx := context.Background()
	prev := c.publish(t, previousVersion, c.buildRelease(t, previousVersion, c.previousSource(t)))

	registered := e.prepare(t, "prev", 6) // before the install: see TestChartOnRealNode
	values := c.values(t, e, "selfManaged", nil)
	start := time.Now()
	c.helmChart(t, prev.chartVersion, "upgrade", release, "-i", "--namespace", ns, "--create-namespace", "-f", values)
	c.checkPulled(t, c.waitPodsReady(t, ns, 2, 90*time.Second), prev)
	t.Logf("the previous release %s installed from the registry, 2 Pods Ready in %s", previousVersion, time.Since(start).Round(time.Millisecond))
	var names []string
	for _, n := range registered {
		got, err := c.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !labelled(got) {
			t.Errorf("Node %s was admitted unlabelled by the previous release", n.Name)
		}
		names = append(names, n.Name)
	}
	c.waitInitialized(t, names, 30*time.Second)

	// Every label of every Node, from here until the rollback is done.
	stopWatch := c.watchLabels(t)
	c.waitEndpoints(t, ns, 2)

	c.changeUnderLoad(t, e, ns, "helm upgrade from "+previousVersion+" to "+releaseVersion, "upgrade", func(time.Time) {
		c.helm(t, "upgrade", release, "--namespace", ns, "-f", values)
	})
	ready, _, err := c.readyPods(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	c.checkPulled(t, ready, c.release)
	if out := c.helm(t, "history", release, "--namespace", ns); !strings.Contains(out, c.release.chartVersion) {
		t.Errorf("helm history after the upgrade:\n%s", out)
	}
	c.waitEndpoints(t, ns, 2)

	c.changeUnderLoad(t, e, ns, "helm rollback to "+previousVersion, "rollback", func(time.Time) {
		c.helm(t, "rollback", release, "1", "--namespace", ns)
	})
	ready, _, err = c.readyPods(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	c.checkPulled(t, ready, prev)
	// The previous release serves again: a Node is labelled in its CREATE (matched by its
	// system UUID, which the webhook reads from XO directly for a VM its inventory has not seen).
	n, vm := e.newNode(t, "after-rollback", byUUID)
	c.createDescribed(t, e, n, vm)

	w := stopWatch()
	t.Logf("from before the upgrade to after the rollback: %d Node updates seen, %d label values changed, %d labels removed", w.updates, len(w.changed), len(w.removed))
	if len(w.changed) > 0 {
		t.Logf("label values changed: %v", w.changed)
	}
	if len(w.removed) > 0 {
		t.Errorf("labels removed: %v", w.removed)
	}
	c.helm(t, "uninstall", release, "--namespace", ns, "--wait")
}

// waitEndpoints waits until the webhook Service's EndpointSlices hold want ready endpoints: the
// Pods' readiness reaches them through another controller.
func (c *realCluster) waitEndpoints(t *testing.T, ns string, want int) {
	t.Helper()
	waitFor(t, c.kubelet, 30*time.Second, fmt.Sprintf("%d ready endpoints of the webhook Service", want), func(ctx context.Context) (bool, error) {
		return c.readyEndpoints(ctx, ns, release+"-webhook") == want, nil
	})
}

// labelChanges is what watchLabels saw.
type labelChanges struct {
	updates          int
	changed, removed []string
}

// watchLabels records every Node update that removes or changes a label, until the returned
// function is called.
func (c *realCluster) watchLabels(t *testing.T) (stop func() labelChanges) {
	t.Helper()
	factory := informers.NewSharedInformerFactory(c.cs, 0)
	inf := factory.Core().V1().Nodes().Informer()
	var mu sync.Mutex
	var seen labelChanges
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Node)
			n, ok2 := newObj.(*corev1.Node)
			if !ok1 || !ok2 {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			seen.updates++
			for _, k := range slices.Sorted(maps.Keys(o.Labels)) {
				v, ok := n.Labels[k]
				switch {
				case !ok:
					seen.removed = append(seen.removed, fmt.Sprintf("%s: %s (was %q)", n.Name, k, o.Labels[k]))
				case v != o.Labels[k]:
					seen.changed = append(seen.changed, fmt.Sprintf("%s: %s %q → %q", n.Name, k, o.Labels[k], v))
				}
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	factory.Start(done)
	if !cache.WaitForCacheSync(done, inf.HasSynced) {
		t.Fatal("the Node informer did not sync")
	}
	return func() labelChanges {
		close(done)
		factory.Shutdown()
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// plainManifests installs the release's plain manifests as a mirror's user does: the image
// reference rewritten to the registry (same digest), the Secret of docs/install.md, kubectl
// apply; a Node is labelled in its CREATE; kubectl delete removes it.
func (c *realCluster) plainManifests(t *testing.T, e *estate) {
	const ns = "kube-system"
	b, err := os.ReadFile(filepath.Join(c.release.dist, chartName+"-"+releaseVersion+".yml"))
	if err != nil {
		t.Fatal(err)
	}
	published := "ghcr.io/xenorchestra-k8s/" + chartName + "@" + c.release.digest
	if got := strings.Count(string(b), `image: "`+published+`"`); got != 1 {
		t.Fatalf("the released manifests name the image %s %d times, want once", published, got)
	}
	manifests := c.path("cloud-controller-manager.yml")
	if err := os.WriteFile(manifests, []byte(strings.ReplaceAll(string(b), published, c.release.imageRef())), 0o600); err != nil {
		t.Fatal(err)
	}
	// The upstream controller's config.yaml, with a short settle time for the test.
	config := c.path("config.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, "url: %s\ntoken: %s\ninventory:\n  settleTime: %s\n", e.x.URL, e.x.Token, clusterSettle), 0o600); err != nil {
		t.Fatal(err)
	}
	n, vm := e.newNode(t, "manifests", byName) // before the install: see TestChartOnRealNode
	start := time.Now()
	c.kubectl(t, "-n", ns, "create", "secret", "generic", chartName, "--from-file="+config)
	c.kubectl(t, "apply", "-f", manifests)
	c.checkPulled(t, c.waitPodsReady(t, ns, 2, 90*time.Second), c.release)
	t.Logf("kubectl apply of the released manifests → 2 Pods Ready: %s", time.Since(start).Round(time.Millisecond))
	c.createDescribed(t, e, n, vm)
	c.kubectl(t, "delete", "-f", manifests, "--wait")
	waitFor(t, c.kubelet, 60*time.Second, "the manifests' Pods gone", func(ctx context.Context) (bool, error) {
		_, all, err := c.readyPods(ctx, ns)
		return err == nil && len(all) == 0, nil
	})
}

// kubectl runs the pinned kubectl against the cluster.
func (c *realCluster) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(c.assets, "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
