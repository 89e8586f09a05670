package inventory

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Every series carries the XO server's name (config `clusters[].name`) as label "server".
var (
	relistTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xenorchestra_inventory_relists_total",
		Help: "Full listings of an XO server's inventory, by result (ok, error).",
	}, []string{"server", "result"})
	relistDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "xenorchestra_inventory_relist_duration_seconds",
		Help:    "Time to list every collection of an XO server.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	}, []string{"server"})
	lastSync = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "xenorchestra_inventory_last_sync_timestamp_seconds",
		Help: "Unix time of the last successful listing; time() minus it is the inventory's age.",
	}, []string{"server"})
	objects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "xenorchestra_inventory_objects",
		Help: "Objects held in the inventory, by collection.",
	}, []string{"server", "collection"})
	pools = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "xenorchestra_inventory_pools",
		Help: "Pools in scope by connection state: trusted (connected and settled), settling (connected, not yet trusted).",
	}, []string{"server", "state"})
	scopeUnresolved = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "xenorchestra_inventory_scope_unresolved",
		Help: "Pool names of the configured scope that XO has never listed.",
	}, []string{"server"})
	changesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xenorchestra_inventory_changes_total",
		Help: "Changes published to the controllers, by object kind.",
	}, []string{"server", "kind"})
	streamUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "xenorchestra_event_stream_up",
		Help: "1 while XO's event stream is connected and subscribed.",
	}, []string{"server"})
	streamBreaks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xenorchestra_event_stream_breaks_total",
		Help: "Times the event stream broke (error, idle timeout, server closed it).",
	}, []string{"server"})
	// staleAfter lets an alert judge staleness with the configured limit rather than a copy of
	// its default.
	staleAfter = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "xenorchestra_inventory_stale_after_seconds",
		Help: "The configured inventory.staleAfter: without the event stream, the inventory is stale once its last listing is older.",
	}, []string{"server"})
)

func init() {
	metrics.Registry.MustRegister(relistTotal, relistDuration, lastSync, objects, pools, scopeUnresolved, changesTotal, streamUp, streamBreaks, staleAfter)
}

// metricSet holds one server's series.
type metricSet struct {
	server          string
	relists         *prometheus.CounterVec
	changes         *prometheus.CounterVec
	streamUp        prometheus.Gauge
	streamBreaks    prometheus.Counter
	scopeUnresolved prometheus.Gauge
}

func newMetricSet(server string, stale time.Duration) *metricSet {
	staleAfter.WithLabelValues(server).Set(stale.Seconds())
	return &metricSet{
		server: server, relists: relistTotal, changes: changesTotal,
		streamUp: streamUp.WithLabelValues(server), streamBreaks: streamBreaks.WithLabelValues(server),
		scopeUnresolved: scopeUnresolved.WithLabelValues(server),
	}
}

// observeRelist records a successful listing.
func (m *metricSet) observeRelist(s *Snapshot, took time.Duration) {
	relistTotal.WithLabelValues(m.server, "ok").Inc()
	relistDuration.WithLabelValues(m.server).Observe(took.Seconds())
	lastSync.WithLabelValues(m.server).Set(float64(s.listedAt.Unix()))
	objects.WithLabelValues(m.server, "vms").Set(float64(s.vms.len()))
	objects.WithLabelValues(m.server, "hosts").Set(float64(len(s.hosts)))
	objects.WithLabelValues(m.server, "pools").Set(float64(len(s.pools)))
	trusted, settling := 0, 0
	for _, c := range s.conn {
		if c.trusted.IsZero() {
			settling++
		} else {
			trusted++
		}
	}
	pools.WithLabelValues(m.server, "trusted").Set(float64(trusted))
	pools.WithLabelValues(m.server, "settling").Set(float64(settling))
}
