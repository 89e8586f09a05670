package xosim

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

const testToken = "tok-0123456789abcdefghijklmnopqrstuvwxyzABCDE"

// Fixed ids of the test inventory.
const (
	poolA   = "5e0b1a6c-8f2d-4c39-a1e7-0d9b3c4f2a10"
	poolB   = "7c3f9a21-4b6e-4d8a-9f10-2e5d7a9c1b34"
	hostA1  = "b61a5c92-700e-4966-a13b-00633f03eea8"
	hostA2  = "84e555d8-267a-4720-aa5f-fd19035aadae"
	hostB1  = "438aca0f-429c-4ae6-accc-93c306e636a0"
	vmCP    = "3f1c2b7e-0c4a-4d2b-9e51-6a0f2e8b1c11"
	vmW1    = "a7d94e20-51b3-4f8e-8c02-93e1d5f4ab76"
	vmW2    = "e865e63f-3d30-4f0b-83e0-5b1a2c3d4e5f"
	vmHalt  = "f07ab729-c0e8-721c-45ec-f11276377030"
	vmOther = "d5d1c4a3-4c5e-ca7b-6be8-33c824f87571"
)

type testEnv struct {
	sim *Server
	ts  *httptest.Server
}

// newTestEnv serves a simulator holding two pools: A (two hosts, four VMs) and B (one host,
// one VM).
func newTestEnv(t testing.TB, opts ...func(*Options)) *testEnv {
	t.Helper()
	o := Options{Tokens: []string{testToken}, BasicAuth: map[string]string{"admin": "s3cret"}, PingInterval: time.Hour}
	for _, f := range opts {
		f(&o)
	}
	sim := New(o)
	must := func(_ string, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(sim.AddPool(PoolSpec{ID: poolA, NameLabel: "dc1-pool-a", ServerHost: "192.0.2.11"}))
	must(sim.AddPool(PoolSpec{ID: poolB, NameLabel: "dc2-pool-b"}))
	must(sim.AddHost(HostSpec{ID: hostA1, PoolID: poolA, NameLabel: "xcp-a-01", Address: "192.0.2.11", Cores: 32, Sockets: 2}))
	must(sim.AddHost(HostSpec{ID: hostA2, PoolID: poolA, NameLabel: "xcp-a-02", Address: "192.0.2.12"}))
	must(sim.AddHost(HostSpec{ID: hostB1, PoolID: poolB, NameLabel: "xcp-b-01", Address: "198.51.100.21"}))
	_, err := sim.AddVMs([]VMSpec{
		{ID: vmCP, PoolID: poolA, HostID: hostA1, NameLabel: "k8s-cp-1", CPUs: 2, Memory: 4 * GiB, Tags: []string{"k8s", "role=cp"}, IPs: []string{"10.0.12.11", "fd00::11"}},
		{ID: vmW1, PoolID: poolA, HostID: hostA1, NameLabel: "k8s-worker-1", CPUs: 4, Memory: 8 * GiB, Tags: []string{"k8s", "backup=daily"}, IPs: []string{"10.0.12.21"}},
		{ID: vmW2, PoolID: poolA, HostID: hostA2, NameLabel: "k8s-worker-2", CPUs: 8, Memory: 16 * GiB, Firmware: "uefi", Tags: []string{"k8s"}, IPs: []string{"10.0.12.22"},
			OSVersion: map[string]string{"name": "Ubuntu 24.04 LTS", "distro": "ubuntu"}},
		{ID: vmHalt, PoolID: poolA, NameLabel: "legacy-db", PowerState: "Halted", Tags: []string{}, IPs: []string{"10.0.12.99"}},
		{ID: vmOther, PoolID: poolB, NameLabel: "k8s-worker-3", CPUs: 2, Memory: 2 * GiB, Tags: []string{"k8s"}, IPs: []string{"10.1.0.5"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	return &testEnv{sim: sim, ts: ts}
}

type response struct {
	status int
	header http.Header
	body   string
}

func (r response) json(t testing.TB) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(r.body), &v); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, r.body)
	}
	return v
}

type reqOpt func(*http.Request)

func withToken(tok string) reqOpt {
	return func(r *http.Request) { r.Header.Add("Cookie", "authenticationToken="+tok) }
}

func withHeader(k, v string) reqOpt {
	return func(r *http.Request) { r.Header.Add(k, v) }
}

func withBody(contentType, body string) reqOpt {
	return func(r *http.Request) {
		r.Header.Set("Content-Type", contentType)
		r.Body = http.NoBody
		if body != "" {
			r.Body = io.NopCloser(strings.NewReader(body))
		}
		r.ContentLength = int64(len(body))
	}
}

// do sends a request; with no options it carries the valid token.
func (e *testEnv) do(t testing.TB, method, path string, opts ...reqOpt) response {
	t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(opts) == 0 {
		opts = []reqOpt{withToken(testToken)}
	}
	for _, o := range opts {
		o(req)
	}
	// Ask for identity encoding so that bodies can be compared; gzip has its own test.
	if req.Header.Get("Accept-Encoding") == "" {
		req.Header.Set("Accept-Encoding", "identity")
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func (e *testEnv) get(t testing.TB, path string, opts ...reqOpt) response {
	t.Helper()
	return e.do(t, http.MethodGet, path, opts...)
}

// jsonEqual compares a body with the expected JSON, ignoring formatting.
func jsonEqual(t testing.TB, got string, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Errorf("response is not JSON: %v\n%s", err, got)
		return false
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expectation %s: %v", want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return string(gb) == string(wb)
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

func urlPathEscape(s string) string { return url.PathEscape(s) }

func newHTTPTestServer(h http.Handler) *httptest.Server { return httptest.NewServer(h) }
