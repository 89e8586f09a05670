// Package nodestates classifies Nodes as the controllers see them (Classify, State) and counts
// them by state, so that an operator without kube-state-metrics can read and alert on them: the
// gauge xenorchestra_nodes{state}. The `check` and `explain` commands classify Nodes with the
// same Classify.
//
// It is a Prometheus collector over the manager's Node cache, counted at each scrape on the
// leader only (the replica whose controllers act on these states; the others export nothing),
// rather than a gauge a timer refreshes: the count is as current as the scrape, and there is
// no loop to run. Counting 5,000 Nodes resolves each against the inventory in memory
// (node.Resolve, no XO call and no resolution metric), a few milliseconds.
package nodestates

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/lifecycle"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// Class is what a Node is to the controllers by its own fields, before its VM is looked for:
// the first split of State, and what `check` and `explain` tell of a Node.
type Class uint8

// Classes of Classify, each the first that applies in this order.
const (
	// ClassIgnored: the ignore label or the config's nodes.ignoreSelector selects it: no
	// controller and no webhook touches it.
	ClassIgnored Class = iota
	// ClassForeign: another provider's providerID: the controller leaves it alone.
	ClassForeign
	// ClassUninitialized: it carries the uninitialized taint: cloud-node initializes it.
	ClassUninitialized
	// ClassNoCloudProvider: neither a providerID nor the uninitialized taint: its kubelet was
	// started without --cloud-provider=external, and no controller ever initializes it.
	ClassNoCloudProvider
	// ClassInitialized: a providerID of this provider and no uninitialized taint.
	ClassInitialized
)

// Classify returns the Class of n; ignore is the Nodes' ignore rule.
func Classify(n *corev1.Node, ignore node.Ignorer) Class {
	switch pid := n.Spec.ProviderID; {
	case ignore.Ignored(n):
		return ClassIgnored
	case pid != "" && !node.IsOurs(pid):
		return ClassForeign
	case node.HasTaint(n.Spec.Taints, node.TaintUninitialized, ""):
		return ClassUninitialized
	case pid == "":
		return ClassNoCloudProvider
	}
	return ClassInitialized
}

// States of a Node this controller is responsible for, the values of the state label. Each
// Node is in exactly one, the first that applies in this order.
const (
	// StateNoCloudProvider: ClassNoCloudProvider: never initialized until its kubelet is
	// restarted with --cloud-provider=external and the Node deleted (it registers again).
	StateNoCloudProvider = "no_cloud_provider"
	// StateVMNotResolved: the Node carries the uninitialized taint and its VM cannot be
	// resolved (not found, ambiguous, incomplete inventory, malformed providerID): it stays
	// uninitialized until that is fixed.
	StateVMNotResolved = "vm_not_resolved"
	// StateUninitialized: the Node carries the uninitialized taint and its VM resolves: the
	// cloud-node controller lifts it once the Node is described completely (node.Missing).
	StateUninitialized = "uninitialized"
	// StateDeletionPending: the Node is initialized and a deletion candidate of the
	// cloud-node-lifecycle controller (lifecycle.MayBeGone: NotReady, its providerID's VM not
	// in the inventory), which deletes it once XO confirms the VM is gone, or holds the
	// deletion back (deletions refused metric).
	StateDeletionPending = "deletion_pending"
	// StateShutdown: the Node is initialized and carries the shutdown taint (its VM is not
	// running).
	StateShutdown = "shutdown"
	// StateInitialized: every other initialized Node.
	StateInitialized = "initialized"
)

// States lists every state, in the order State tries them.
var States = []string{StateNoCloudProvider, StateVMNotResolved, StateUninitialized, StateDeletionPending, StateShutdown, StateInitialized}

// State returns the state of n given the Nodes' ignore rule and the inventory idx, and false
// when this controller leaves n alone (ClassIgnored, ClassForeign).
func State(n *corev1.Node, ignore node.Ignorer, idx node.Index) (string, bool) {
	class := Classify(n, ignore)
	switch class {
	case ClassIgnored, ClassForeign:
		return "", false
	case ClassNoCloudProvider:
		return StateNoCloudProvider, true
	}
	res := node.Resolve(idx, n)
	switch {
	case class == ClassUninitialized && res.Outcome == node.OutcomeMatched:
		return StateUninitialized, true
	case class == ClassUninitialized:
		return StateVMNotResolved, true
	case lifecycle.MayBeGone(n, res):
		return StateDeletionPending, true
	case node.HasTaint(n.Spec.Taints, node.TaintShutdown, ""):
		return StateShutdown, true
	}
	return StateInitialized, true
}

var desc = prometheus.NewDesc("xenorchestra_nodes",
	"Nodes this controller is responsible for (not ignored, no other provider's providerID), by state (no_cloud_provider, vm_not_resolved, uninitialized, deletion_pending, shutdown, initialized); exported by the leader only.",
	[]string{"state"}, nil)

// listTimeout bounds the cache read of one scrape: the cache answers from memory once synced,
// and waits for its first sync until then.
const listTimeout = 5 * time.Second

// counter is what the collector counts from while this process leads.
type counter struct {
	nodes  client.Reader
	estate *inventory.Estate
	ignore node.Ignorer
}

// leading is the counter of the running command while it holds the Lease, nil otherwise; a
// package variable because a collector is registered once per process, and the tests run the
// command several times in one.
var leading atomic.Pointer[counter]

type collector struct{}

func (collector) Describe(ch chan<- *prometheus.Desc) { ch <- desc }

func (collector) Collect(ch chan<- prometheus.Metric) {
	c := leading.Load()
	if c == nil {
		return
	}
	counts, err := c.count()
	if err != nil {
		return // no sample rather than a wrong one; the scrape goes on
	}
	for _, s := range States {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(counts[s]), s)
	}
}

// count returns the number of managed Nodes in each state.
func (c *counter) count() (map[string]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	var list corev1.NodeList
	// Read only: a copy of every Node at every scrape would be megabytes of garbage.
	if err := c.nodes.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	view := c.estate.View()
	counts := make(map[string]int, len(States))
	for i := range list.Items {
		if s, ok := State(&list.Items[i], c.ignore, view); ok {
			counts[s]++
		}
	}
	return counts, nil
}

func init() {
	metrics.Registry.MustRegister(collector{})
}

// Setup makes mgr export xenorchestra_nodes while it leads, counting the Nodes of its cache
// (which the controllers' watches fill) against estate, without those ignore selects.
func Setup(mgr manager.Manager, estate *inventory.Estate, ignore node.Ignorer) error {
	c := &counter{nodes: mgr.GetCache(), estate: estate, ignore: ignore}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		leading.Store(c)
		<-ctx.Done()
		leading.CompareAndSwap(c, nil)
		return nil
	}))
}
