package xo

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xenorchestra_api_requests_total",
		Help: "XO REST API requests by operation and outcome (ok or an error kind).",
	}, []string{"operation", "outcome"})
	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "xenorchestra_api_request_duration_seconds",
		Help:    "XO REST API request latency by operation; for a list, \"<op> stream\" is the whole body.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"operation"})
	listedObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "xenorchestra_api_listed_objects",
		Help: "Objects in the last listing of each collection.",
	}, []string{"collection"})
	eventsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xenorchestra_events_total",
		Help: "XO event stream events received, by collection and type.",
	}, []string{"collection", "type"})
)

func init() {
	metrics.Registry.MustRegister(requestsTotal, requestDuration, listedObjects, eventsTotal)
}

// observe records one request.
func observe(op string, start time.Time, err error) {
	outcome := "ok"
	if err != nil {
		outcome = kindOf(err).String()
	}
	requestsTotal.WithLabelValues(op, outcome).Inc()
	requestDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
}
