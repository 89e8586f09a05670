package labelsync

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	rejectedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xenorchestra_label_sync_rejected_total",
		Help: "Labels and taints a VM implies that were refused, by reason; counted with their event (once, then hourly while they stand).",
	}, []string{"reason"})
	conflictsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xenorchestra_label_sync_conflicts_total",
		Help: "Tag labels or taints left alone because someone else set the key; counted with their event (once, then hourly while they stand).",
	})
	patches = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xenorchestra_label_sync_node_patches_total",
		Help: "Node patches made to bring labels and tag taints up to date.",
	})
	labelChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xenorchestra_label_sync_label_changes_total",
		Help: "Changes of a described label on a Node, by label (zone, region, instance_type, name).",
	}, []string{"label"})
)

func init() {
	metrics.Registry.MustRegister(rejectedTotal, conflictsTotal, patches, labelChanges)
	for _, l := range []string{"zone", "region", "instance_type", "name"} {
		labelChanges.WithLabelValues(l)
	}
}
