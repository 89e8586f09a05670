// Package conformance validates the XO simulator's real answers against XO's own OpenAPI
// document (@xen-orchestra/rest-api 0.39.0, open-api/spec/swagger.json), fetched and pinned by
// hack/openapi.sh. It lives in the test module (test/go.mod) so that the OpenAPI validator is
// no dependency of the controller's module.
//
// What the document does not describe, and so is checked elsewhere (xo/xosim's server_test.go,
// events_test.go): error bodies (400, 401, 404 and 422 have no content schema, and 422 is not
// listed for the collections at all), the application/x-ndjson content type (the document only
// lists application/json; each ndjson line is validated here against the collection's item
// schema instead), the event stream's frames (GET /events has no content schema), and nested
// field paths (fields=CPUs.number gives {"CPUs":{"number":2}}, which the document's
// Partial<XoVm> rejects since it makes only top-level properties optional; XO answers the
// same, so fields_test.go checks those against lodash instead).
package conformance

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

const openAPIVersion = "0.39.0"

func openAPISpecPath() string {
	if p := os.Getenv("XO_OPENAPI_SPEC"); p != "" {
		return p
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "xenorchestra-ccm", "openapi", openAPIVersion, "swagger.json")
}

const testToken = "tok-0123456789abcdefghijklmnopqrstuvwxyzABCDE"

// The inventory's fixed ids.
const (
	poolA  = "5e0b1a6c-8f2d-4c39-a1e7-0d9b3c4f2a10"
	poolB  = "7c3f9a21-4b6e-4d8a-9f10-2e5d7a9c1b34"
	hostA1 = "b61a5c92-700e-4966-a13b-00633f03eea8"
	hostB1 = "438aca0f-429c-4ae6-accc-93c306e636a0"
	vmCP   = "3f1c2b7e-0c4a-4d2b-9e51-6a0f2e8b1c11"
	vmW2   = "e865e63f-3d30-4f0b-83e0-5b1a2c3d4e5f"
	vmHalt = "f07ab729-c0e8-721c-45ec-f11276377030"
	vmB    = "d5d1c4a3-4c5e-ca7b-6be8-33c824f87571"
)

// testEnv is a simulator holding two pools, with a running VM of each shape the controller
// reads (tags, IPv4 and IPv6 addresses, UEFI, an OS version), a halted VM and a VM in pool B.
type testEnv struct {
	sim *xosim.Server
	ts  *httptest.Server
}

