package xo_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

const token = "TN2YBOMYtXB_hHtf4wTzm9p5tTuqq2i15yeuhcz2xXM"

type fixture struct {
	tt     *testing.T
	sim    *xosim.Server
	srv    *httptest.Server
	client *xo.Client
	pool   string
	host   string
	vm     string
	// drop is how many of the next requests get their connection closed without any answer.
	drop atomic.Int32
}

func newFixture(t *testing.T, opts ...func(*xo.Options)) *fixture {
	t.Helper()
	sim := xosim.New(xosim.Options{Tokens: []string{token}, PingInterval: 50 * time.Millisecond})
	pool, err := sim.AddPool(xosim.PoolSpec{NameLabel: "pool-a"})
	if err != nil {
		t.Fatal(err)
	}
	host, err := sim.AddHost(xosim.HostSpec{PoolID: pool, NameLabel: "host-a"})
	if err != nil {
		t.Fatal(err)
	}
	vm, err := sim.AddVM(xosim.VMSpec{PoolID: pool, HostID: host, NameLabel: "k8s-worker-1", CPUs: 2, Memory: xosim.GiB, IPs: []string{"10.0.0.11", "fd00::11"}, Tags: []string{"env=prod"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.AddVM(xosim.VMSpec{PoolID: pool, NameLabel: "k8s-worker-2", PowerState: xo.PowerStateHalted}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{sim: sim, pool: pool, host: host, vm: vm}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := f.drop.Load(); n > 0 && f.drop.CompareAndSwap(n, n-1) {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		}
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	o := xo.Options{URL: f.srv.URL, Token: token, Timeout: 2 * time.Second, RetryWait: time.Millisecond}
	for _, f := range opts {
		f(&o)
	}
	if f.client, err = xo.New(o); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) t() *testing.T { return f.tt }

func (f *fixture) listVMs(t *testing.T) ([]*xo.VM, error) {
	t.Helper()
	var vms []*xo.VM
	err := f.client.ListVMs(context.Background(), "", func(v *xo.VM) { vms = append(vms, v) })
	return vms, err
}

// is returns a predicate for an *xo.Error of kind k.
func is(k xo.Kind) func(error) bool {
	return func(err error) bool {
		var e *xo.Error
		return errors.As(err, &e) && e.Kind == k
	}
}

// noToken fails when an error's text carries the token.
func noToken(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), token) {
		t.Fatalf("error carries the token: %v", err)
	}
}

func TestListAndGet(t *testing.T) {
	f := newFixture(t)
	vms, err := f.listVMs(t)
	if err != nil {
		t.Fatal(err)
	}
	if len(vms) != 2 {
		t.Fatalf("listed %d VMs, want 2", len(vms))
	}
	var running *xo.VM
	for _, v := range vms {
		if v.ID == f.vm {
			running = v
		}
	}
	if running == nil {
		t.Fatal("running VM not listed")
	}
	if running.PoolID != f.pool || running.Container != f.host || running.CPUs.Max != 2 ||
		running.Memory.Size != xosim.GiB || running.MainIPAddress != "10.0.0.11" || len(running.Addresses) != 2 || running.Tags[0] != "env=prod" {
		t.Fatalf("VM decoded wrong: %+v", running)
	}
	got, err := f.client.GetVM(context.Background(), f.vm)
	if err != nil || got.NameLabel != "k8s-worker-1" {
		t.Fatalf("GetVM = %+v, %v", got, err)
	}
	var hosts, pools, servers int
	if err := f.client.ListHosts(context.Background(), "", func(*xo.Host) { hosts++ }); err != nil {
		t.Fatal(err)
	}
	if err := f.client.ListPools(context.Background(), func(*xo.Pool) { pools++ }); err != nil {
		t.Fatal(err)
	}
	var server *xo.Server
	if err := f.client.ListServers(context.Background(), func(s *xo.Server) { servers++; server = s }); err != nil {
		t.Fatal(err)
	}
	if hosts != 1 || pools != 1 || servers != 1 || server.PoolID != f.pool || server.Status != xo.ServerConnected {
		t.Fatalf("hosts %d pools %d servers %d (%+v)", hosts, pools, servers, server)
	}
	// One request per collection, with only the needed fields, as ndjson.
	if n := f.sim.RequestCount("GET", "/rest/v0/vms"); n != 1 {
		t.Fatalf("GET /vms made %d times", n)
	}
}

func TestErrors(t *testing.T) {
	const unknown = "00000000-0000-4000-8000-000000000000"
	cases := []struct {
		name    string
		fault   *xosim.Fault
		token   string
		call    func(*fixture) error
		want    func(error) bool
		tries   int64
		counted string
	}{
		{name: "no such VM", call: func(f *fixture) error { _, err := f.client.GetVM(context.Background(), unknown); return err },
			want: xo.IsNotFound, tries: 1, counted: "/rest/v0/vms/" + unknown},
		{name: "host uuid on /vms is no such VM", call: func(f *fixture) error { _, err := f.client.GetVM(context.Background(), f.host); return err },
			want: xo.IsNotFound, tries: 1},
		{name: "bad token", token: "wrong", call: func(f *fixture) error { _, err := f.client.GetVM(context.Background(), f.vm); return err },
			want: is(xo.KindUnauthorized), tries: 1, counted: "/rest/v0/vms/vm"},
		{name: "revoked token on a list", fault: &xosim.Fault{Kind: xosim.FaultUnauthorized}, call: func(f *fixture) error { _, err := f.listVMs(f.t()); return err },
			want: is(xo.KindUnauthorized), tries: 1, counted: "/rest/v0/vms"},
		{name: "403", fault: &xosim.Fault{Kind: xosim.FaultStatus, Status: 403, Message: "not enough permissions"}, call: func(f *fixture) error { _, err := f.client.GetVM(context.Background(), f.vm); return err },
			want: is(xo.KindForbidden), tries: 1, counted: "/rest/v0/vms/vm"},
		{name: "500 retried then given up", fault: &xosim.Fault{Kind: xosim.FaultStatus, Status: 500, Message: "XapiError"}, call: func(f *fixture) error { _, err := f.listVMs(f.t()); return err },
			want: is(xo.KindServerError), tries: 4, counted: "/rest/v0/vms"},
		{name: "429 retried", fault: &xosim.Fault{Kind: xosim.FaultStatus, Status: 429}, call: func(f *fixture) error { _, err := f.client.GetVM(context.Background(), f.vm); return err },
			want: is(xo.KindServerError), tries: 4, counted: "/rest/v0/vms/vm"},
		{name: "one 503 then success", fault: &xosim.Fault{Kind: xosim.FaultStatus, Status: 503, Count: 1}, call: func(f *fixture) error { _, err := f.listVMs(f.t()); return err },
			want: func(err error) bool { return err == nil }, tries: 2, counted: "/rest/v0/vms"},
		{name: "connection reset retried", fault: &xosim.Fault{Kind: xosim.FaultReset}, call: func(f *fixture) error { _, err := f.client.GetVM(context.Background(), f.vm); return err },
			want: is(xo.KindUnavailable), tries: 4, counted: "/rest/v0/vms/vm"},
		{name: "truncated listing", fault: &xosim.Fault{Kind: xosim.FaultTruncate, Lines: 1}, call: func(f *fixture) error { _, err := f.listVMs(f.t()); return err },
			want: func(err error) bool { return xo.IsBadResponse(err) || is(xo.KindUnavailable)(err) }, tries: 1, counted: "/rest/v0/vms"},
		{name: "slow answer times out", fault: &xosim.Fault{Kind: xosim.FaultLatency, Latency: 3 * time.Second}, call: func(f *fixture) error { _, err := f.client.GetVM(context.Background(), f.vm); return err },
			want: is(xo.KindUnavailable)},
		{name: "truncated JSON object", fault: &xosim.Fault{Kind: xosim.FaultTruncate}, call: func(f *fixture) error { _, err := f.client.GetVM(context.Background(), f.vm); return err },
			want: func(err error) bool { return xo.IsBadResponse(err) || is(xo.KindUnavailable)(err) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(o *xo.Options) {
				if tc.token != "" {
					o.Token = tc.token
				}
			})
			f.tt = t
			if tc.fault != nil {
				f.sim.InjectFault(*tc.fault)
			}
			err := tc.call(f)
			noToken(t, err)
			if !tc.want(err) {
				t.Fatalf("error %v (%T) is not of the expected kind", err, err)
			}
			if tc.tries > 0 && tc.counted != "" {
				path := strings.Replace(tc.counted, "/vms/vm", "/vms/"+f.vm, 1)
				if n := f.sim.RequestCount("GET", path); n != tc.tries {
					t.Fatalf("%s requested %d times, want %d", path, n, tc.tries)
				}
			}
		})
	}
}

func TestUnknownRouteIsNotNotFound(t *testing.T) {
	// An HTML 404 (wrong URL, a proxy, an XO without the REST API) is not XO's "no such VM":
	// treating it as one would delete Nodes.
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("<!DOCTYPE html><pre>Cannot GET " + r.URL.Path + "</pre>"))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := xo.New(xo.Options{URL: srv.URL, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetVM(context.Background(), "3f1c2b7e-0c4a-4d2b-9e51-6a0f2e8b1c11")
	if xo.IsNotFound(err) || !xo.IsBadResponse(err) {
		t.Fatalf("HTML 404 gave %v; want a bad response, not not-found", err)
	}
	err = c.Watch(context.Background(), xo.WatchOptions{}, func(xo.Event) {})
	if !errors.Is(err, xo.ErrNoEventStream) {
		t.Fatalf("Watch on a server without /events = %v, want ErrNoEventStream", err)
	}
}

func TestConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, err := xo.New(xo.Options{URL: "http://" + addr, Token: token, RetryWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetVM(context.Background(), "3f1c2b7e-0c4a-4d2b-9e51-6a0f2e8b1c11")
	if !is(xo.KindUnavailable)(err) {
		t.Fatalf("refused connection gave %v", err)
	}
	noToken(t, err)
}

func TestTLSVerifiedByDefault(t *testing.T) {
	sim := xosim.New(xosim.Options{Tokens: []string{token}})
	srv := httptest.NewTLSServer(sim)
	defer srv.Close()
	c, err := xo.New(xo.Options{URL: srv.URL, Token: token, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ListPools(context.Background(), func(*xo.Pool) {}); !is(xo.KindUnavailable)(err) {
		t.Fatalf("an unverifiable certificate was accepted: %v", err)
	}
	c, err = xo.New(xo.Options{URL: srv.URL, Token: token, TLSConfig: &tls.Config{InsecureSkipVerify: true}}) //nolint:gosec // the insecure mode under test
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ListPools(context.Background(), func(*xo.Pool) {}); err != nil {
		t.Fatalf("insecure mode failed: %v", err)
	}
}

func TestWatch(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	events := make(chan xo.Event, 16)
	done := make(chan error, 1)
	go func() {
		done <- f.client.Watch(ctx, xo.WatchOptions{Ready: func() { close(ready) }}, func(e xo.Event) { events <- e })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Watch ended: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("not subscribed in time")
	}
	other, err := f.sim.AddHost(xosim.HostSpec{PoolID: f.pool, NameLabel: "host-b"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.sim.Migrate(f.vm, other); err != nil {
		t.Fatal(err)
	}
	if err := f.sim.RemoveVM(f.vm); err != nil {
		t.Fatal(err)
	}
	want := []struct{ typ, coll string }{{"add", "host"}, {"update", "VM"}, {"remove", "VM"}}
	for _, w := range want {
		select {
		case e := <-events:
			if e.Type != w.typ || e.Collection != w.coll {
				// XO may also report the host's own update (residentVms); skip host updates.
				for e.Collection == "host" && e.Type == "update" {
					e = <-events
				}
				if e.Type != w.typ || e.Collection != w.coll {
					t.Fatalf("event %s/%s, want %s/%s", e.Type, e.Collection, w.typ, w.coll)
				}
			}
			if e.Collection == "VM" && (e.VM.ID != f.vm || (e.Type == "update" && e.VM.Container != other)) {
				t.Fatalf("VM event %+v", e.VM)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s/%s event", w.typ, w.coll)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch returned %v after cancel", err)
	}
}

func TestWatchStalledStreamBreaks(t *testing.T) {
	f := newFixture(t)
	f.sim.InjectFault(xosim.Fault{Kind: xosim.FaultStall, PathPrefix: "/rest/v0/events"})
	start := time.Now()
	err := f.client.Watch(context.Background(), xo.WatchOptions{IdleTimeout: 300 * time.Millisecond}, func(xo.Event) {})
	if !is(xo.KindUnavailable)(err) || time.Since(start) > 5*time.Second {
		t.Fatalf("stalled stream gave %v after %s", err, time.Since(start))
	}
}

func TestErrorBodyEchoingTheTokenIsRedacted(t *testing.T) {
	// A proxy's error page that echoes the request's cookie must not carry the token into an
	// error (and from there into logs and events).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("upstream failed for request with Cookie: " + r.Header.Get("Cookie")))
	}))
	defer srv.Close()
	c, err := xo.New(xo.Options{URL: srv.URL, Token: token, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetVM(context.Background(), "3f1c2b7e-0c4a-4d2b-9e51-6a0f2e8b1c11")
	if !is(xo.KindServerError)(err) || !strings.Contains(err.Error(), "[redacted]") {
		t.Fatalf("error %v", err)
	}
	noToken(t, err)
}
