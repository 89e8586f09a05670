package nodeevents

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var suppressedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "xenorchestra_node_events_suppressed_total",
	Help: "Events about Nodes not emitted, by component, reason and cause: repeat (identical to one emitted less than an hour before) or budget (Normal events beyond 100 at once, then 10 per second).",
}, []string{"component", "reason", "cause"})

func init() {
	metrics.Registry.MustRegister(suppressedTotal)
}