func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	sim := xosim.New(xosim.Options{Tokens: []string{testToken}, PingInterval: 20 * time.Millisecond})
	must := func(_ string, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(sim.AddPool(xosim.PoolSpec{ID: poolA, NameLabel: "dc1-pool-a", ServerHost: "192.0.2.11"}))
	must(sim.AddPool(xosim.PoolSpec{ID: poolB, NameLabel: "dc2-pool-b"}))
	must(sim.AddHost(xosim.HostSpec{ID: hostA1, PoolID: poolA, NameLabel: "xcp-a-01", Address: "192.0.2.11", Cores: 32, Sockets: 2}))
	must(sim.AddHost(xosim.HostSpec{ID: hostB1, PoolID: poolB, NameLabel: "xcp-b-01", Address: "198.51.100.21"}))
	_, err := sim.AddVMs([]xosim.VMSpec{
		{ID: vmCP, PoolID: poolA, HostID: hostA1, NameLabel: "k8s-cp-1", CPUs: 2, Memory: 4 << 30, Tags: []string{"k8s", "role=cp"}, IPs: []string{"10.0.12.11", "fd00::11"}},
		{ID: vmW2, PoolID: poolA, HostID: hostA1, NameLabel: "k8s-worker-2", CPUs: 8, Memory: 16 << 30, Firmware: "uefi", Tags: []string{"k8s"}, IPs: []string{"10.0.12.22"},
			OSVersion: map[string]string{"name": "Ubuntu 24.04 LTS", "distro": "ubuntu"}},
		{ID: vmHalt, PoolID: poolA, NameLabel: "legacy-db", PowerState: "Halted", Tags: []string{}, IPs: []string{"10.0.12.99"}},
		{ID: vmB, PoolID: poolB, NameLabel: "k8s-worker-3", CPUs: 2, Memory: 2 << 30, Tags: []string{"k8s"}, IPs: []string{"10.1.0.5"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	return &testEnv{sim: sim, ts: ts}
}

// serverID is the id of the XO server entry that holds pool.
func (e *testEnv) serverID(t *testing.T, pool string) string {
	t.Helper()
	p, ok := e.sim.Pool(pool)
	if !ok || p.ServerID == "" {
		t.Fatalf("pool %s: no server entry", pool)
	}
	return p.ServerID
}

// stream is an open event stream, read up to its init frame.
type stream struct {
	id   string
	resp *http.Response
}

func openStream(t *testing.T, e *testEnv) *stream {
	t.Helper()
	req, _ := http.NewRequest("GET", e.ts.URL+"/rest/v0/events", nil)
	req.Header.Set("Cookie", "authenticationToken="+testToken)
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("GET /events: status %d", resp.StatusCode)
	}
	// The first frame: "event: init" and "data: {"id":...}", then a blank line.
	r, data := bufio.NewReader(resp.Body), ""
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("GET /events: %v", err)
		}
		if line = strings.TrimSuffix(line, "\n"); line == "" {
			break
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			data = d
		}
	}
	var init struct{ ID string }
	if err := json.Unmarshal([]byte(data), &init); err != nil || init.ID == "" {
		t.Fatalf("GET /events: first frame's data %q", data)
	}
	return &stream{id: init.ID, resp: resp}
}

type conformance struct {
	t      *testing.T
	env    *testEnv
	doc    *openapi3.T
	router routers.Router
}

func newConformance(t *testing.T) *conformance {
	path := openAPISpecPath()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("XO's OpenAPI document is missing (%v): run hack/openapi.sh to fetch it, or set XO_OPENAPI_SPEC", err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(path)
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	if doc.Info == nil || doc.Info.Version != openAPIVersion {
		t.Fatalf("%s is not version %s of the document", path, openAPIVersion)
	}
	e := newTestEnv(t)
	doc.Servers = openapi3.Servers{{URL: e.ts.URL + xosim.BasePath}}
	// The document's security requirement names "*" and "none", which are no defined schemes;
	// authentication is tested on its own, so requests are validated without it.
	doc.Security = nil
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			op.Security = nil
		}
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("router: %v", err)
	}
	return &conformance{t: t, env: e, doc: doc, router: router}
}

type exchange struct {
	req    *http.Request
	input  *openapi3filter.RequestValidationInput
	status int
	header http.Header
	body   []byte
}

// send performs a request against the simulator and returns the exchange with its route.
func (c *conformance) send(method, path, contentType, body string, auth bool) *exchange {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.env.ts.URL+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if auth {
		req.Header.Set("Cookie", "authenticationToken="+testToken)
	}
	req.Header.Set("Accept-Encoding", "identity")
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		c.t.Fatalf("%s %s: no route in XO's document: %v", method, path, err)
	}
	resp, err := c.env.ts.Client().Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	// Rebuild the request (its body was consumed) for request validation.
	req2, _ := http.NewRequest(method, c.env.ts.URL+path, strings.NewReader(body))
	if contentType != "" {
		req2.Header.Set("Content-Type", contentType)
	}
	return &exchange{
		req: req2,
		input: &openapi3filter.RequestValidationInput{
			Request: req2, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
		},
		status: resp.StatusCode,
		header: resp.Header,
		body:   b,
	}
}

// validateRequest checks that a test request is valid for the document (so that the response
// checked next answers a request XO documents).
func (c *conformance) validateRequest(x *exchange) {
	c.t.Helper()
	if err := openapi3filter.ValidateRequest(context.Background(), x.input); err != nil {
		c.t.Errorf("%s %s: request not valid for XO's document: %v", x.req.Method, x.req.URL, err)
	}
}

// validateResponse validates status, content type and body against the operation.
func (c *conformance) validateResponse(x *exchange, includeStatus bool) {
	c.t.Helper()
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: x.input,
		Status:                 x.status,
		Header:                 x.header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: includeStatus, MultiError: true},
	}
	in.SetBodyBytes(x.body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		c.t.Errorf("%s %s: %d response does not conform: %v\n%.400s", x.req.Method, x.req.URL, x.status, err, x.body)
	}
}

