// Package nodestates counts the Nodes this controller manages by state, so that an operator
// without kube-state-metrics can read and alert on them: the gauge xenorchestra_nodes{state}.
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

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/controllers/common"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// States of a managed Node, the values of the state label. Each Node is in exactly one, the
// first that applies in this order.
const (
	// StateVMNotResolved: the Node carries the uninitialized taint and its VM cannot be
	// resolved (not found, ambiguous, incomplete inventory, malformed providerID): it stays
	// uninitialized until that is fixed.
	StateVMNotResolved = "vm_not_resolved"
	// StateUninitialized: the Node carries the uninitialized taint and its VM resolves: the
	// cloud-node controller lifts it once the Node is described completely (node.Missing).
	StateUninitialized = "uninitialized"
	// StateDeletionPending: the Node is initialized, has a providerID, is NotReady, and the
	// inventory does not have its VM: the cloud-node-lifecycle controller deletes it once XO
	// confirms the VM is gone, or holds the deletion back (deletions refused metric).
	StateDeletionPending = "deletion_pending"
	// StateShutdown: the Node is initialized and carries the shutdown taint (its VM is not
	// running).
	StateShutdown = "shutdown"
	// StateInitialized: every other managed Node.
	StateInitialized = "initialized"
)

// States lists every state, in the order State tries them.
var States = []string{StateVMNotResolved, StateUninitialized, StateDeletionPending, StateShutdown, StateInitialized}

// State returns the state of n given the inventory idx, and false when this controller does
// not manage n (another provider's providerID).
func State(n *corev1.Node, idx node.Index) (string, bool) {
	res := node.Resolve(idx, n)
	matched := res.Outcome == node.OutcomeMatched
	switch {
	case res.Outcome == node.OutcomeForeign:
		return "", false
	case node.HasTaint(n.Spec.Taints, node.TaintUninitialized, ""):
		if matched {
			return StateUninitialized, true
		}
		return StateVMNotResolved, true
	case n.Spec.ProviderID != "" && !matched && res.Outcome != node.OutcomeInvalid && !common.IsReady(n):
		// The cloud-node-lifecycle controller's own test for a Node whose VM may be gone.
		return StateDeletionPending, true
	case node.HasTaint(n.Spec.Taints, node.TaintShutdown, ""):
		return StateShutdown, true
	}
	return StateInitialized, true
}

var desc = prometheus.NewDesc("xenorchestra_nodes",
	"Nodes this controller manages (not ignored, no other provider's providerID), by state (vm_not_resolved, uninitialized, deletion_pending, shutdown, initialized); exported by the leader only.",
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
		n := &list.Items[i]
		if c.ignore.Ignored(n) {
			continue
		}
		if s, ok := State(n, view); ok {
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
