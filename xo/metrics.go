package xo

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Every series carries the XO server's name (Options.Name) as label "server".
var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xenorchestra_api_requests_total",
		Help: "XO REST API requests by operation and outcome (ok or an error kind), each attempt counted.",
	}, []string{"server", "operation", "outcome"})
	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "xenorchestra_api_request_duration_seconds",
		Help:    "XO REST API request latency by operation; for a list, \"<op> stream\" is the whole body.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"server", "operation"})
	listedObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "xenorchestra_api_listed_objects",
		Help: "Objects in the last listing of each collection.",
	}, []string{"server", "collection"})
	eventsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xenorchestra_events_total",
		Help: "XO event stream events received, by collection and type.",
	}, []string{"server", "collection", "type"})
)

func init() {
	metrics.Registry.MustRegister(requestsTotal, requestDuration, listedObjects, eventsTotal)
}

// observe records one request to server.
func observe(server, op string, start time.Time, err error) {
	outcome := "ok"
	if err != nil {
		outcome = kindOf(err).String()
	}
	requestsTotal.WithLabelValues(server, op, outcome).Inc()
	requestDuration.WithLabelValues(server, op).Observe(time.Since(start).Seconds())
}
