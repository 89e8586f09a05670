package xo_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// metricValue returns the value of the series of metric name with these labels, 0 when absent.
func metricValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

// requests returns xenorchestra_api_requests_total for one server, operation and outcome.
func requests(t *testing.T, server, op, outcome string) float64 {
	t.Helper()
	return metricValue(t, "xenorchestra_api_requests_total", map[string]string{"server": server, "operation": op, "outcome": outcome})
}

// runs tells apart the runs of a test (go test -count): the metrics registry outlives them.
var runs atomic.Int32

// named gives the fixture's client a name of its own, so that its metrics are its test's.
func named(base string) (string, func(*xo.Options)) {
	name := fmt.Sprintf("%s-%d", base, runs.Add(1))
	return name, func(o *xo.Options) { o.Name = name }
}

func TestRetriesThenSuccess(t *testing.T) {
	statuses := []xosim.Fault{{Kind: xosim.FaultStatus, Status: 503, Count: 1}, {Kind: xosim.FaultStatus, Status: 429, Count: 1}}
	cases := []struct {
		name    string
		drop    int32 // connections closed without an answer, first
		faults  []xosim.Fault
		list    bool
		failed  map[string]float64 // attempts counted per outcome before the success
		retries int
	}{
		{name: "connection closed, 503, 429 on a read", drop: 1, faults: statuses,
			failed: map[string]float64{"unavailable": 1, "server_error": 2}},
		{name: "connection closed, 503, 429 on a listing", list: true, drop: 1, faults: statuses,
			failed: map[string]float64{"unavailable": 1, "server_error": 2}},
		{name: "connection reset mid-answer on a read", faults: []xosim.Fault{{Kind: xosim.FaultReset, Count: 1}},
			failed: map[string]float64{"unavailable": 1}},
		{name: "body cut mid-object on a read", faults: []xosim.Fault{{Kind: xosim.FaultTruncate, Count: 2}},
			failed: map[string]float64{"unavailable": 2}},
		{name: "500 twice with 2 retries", retries: 2, faults: []xosim.Fault{{Kind: xosim.FaultStatus, Status: 500, Count: 2}},
			failed: map[string]float64{"server_error": 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			server, name := named("retry")
			f := newFixture(t, name, func(o *xo.Options) { o.Retries = tc.retries })
			path, op := "/rest/v0/vms/"+f.vm, "get vm"
			if tc.list {
				path, op = "/rest/v0/vms", "list vms"
			}
			for _, fault := range tc.faults {
				fault.PathPrefix = path
				f.sim.InjectFault(fault)
			}
			f.drop.Store(tc.drop)
			if tc.list {
				vms, err := f.listVMs(t)
				if err != nil || len(vms) != 2 {
					t.Fatalf("listed %d VMs (want 2, each once), %v", len(vms), err)
				}
			} else if vm, err := f.client.GetVM(context.Background(), f.vm); err != nil || vm.NameLabel != "k8s-worker-1" {
				t.Fatalf("GetVM = %+v, %v", vm, err)
			}
			attempts := int64(1)
			for outcome, n := range tc.failed {
				attempts += int64(n)
				if got := requests(t, server, op, outcome); got != n {
					t.Errorf("%s %s counted %v times, want %v", op, outcome, got, n)
				}
			}
			if got := requests(t, server, op, "ok"); got != 1 {
				t.Errorf("%s ok counted %v times, want 1", op, got)
			}
			if n := f.sim.RequestCount("GET", path) + int64(tc.drop); n != attempts {
				t.Fatalf("%s requested %d times, want %d", path, n, attempts)
			}
		})
	}
}

func TestNoRetryOnClientErrors(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 422} {
		for _, list := range []bool{false, true} {
			f := newFixture(t)
			path := "/rest/v0/vms/" + f.vm
			if list {
				path = "/rest/v0/vms"
			}
			f.sim.InjectFault(xosim.Fault{Kind: xosim.FaultStatus, Status: status, PathPrefix: path, Message: "no such VM " + f.vm})
			var err error
			if list {
				_, err = f.listVMs(t)
			} else {
				_, err = f.client.GetVM(context.Background(), f.vm)
			}
			var e *xo.Error
			if !errors.As(err, &e) || e.StatusCode != status {
				t.Errorf("%d on %s gave %v", status, path, err)
			}
			if n := f.sim.RequestCount("GET", path); n != 1 {
				t.Errorf("%d on %s: requested %d times, want 1", status, path, n)
			}
		}
	}
}

