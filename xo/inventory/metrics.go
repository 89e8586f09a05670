package inventory

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	relistTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xenorchestra_inventory_relists_total",
		Help: "Full listings of XO's inventory, by result (ok, error).",
	}, []string{"result"})
	relistDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "xenorchestra_inventory_relist_duration_seconds",
		Help:    "Time to list every collection.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	})
	lastSync = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "xenorchestra_inventory_last_sync_timestamp_seconds",
		Help: "Unix time of the last successful listing; time() minus it is the inventory's age.",
	})
	objects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "xenorchestra_inventory_objects",
		Help: "Objects held in the inventory, by collection.",
	}, []string{"collection"})
	changesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xenorchestra_inventory_changes_total",
		Help: "Changes published to the controllers, by object kind.",
	}, []string{"kind"})
	streamUp = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "xenorchestra_event_stream_up",
		Help: "1 while XO's event stream is connected and subscribed.",
	})
	streamBreaks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xenorchestra_event_stream_breaks_total",
		Help: "Times the event stream broke (error, idle timeout, server closed it).",
	})
)

func init() {
	metrics.Registry.MustRegister(relistTotal, relistDuration, lastSync, objects, changesTotal, streamUp, streamBreaks)
}
