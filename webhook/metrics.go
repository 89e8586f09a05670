package webhook

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	admissionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xenorchestra_webhook_admissions_total",
		Help: "Node admissions by result (initialized: described completely and the uninitialized taint lifted; mutated: described, the taint left to cloud-node; unchanged, foreign, ignored), resolution method and outcome.",
	}, []string{"result", "method", "outcome"})
	admissionDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "xenorchestra_webhook_defaulting_duration_seconds",
		Help:    "Time to resolve and describe one Node, without decoding and patch building.",
		Buckets: []float64{1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.05, 0.5, 1},
	})
)

func init() {
	metrics.Registry.MustRegister(admissionsTotal, admissionDuration)
}

// observeAdmission counts an admission and its duration since start.
func observeAdmission(result, method, outcome string, start time.Time) {
	admissionsTotal.WithLabelValues(result, method, outcome).Inc()
	admissionDuration.Observe(time.Since(start).Seconds())
}