func (c *conformance) schema(name string) *openapi3.Schema {
	c.t.Helper()
	ref := c.doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		c.t.Fatalf("schema %s not in XO's document", name)
	}
	return ref.Value
}

func TestConformance(t *testing.T) {
	c := newConformance(t)

	// Successful reads, validated with their body schemas.
	ok := []struct {
		path   string
		status int
	}{
		{"/rest/v0/ping", 200},
		{"/rest/v0/vms", 200},
		{"/rest/v0/vms?fields=name_label,power_state,$pool,$container,CPUs,memory,tags,addresses,mainIpAddress", 200},
		{"/rest/v0/vms?fields=*", 200},
		{"/rest/v0/vms?fields=CPUs,memory&filter=power_state:running&limit=2", 200},
		{"/rest/v0/vms?fields=id&ndjson=false&markdown=false&filter=nope:x", 200},
		{"/rest/v0/hosts", 200},
		{"/rest/v0/hosts?fields=*", 200},
		{"/rest/v0/hosts?fields=name_label,productBrand,$pool,power_state&limit=1", 200},
		{"/rest/v0/pools", 200},
		{"/rest/v0/pools?fields=*", 200},
		{"/rest/v0/servers", 200},
		{"/rest/v0/servers?fields=*", 200},
		{"/rest/v0/servers?fields=id,status,poolId&filter=status:/^connected$/", 200},
		{"/rest/v0/vms/" + vmCP, 200},
		{"/rest/v0/vms/" + vmHalt, 200},
		{"/rest/v0/vms/" + vmW2, 200},
		{"/rest/v0/hosts/" + hostA1, 200},
		{"/rest/v0/pools/" + poolA, 200},
		{"/rest/v0/servers/" + c.env.serverID(t, poolA), 200},
	}
	for _, tt := range ok {
		x := c.send("GET", tt.path, "", "", true)
		if x.status != tt.status {
			t.Errorf("GET %s: %d, want %d: %s", tt.path, x.status, tt.status, x.body)
			continue
		}
		c.validateRequest(x)
		c.validateResponse(x, true)
	}

	// A disconnected pool's server (no poolId) still conforms.
	if err := c.env.sim.DisconnectPool(poolB); err != nil {
		t.Fatal(err)
	}
	x := c.send("GET", "/rest/v0/servers/"+c.env.serverID(t, poolB), "", "", true)
	c.validateResponse(x, true)
	x = c.send("GET", "/rest/v0/servers?fields=*", "", "", true)
	c.validateResponse(x, true)
	if err := c.env.sim.ReconnectPool(poolB); err != nil {
		t.Fatal(err)
	}

	// Errors: the document lists the statuses (no bodies).
	errs := []struct {
		method, path string
		auth         bool
		status       int
	}{
		{"GET", "/rest/v0/vms", false, 401},
		{"GET", "/rest/v0/vms/" + vmCP, false, 401},
		{"GET", "/rest/v0/hosts", false, 401},
		{"GET", "/rest/v0/pools/" + poolA, false, 401},
		{"GET", "/rest/v0/servers", false, 401},
		{"GET", "/rest/v0/events", false, 401},
		{"GET", "/rest/v0/vms/nope", true, 404},
		{"GET", "/rest/v0/hosts/" + vmCP, true, 404},
		{"GET", "/rest/v0/pools/nope", true, 404},
		{"GET", "/rest/v0/servers/nope", true, 404},
		{"GET", "/rest/v0/vms?filter=tags:backup=daily", true, 400},
		{"PUT", "/rest/v0/vms/nope/tags/x", true, 404},
		{"PUT", "/rest/v0/vms/" + vmCP + "/tags/x", true, 204},
		{"DELETE", "/rest/v0/vms/" + vmCP + "/tags/x", true, 204},
		{"PUT", "/rest/v0/hosts/" + hostA1 + "/tags/x", true, 204},
		{"DELETE", "/rest/v0/pools/" + poolA + "/tags/x", true, 204},
		{"PUT", "/rest/v0/vms/" + vmCP + "/tags/x", false, 401},
	}
	for _, tt := range errs {
		x := c.send(tt.method, tt.path, "", "", tt.auth)
		if x.status != tt.status {
			t.Errorf("%s %s: %d, want %d", tt.method, tt.path, x.status, tt.status)
			continue
		}
		c.validateResponse(x, true)
	}
	// 422 is not listed for the collections: only the body is checked, elsewhere.
	x = c.send("GET", "/rest/v0/vms?limit=abc", "", "", true)
	if x.status != 422 {
		t.Errorf("limit=abc: %d", x.status)
	}
	c.validateResponse(x, false)
}

