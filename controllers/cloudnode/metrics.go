package cloudnode

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metric label values.
const (
	resultInitialized = "initialized"
	resultNotResolved = "not_resolved"
	resultXOError     = "xo_error"
	resultIncomplete  = "incomplete"
	resultConflict    = "conflict"
	resultAPIError    = "api_error"
	resultNotSynced   = "not_synced"
	resultUpdated     = "updated"
	// reasonSetBySomeoneElse counts a tag label or taint left alone because another party set
	// that key.
	reasonSetBySomeoneElse = "set_by_someone_else"
)

var (
	initializationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xenorchestra_cloud_node_initializations_total",
		Help: "Attempts to initialize an uninitialized Node, by result (initialized, not_resolved, xo_error, incomplete, conflict, api_error, not_synced).",
	}, []string{"result"})
	initializationDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "xenorchestra_cloud_node_initialization_duration_seconds",
		Help:    "Time from a Node's creation to the removal of its uninitialized taint.",
		Buckets: []float64{0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300, 600, 1800, 3600},
	})
	addressUpdatesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xenorchestra_cloud_node_address_updates_total",
		Help: "Writes of a Node's status.addresses, by result (updated, conflict, api_error).",
	}, []string{"result"})
	labelRejectionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xenorchestra_cloud_node_label_rejections_total",
		Help: "Labels and taints a VM implies that were not set at initialization, by kind and reason.",
	}, []string{"kind", "reason"})
)

func init() {
	metrics.Registry.MustRegister(initializationsTotal, initializationDuration, addressUpdatesTotal, labelRejectionsTotal)
	for _, r := range []string{resultInitialized, resultNotResolved, resultXOError, resultIncomplete, resultConflict, resultAPIError, resultNotSynced} {
		initializationsTotal.WithLabelValues(r)
	}
	for _, r := range []string{resultUpdated, resultConflict, resultAPIError} {
		addressUpdatesTotal.WithLabelValues(r)
	}
}
