package cloudnode

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
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
		Help: "Attempts to initialize an uninitialized Node, by result (initialized, not_resolved, xo_error, incomplete, conflict, api_error, not_synced) and by who lifted the taint: cloud-node, or the webhook at CREATE (a Node born complete, counted once cloud-node sees it created).",
	}, []string{"result", "by"})
	initializationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "xenorchestra_cloud_node_initialization_duration_seconds",
		Help:    "Time from a Node's creation to the removal of its uninitialized taint, by who removed it (0 for a Node the webhook initialized at CREATE).",
		Buckets: []float64{0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300, 600, 1800, 3600},
	}, []string{"by"})
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
		initializationsTotal.WithLabelValues(r, node.InitializedByController)
	}
	initializationsTotal.WithLabelValues(resultInitialized, node.InitializedByWebhook)
	for _, r := range []string{resultUpdated, resultConflict, resultAPIError} {
		addressUpdatesTotal.WithLabelValues(r)
	}
}

// countAttempt counts an attempt of cloud-node's that did not initialize the Node.
func countAttempt(result string) {
	initializationsTotal.WithLabelValues(result, node.InitializedByController).Inc()
}

// countInitialized counts a Node whose uninitialized taint by (node.InitializedBy*) lifted,
// took after the Node's creation.
func countInitialized(by string, took time.Duration) {
	initializationsTotal.WithLabelValues(resultInitialized, by).Inc()
	initializationDuration.WithLabelValues(by).Observe(max(0, took.Seconds()))
}
