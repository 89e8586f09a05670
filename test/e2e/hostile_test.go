package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/test/bench"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// maxHostileRSS bounds the controller's resident set through the hostile run: the chart's
// memory limit.
const maxHostileRSS = 256 << 20

// TestHostileXOData runs the binary against an XO that serves hostile data: names with
// newlines, control characters and emoji, 500-character names and tags, tags that try to set
// node-role.kubernetes.io/control-plane, kubernetes.io/hostname or a reserved taint, listings
// that repeat every object (the copy renamed), an object larger than a listing may hold, and a
// listing trickled one byte at a time. The process must not exit, its memory must stay
// bounded, every label it writes must be valid and outside the reserved namespaces (tags only
// under the allowed prefix), and the Nodes must not change while XO misbehaves.
func TestHostileXOData(t *testing.T) {
	env := testenv.StartTest(t, testenv.Options{Webhook: true})
	kubeconfig := writeKubeconfig(t, env)
	c := env.Client
	ctx := context.Background()
	token := newToken(t)
	x := newXO(t, token, false)

	long := strings.Repeat("x", 500)
	label := func(kv string) string { return node.TagLabelPrefix + kv }
	if err := x.sim.UpdatePool(x.poolA, func(p *xosim.PoolSpec) { p.NameLabel = "pool\n🚀" + long }); err != nil {
		t.Fatal(err)
	}
	if err := x.sim.UpdateHost(x.hostA1, func(h *xosim.HostSpec) { h.NameLabel = "host\r\n\x00" + long }); err != nil {
		t.Fatal(err)
	}
	specs := map[string]xosim.VMSpec{
		"hostile-newline": {NameLabel: "evil\nname\x00\x1b[31m", Tags: []string{
			label("node-role.kubernetes.io/control-plane="), label("kubernetes.io/hostname=evil"),
			label("tag.k8s.xenorchestra/ok=fine"), label("tag.k8s.xenorchestra/nl=a\nb"),
		}},
		"hostile-emoji": {NameLabel: "🚀 rocket 🚀", Tags: []string{
			label("tag.k8s.xenorchestra/emoji=🚀"), label("topology.kubernetes.io/zone=evil"),
			node.TagTaintPrefix + "node.kubernetes.io/unschedulable=true:NoSchedule",
			node.TagTaintPrefix + "tag.k8s.xenorchestra/dedicated=ci:NoSchedule",
		}},
		"hostile-long": {NameLabel: long, Tags: []string{
			label("tag.k8s.xenorchestra/long=" + long), label("tag.k8s.xenorchestra/" + long + "=v"),
			label("node-role.kubernetes.io/" + long + "="),
		}},
	}
	vms := map[string]string{}
	for name, s := range specs {
		s.PoolID, s.HostID, s.CPUs, s.Memory = x.poolA, x.hostA1, 2, 2*xosim.GiB
		s.IPs = []string{fmt.Sprintf("10.9.0.%d", len(vms)+1)}
		vms[name] = x.AddVM(t, s)
	}

	// Relist only, every second, so that every listing fault is met at once.
	x.sim.InjectFault(xosim.Fault{Kind: xosim.FaultStatus, PathPrefix: "/rest/v0/events", Status: 404, Message: "not found"})
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "config.yaml", fmt.Sprintf(`url: %s
token: %s
requestTimeout: 2s
listTimeout: 10s
inventory:
  pollPeriod: 1s
  staleAfter: 1h
  settleTime: 1s
`, x.URL, token))
	wo := env.WebhookInstallOptions
	p := startCCM(t, "hostile", ccmArgs{kubeconfig: kubeconfig, config: cfg, webhookPort: wo.LocalServingPort, certDir: wo.LocalServingCertDir})
	p.waitReady(t, 30*time.Second)

	var maxRSS int64
	alive := func(what string) {
		t.Helper()
		if !p.running() {
			code, _ := p.exited(0)
			t.Fatalf("%s: the controller exited with code %d", what, code)
		}
		mem, err := bench.ProcMemory(p.cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		rss := mem.RSS
		maxRSS = max(maxRSS, rss)
		if rss > maxHostileRSS {
			t.Fatalf("%s: resident set %d MiB, over %d MiB", what, rss>>20, maxHostileRSS>>20)
		}
	}

	for name, vm := range vms {
		n := testenv.KubeletNode(name, testenv.WithSystemUUID(x.systemUUID(t, vm)))
		if err := c.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	for name := range vms {
		testenv.WaitFor(t, 30*time.Second, name+" initialized", func() error { return initialized(c, name) })
	}
	// A taint from an allowed tag shows the tags were read: the refusals below are decisions.
	testenv.WaitFor(t, 10*time.Second, "the allowed tag taint", func() error {
		n, err := testenv.GetNode(ctx, c, "hostile-emoji")
		if err != nil || !node.HasTaint(n.Spec.Taints, "tag.k8s.xenorchestra/dedicated", corev1.TaintEffectNoSchedule) {
			return fmt.Errorf("no tag.k8s.xenorchestra/dedicated taint: %v", err)
		}
		return nil
	})
	alive("after initialization")
	settled := hostileNodes(t, c, vms)

	check := func(what string) {
		t.Helper()
		alive(what)
		now := hostileNodes(t, c, vms)
		for name, n := range now {
			if before := settled[name]; !equality.Semantic.DeepEqual(n.Labels, before.Labels) || !equality.Semantic.DeepEqual(n.Spec.Taints, before.Spec.Taints) {
				t.Errorf("%s: Node %s changed:\n labels %v\n taints %v\nwas\n labels %v\n taints %v", what, name, n.Labels, n.Spec.Taints, before.Labels, before.Spec.Taints)
			}
		}
	}

	// Listings that repeat every object, the copy renamed "duplicate": the first is kept.
	relists := func() float64 {
		_, body, err := p.get("metrics", "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		return metricSum(body, "xenorchestra_inventory_relists_total", `result="ok"`)
	}
	repeat := x.sim.InjectFault(xosim.Fault{Kind: xosim.FaultRepeat, PathPrefix: "/rest/v0/vms"})
	from := relists()
	testenv.WaitFor(t, 20*time.Second, "3 relists with repeated objects", func() error {
		if n := relists() - from; n < 3 {
			return fmt.Errorf("%v relists", n)
		}
		return nil
	})
	x.sim.RemoveFault(repeat)
	check("repeated objects")

	// An object larger than a listing may hold (a 5 MiB name): the relists fail, the
	// inventory and the Nodes stay as they were.
	huge := x.AddVM(t, xosim.VMSpec{PoolID: x.poolA, HostID: x.hostA1, NameLabel: strings.Repeat("h", 5<<20)})
	failed := func() float64 {
		_, body, err := p.get("metrics", "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		return metricSum(body, "xenorchestra_inventory_relists_total", `result="error"`)
	}
	from = failed()
	testenv.WaitFor(t, 20*time.Second, "3 relists refusing the huge object", func() error {
		if n := failed() - from; n < 3 {
			return fmt.Errorf("%v failed relists", n)
		}
		return nil
	})
	check("a huge object")
	if err := x.sim.RemoveVM(huge); err != nil {
		t.Fatal(err)
	}

	// A listing trickled one byte every 5 ms: cut by listTimeout, the Nodes untouched.
	trickle := x.sim.InjectFault(xosim.Fault{Kind: xosim.FaultTrickle, PathPrefix: "/rest/v0/vms", Latency: 5 * time.Millisecond})
	from = failed()
	testenv.WaitFor(t, 40*time.Second, "a trickled listing cut", func() error {
		alive("slow-loris")
		if failed() == from {
			return fmt.Errorf("no relist failed yet")
		}
		return nil
	})
	x.sim.RemoveFault(trickle)
	check("a trickled listing")

	from = relists()
	testenv.WaitFor(t, 20*time.Second, "a good relist once XO behaves", func() error {
		if relists() == from {
			return fmt.Errorf("no good relist yet")
		}
		return nil
	})
	check("XO behaving again")
	t.Logf("highest resident set through the run: %.1f MiB", float64(maxRSS)/(1<<20))
}

// hostileNodes reads the hostile Nodes and checks each: valid labels, none from a refused
// tag, the sanitized names and the allowed tag label present.
func hostileNodes(t *testing.T, c client.Client, vms map[string]string) map[string]*corev1.Node {
	t.Helper()
	out := map[string]*corev1.Node{}
	for name := range vms {
		n, err := testenv.GetNode(context.Background(), c, name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = n
		for k, v := range n.Labels {
			if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(errs) > 0 {
				t.Errorf("Node %s: invalid label %q=%q: %v", name, k, v, errs)
			}
			if strings.HasPrefix(k, "node-role.kubernetes.io") {
				t.Errorf("Node %s: a tag set %s", name, k)
			}
			if domain, _, ok := strings.Cut(k, "/"); ok && strings.HasSuffix(domain, "k8s.xenorchestra") &&
				!slices.Contains([]string{"tag", "node", "vm", "topology"}, strings.TrimSuffix(domain, ".k8s.xenorchestra")) {
				t.Errorf("Node %s: label %s outside the controller's namespaces", name, k)
			}
		}
		if n.Labels[corev1.LabelHostname] != name {
			t.Errorf("Node %s: hostname label %q", name, n.Labels[corev1.LabelHostname])
		}
		if z := n.Labels[node.LabelZone]; z == "evil" {
			t.Errorf("Node %s: a tag set the zone", name)
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == "node.kubernetes.io/unschedulable" {
				t.Errorf("Node %s: a tag set the reserved taint %s", name, taint.Key)
			}
		}
		if n.Labels[node.LabelVMName] == "" || n.Labels[node.LabelPoolName] == "" || n.Labels[node.LabelHostName] == "" {
			t.Errorf("Node %s: the hostile names were not sanitized into labels: %v", name, n.Labels)
		}
	}
	if got := out["hostile-newline"].Labels["tag.k8s.xenorchestra/ok"]; got != "fine" {
		t.Errorf("the allowed tag label is %q, want fine", got)
	}
	return out
}