func TestSubscribeIsNotRetried(t *testing.T) {
	f := newFixture(t)
	f.sim.InjectFault(xosim.Fault{Kind: xosim.FaultStatus, Status: 503, Method: "POST", PathPrefix: "/rest/v0/events/"})
	err := f.client.Watch(context.Background(), xo.WatchOptions{}, func(xo.Event) {})
	if !is(xo.KindServerError)(err) {
		t.Fatalf("Watch with failing subscriptions = %v", err)
	}
	var posts int64
	for k, n := range f.sim.RequestCounts() {
		if strings.HasPrefix(k, "POST ") {
			posts += n
		}
	}
	if posts != 1 || f.sim.RequestCount("GET", "/rest/v0/events") != 1 {
		t.Fatalf("%d subscriptions and %d opens, want 1 each: %v", posts, f.sim.RequestCount("GET", "/rest/v0/events"), f.sim.RequestCounts())
	}
}

// TestListingCutIsNotRetried: a listing cut after some objects were passed on is not retried
// (the caller would get them twice), even though a retry would succeed.
func TestListingCutIsNotRetried(t *testing.T) {
	f := newFixture(t)
	f.sim.InjectFault(xosim.Fault{Kind: xosim.FaultTruncate, Lines: 1, Count: 1, PathPrefix: "/rest/v0/vms"})
	vms, err := f.listVMs(t)
	if !xo.IsBadResponse(err) && !is(xo.KindUnavailable)(err) {
		t.Fatalf("cut listing gave %v", err)
	}
	if len(vms) != 1 {
		t.Fatalf("passed %d VMs before the cut, want 1", len(vms))
	}
	if n := f.sim.RequestCount("GET", "/rest/v0/vms"); n != 1 {
		t.Fatalf("cut listing requested %d times, want 1", n)
	}
}

// TestTimeoutsBoundRetries: Timeout (a read) and ListTimeout (a listing) bound every attempt
// and the waits between them; the error is then the last attempt's.
func TestTimeoutsBoundRetries(t *testing.T) {
	const timeout = 300 * time.Millisecond
	f := newFixture(t, func(o *xo.Options) {
		o.Timeout, o.ListTimeout, o.Retries, o.RetryWait = timeout, timeout, 1000, 20*time.Millisecond
	})
	f.sim.InjectFault(xosim.Fault{Kind: xosim.FaultStatus, Status: 503})
	for _, call := range []struct {
		name string
		do   func() error
		path string
	}{
		{"read", func() error { _, err := f.client.GetVM(context.Background(), f.vm); return err }, "/rest/v0/vms/" + f.vm},
		{"listing", func() error { _, err := f.listVMs(t); return err }, "/rest/v0/vms"},
	} {
		start := time.Now()
		err := call.do()
		elapsed := time.Since(start)
		if !is(xo.KindServerError)(err) {
			t.Errorf("%s: %v, want the last attempt's 503", call.name, err)
		}
		if elapsed < timeout || elapsed > timeout+3*time.Second {
			t.Errorf("%s: gave up after %s, want about %s", call.name, elapsed, timeout)
		}
		if n := f.sim.RequestCount("GET", call.path); n > 100 {
			t.Errorf("%s: %d attempts in %s", call.name, n, timeout)
		}
	}
	// A listing answered slowly is cut by ListTimeout, not retried.
	f.sim.ClearFaults()
	f.sim.ResetCounters()
	f.sim.InjectFault(xosim.Fault{Kind: xosim.FaultTrickle, Latency: 50 * time.Millisecond, PathPrefix: "/rest/v0/vms"})
	start := time.Now()
	if _, err := f.listVMs(t); !is(xo.KindUnavailable)(err) || time.Since(start) > timeout+3*time.Second {
		t.Errorf("trickled listing: %v after %s", err, time.Since(start))
	}
	if n := f.sim.RequestCount("GET", "/rest/v0/vms"); n != 1 {
		t.Errorf("trickled listing requested %d times, want 1", n)
	}
}