// TestConformanceNDJSON validates each ndjson line against the collection's item schema: the
// document describes the entries but not the ndjson content type.
func TestConformanceNDJSON(t *testing.T) {
	c := newConformance(t)
	for _, tt := range []struct {
		coll, item string
	}{
		{"vms", "WithHref_Partial_Unbrand_XoVm___"},
		{"hosts", "WithHref_Partial_Unbrand_XoHost___"},
		{"pools", "WithHref_Partial_Unbrand_XoPool___"},
		{"servers", "WithHref_Partial_Unbrand_XoServer___"},
	} {
		item := c.schema(tt.item)
		for _, q := range []string{"?ndjson=true&fields=*", "?ndjson=true&fields=id,name_label,label,status,poolId,$pool", "?ndjson=true"} {
			x := c.send("GET", "/rest/v0/"+tt.coll+q, "", "", true)
			c.validateRequest(x)
			if x.status != 200 || x.header.Get("Content-Type") != "application/x-ndjson" {
				t.Fatalf("%s%s: %d %q", tt.coll, q, x.status, x.header.Get("Content-Type"))
			}
			lines := strings.Split(strings.TrimSuffix(string(x.body), "\n"), "\n")
			if len(lines) == 0 || lines[0] == "" {
				t.Fatalf("%s%s: no lines", tt.coll, q)
			}
			for _, line := range lines {
				var v any
				if err := json.Unmarshal([]byte(line), &v); err != nil {
					t.Fatalf("%s%s: line %q: %v", tt.coll, q, line, err)
				}
				var err error
				if _, isString := v.(string); isString {
					err = openapi3.NewStringSchema().VisitJSON(v)
				} else {
					err = item.VisitJSON(v, openapi3.VisitAsResponse(), openapi3.MultiErrors())
				}
				if err != nil {
					t.Errorf("%s%s: line does not conform to %s: %v\n%.300s", tt.coll, q, tt.item, err, line)
				}
			}
		}
	}
}

// TestConformanceEvents validates the event endpoints the document describes.
func TestConformanceEvents(t *testing.T) {
	c := newConformance(t)
	s := openStream(t, c.env)
	x := c.send("POST", "/rest/v0/events/"+s.id+"/subscriptions", "application/json", `{"collection":"VM","fields":["id","power_state"]}`, true)
	c.validateRequest(x)
	if x.status != 201 {
		t.Fatalf("subscribe: %d %s", x.status, x.body)
	}
	c.validateResponse(x, true)
	x = c.send("POST", "/rest/v0/events/"+s.id+"/subscriptions", "application/json", `{"collection":"host","fields":"*"}`, true)
	c.validateRequest(x)
	c.validateResponse(x, true)
	x = c.send("POST", "/rest/v0/events/0d8b28c6-e9bf-4c9d-a382-3c9e0d7cfbff/subscriptions", "application/json", `{"collection":"VM"}`, true)
	if x.status != 404 {
		t.Errorf("unknown connection: %d", x.status)
	}
	c.validateResponse(x, true)
	x = c.send("DELETE", "/rest/v0/events/"+s.id+"/subscriptions/VM", "", "", true)
	c.validateRequest(x)
	if x.status != 204 {
		t.Errorf("unsubscribe: %d", x.status)
	}
	c.validateResponse(x, true)
	x = c.send("DELETE", "/rest/v0/events/nope/subscriptions/VM", "", "", true)
	c.validateResponse(x, true)

	// The stream itself: 200 is the documented status (no content schema).
	req, _ := http.NewRequest("GET", c.env.ts.URL+"/rest/v0/events", nil)
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		t.Fatal(err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 s.resp.StatusCode,
		Header:                 s.resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: true},
	}
	in.SetBodyBytes(nil)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("GET /events: %v", err)
	}
}
