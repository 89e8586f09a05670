package lifecycle

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// Values of the operation label of taintsTotal.
const (
	opAdded   = "added"
	opRemoved = "removed"
)

var (
	deletions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xenorchestra_lifecycle_node_deletions_total",
		Help: "Nodes deleted because their VM was confirmed gone from XO.",
	})
	deletionsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xenorchestra_lifecycle_node_deletions_refused_total",
		Help: "NotReady Nodes whose VM is missing from the inventory but were kept, by reason (inventory_not_synced, pool_unknown, pool_disconnected, absence_settling, vm_exists, node_changed, xo_<error kind>).",
	}, []string{"reason"})
	taintsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xenorchestra_lifecycle_taints_total",
		Help: "Taints set or lifted on Nodes, by taint (shutdown, out_of_service) and operation (added, removed).",
	}, []string{"taint", "operation"})
)

// taintName is the taint label value of a taint key.
func taintName(key string) string {
	if key == node.TaintOutOfService {
		return "out_of_service"
	}
	return "shutdown"
}

func init() {
	metrics.Registry.MustRegister(deletions, deletionsRefused, taintsTotal)
	for _, r := range refusalReasons {
		deletionsRefused.WithLabelValues(r)
	}
	for _, t := range []string{"shutdown", "out_of_service"} {
		taintsTotal.WithLabelValues(t, opAdded)
		taintsTotal.WithLabelValues(t, opRemoved)
	}
}