// TestRetriedAnswersAreClosed: the bodies of the error answers resty retries, streamed or not,
// are read and closed, so the next attempt reuses the connection (an open body would hold it).
func TestRetriedAnswersAreClosed(t *testing.T) {
	sim := xosim.New(xosim.Options{Tokens: []string{token}})
	if _, err := sim.AddPool(xosim.PoolSpec{NameLabel: "pool-a"}); err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(sim)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c, err := xo.New(xo.Options{URL: srv.URL, Token: token, RetryWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sim.InjectFault(xosim.Fault{Kind: xosim.FaultStatus, Status: 503, Count: 3, Message: strings.Repeat("x", 10000)})
	pools := 0
	if err := c.ListPools(context.Background(), func(*xo.Pool) { pools++ }); err != nil || pools != 1 {
		t.Fatalf("ListPools = %d pools, %v", pools, err)
	}
	sim.InjectFault(xosim.Fault{Kind: xosim.FaultStatus, Status: 503, Count: 3})
	if err := c.ListPools(context.Background(), func(*xo.Pool) {}); err != nil {
		t.Fatal(err)
	}
	if n := sim.RequestCount("GET", "/rest/v0/pools"); n != 8 {
		t.Fatalf("%d requests, want 8", n)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("8 requests took %d connections, want 1: a retried answer's body was left open", n)
	}
}

func TestRetriedErrorBodyIsRedacted(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("upstream failed for request with Cookie: " + r.Header.Get("Cookie")))
	}))
	defer srv.Close()
	c, err := xo.New(xo.Options{URL: srv.URL, Token: token, RetryWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range []func() error{
		func() error {
			_, err := c.GetVM(context.Background(), "3f1c2b7e-0c4a-4d2b-9e51-6a0f2e8b1c11")
			return err
		},
		func() error { return c.ListPools(context.Background(), func(*xo.Pool) {}) },
	} {
		err := call()
		if !is(xo.KindServerError)(err) || !strings.Contains(err.Error(), "[redacted]") {
			t.Fatalf("error %v", err)
		}
		noToken(t, err)
	}
	if n := calls.Load(); n != 8 {
		t.Fatalf("%d requests, want 4 per call", n)
	}
}

func TestMetricsCarryTheServerName(t *testing.T) {
	east, name := named("xo-east")
	f := newFixture(t, name)
	if _, err := f.listVMs(t); err != nil {
		t.Fatal(err)
	}
	if got := requests(t, east, "list vms", "ok"); got != 1 {
		t.Errorf("list vms counted %v times for %s", got, east)
	}
	if got := requests(t, east, "list vms stream", "ok"); got != 1 {
		t.Errorf("list vms stream counted %v times for %s", got, east)
	}
	if got := metricValue(t, "xenorchestra_api_listed_objects", map[string]string{"server": east, "collection": "vms"}); got != 2 {
		t.Errorf("listed objects %v for %s, want 2", got, east)
	}
	if got := metricValue(t, "xenorchestra_api_request_duration_seconds", map[string]string{"server": east, "operation": "list vms"}); got != 1 {
		t.Errorf("list vms timed %v times for %s", got, east)
	}

	// Without a name, the server is the URL's host:port.
	d := newFixture(t)
	host := strings.TrimPrefix(d.srv.URL, "http://")
	before := requests(t, host, "get vm", "ok") // an earlier run may have had the same port
	if _, err := d.client.GetVM(context.Background(), d.vm); err != nil {
		t.Fatal(err)
	}
	if got := requests(t, host, "get vm", "ok") - before; got != 1 {
		t.Errorf("get vm counted %v times for %s", got, host)
	}

	// Events are counted per server too.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	got := make(chan xo.Event, 4)
	go func() {
		_ = f.client.Watch(ctx, xo.WatchOptions{Ready: func() { close(ready) }}, func(e xo.Event) {
			select {
			case got <- e:
			case <-ctx.Done():
			}
		})
	}()
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Fatal("not subscribed in time")
	}
	if err := f.sim.RemoveVM(f.vm); err != nil {
		t.Fatal(err)
	}
	for removed := false; !removed; {
		select {
		case e := <-got:
			removed = e.Collection == xo.CollectionVM && e.Type == xo.EventRemove
		case <-time.After(5 * time.Second):
			t.Fatal("no VM remove event")
		}
	}
	if n := metricValue(t, "xenorchestra_events_total", map[string]string{"server": east, "collection": "VM", "type": "remove"}); n != 1 {
		t.Errorf("VM remove events counted %v times for %s", n, east)
	}
	if n := requests(t, east, "open events", "ok"); n != 1 {
		t.Errorf("open events counted %v times for %s", n, east)
	}
}
