package xosim

import (
	"compress/gzip"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"
)

const (
	bodyInvalidCredentials = `{"error":"invalid credentials"}`
	bodyMultipleAuth       = `{"error":"Having multiple authentication methods is not supported, please choose one"}`
	bodyMalformed          = `{"error":"Malformed Authorization header"}`
)

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

func TestAuthentication(t *testing.T) {
	e := newTestEnv(t)
	tests := []struct {
		name       string
		path       string
		opts       []reqOpt
		wantStatus int
		wantBody   string // JSON; empty: not checked
	}{
		{"token cookie", "/rest/v0/vms", []reqOpt{withToken(testToken)}, 200, ""},
		{"token alias cookie", "/rest/v0/vms", []reqOpt{withHeader("Cookie", "token="+testToken)}, 200, ""},
		{"both cookies, authenticationToken wins", "/rest/v0/vms", []reqOpt{withHeader("Cookie", "token=bad; authenticationToken="+testToken)}, 200, ""},
		{"basic", "/rest/v0/vms", []reqOpt{withHeader("Authorization", basic("admin", "s3cret"))}, 200, ""},
		{"no credentials", "/rest/v0/vms", []reqOpt{withHeader("X-None", "1")}, 401, bodyInvalidCredentials},
		{"no credentials, unknown id: 401 before lookup", "/rest/v0/vms/nope", []reqOpt{withHeader("X-None", "1")}, 401, bodyInvalidCredentials},
		{"bad token", "/rest/v0/vms", []reqOpt{withToken("nope")}, 401, bodyInvalidCredentials},
		{"empty token", "/rest/v0/vms", []reqOpt{withToken("")}, 401, bodyInvalidCredentials},
		{"bearer", "/rest/v0/vms", []reqOpt{withHeader("Authorization", "Bearer "+testToken)}, 401, bodyInvalidCredentials},
		{"basic wrong password", "/rest/v0/vms", []reqOpt{withHeader("Authorization", basic("admin", "nope"))}, 401, bodyInvalidCredentials},
		{"basic unknown user", "/rest/v0/vms", []reqOpt{withHeader("Authorization", basic("root", "s3cret"))}, 401, bodyInvalidCredentials},
		{"cookie and authorization", "/rest/v0/vms", []reqOpt{withToken(testToken), withHeader("Authorization", basic("admin", "s3cret"))}, 400, bodyMultipleAuth},
		{"cookie and bearer", "/rest/v0/vms", []reqOpt{withToken(testToken), withHeader("Authorization", "Bearer x")}, 400, bodyMultipleAuth},
		{"authorization without space", "/rest/v0/vms", []reqOpt{withHeader("Authorization", "Basic")}, 400, bodyMalformed},
		{"ping without credentials", "/rest/v0/ping", []reqOpt{withHeader("X-None", "1")}, 200, ""},
		{"ping with a bad token", "/rest/v0/ping", []reqOpt{withToken("nope")}, 401, bodyInvalidCredentials},
		{"unknown path, bad token", "/rest/v0/nope", []reqOpt{withToken("nope")}, 401, bodyInvalidCredentials},
		{"events without credentials", "/rest/v0/events", []reqOpt{withHeader("X-None", "1")}, 401, bodyInvalidCredentials},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.get(t, tt.path, tt.opts...)
			if r.status != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", r.status, tt.wantStatus, r.body)
			}
			if tt.wantBody != "" && !jsonEqual(t, r.body, tt.wantBody) {
				t.Errorf("body %s, want %s", r.body, tt.wantBody)
			}
			if tt.wantStatus == 401 {
				if got := r.header.Get("WWW-Authenticate"); got != `Basic realm="xo"` {
					t.Errorf("WWW-Authenticate %q", got)
				}
			}
			if tt.wantStatus >= 400 && !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
				t.Errorf("Content-Type %q", r.header.Get("Content-Type"))
			}
		})
	}
}

func TestTokenRevocation(t *testing.T) {
	e := newTestEnv(t)
	e.sim.AddToken("second")
	if r := e.get(t, "/rest/v0/pools", withToken("second")); r.status != 200 {
		t.Fatalf("added token: %d", r.status)
	}
	e.sim.RevokeToken("second")
	if r := e.get(t, "/rest/v0/pools", withToken("second")); r.status != 401 {
		t.Fatalf("revoked token: %d", r.status)
	}
	if r := e.get(t, "/rest/v0/pools"); r.status != 200 {
		t.Fatalf("other token: %d", r.status)
	}
}

func TestPing(t *testing.T) {
	e := newTestEnv(t)
	r := e.get(t, "/rest/v0/ping")
	if r.status != 200 || r.header.Get("Content-Type") != "application/json; charset=utf-8" {
		t.Fatalf("status %d, type %q", r.status, r.header.Get("Content-Type"))
	}
	m, _ := r.json(t).(map[string]any)
	if m["result"] != "pong" {
		t.Errorf("result %v", m["result"])
	}
	if ts, ok := m["timestamp"].(float64); !ok || ts < 1.6e12 {
		t.Errorf("timestamp %v is not milliseconds", m["timestamp"])
	}
	if !strings.HasPrefix(r.body, "{\n  \"result\": \"pong\",\n  \"timestamp\": ") {
		t.Errorf("not pretty-printed in XO's key order: %q", r.body)
	}
}

func TestUnknownRoutes(t *testing.T) {
	e := newTestEnv(t)
	for _, tt := range []struct{ method, path string }{
		{"GET", "/rest/v0/nope"},
		{"GET", "/rest/v0/vms/" + vmCP + "/nope"},
		{"POST", "/rest/v0/vms"},
		{"GET", "/rest/v1/vms"},
		{"GET", "/"},
		{"GET", "/rest/v0//vms"},
		{"PUT", "/rest/v0/servers/x/tags/y"},
	} {
		r := e.do(t, tt.method, tt.path)
		if r.status != 404 || r.header.Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(r.body, "<pre>Cannot "+tt.method+" ") {
			t.Errorf("%s %s: %d %q %q", tt.method, tt.path, r.status, r.header.Get("Content-Type"), r.body)
		}
	}
	// Without credentials too: the route does not exist, so nothing asks for them.
	if r := e.get(t, "/rest/v0/nope", withHeader("X-None", "1")); r.status != 404 {
		t.Errorf("unknown path without credentials: %d", r.status)
	}
	req, _ := http.NewRequest("GET", e.ts.URL+"/rest/v0", nil)
	resp, err := e.ts.Client().Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 302 || resp.Header.Get("Location") != "/rest/v0/docs" {
		t.Errorf("GET /rest/v0: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestCollections(t *testing.T) {
	e := newTestEnv(t)
	tests := []struct {
		name string
		path string
		want string // JSON
	}{
		{"hrefs", "/rest/v0/hosts", `["/rest/v0/hosts/` + hostA1 + `","/rest/v0/hosts/` + hostA2 + `","/rest/v0/hosts/` + hostB1 + `"]`},
		{"trailing slash", "/rest/v0/pools/", `["/rest/v0/pools/` + poolA + `","/rest/v0/pools/` + poolB + `"]`},
		{"fields", "/rest/v0/vms?fields=name_label,power_state&filter=k8s-cp", `[{"name_label":"k8s-cp-1","power_state":"Running","href":"/rest/v0/vms/` + vmCP + `"}]`},
		{"nested fields", "/rest/v0/vms?fields=CPUs.number,memory.static[1]&filter=name_label:k8s-cp-1", `[{"CPUs":{"number":2},"memory":{"static":[null,4294967296]},"href":"/rest/v0/vms/` + vmCP + `"}]`},
		{"empty fields", "/rest/v0/pools?fields=", `[{"href":"/rest/v0/pools/` + poolA + `"},{"href":"/rest/v0/pools/` + poolB + `"}]`},
		{"unknown field", "/rest/v0/pools?fields=nope,name_label&limit=1", `[{"name_label":"dc1-pool-a","href":"/rest/v0/pools/` + poolA + `"}]`},
		{"halted container and no mainIpAddress", "/rest/v0/vms?fields=$container,mainIpAddress,addresses,os_version&filter=power_state:halted",
			`[{"$container":"` + poolA + `","addresses":{},"os_version":null,"href":"/rest/v0/vms/` + vmHalt + `"}]`},
		{"running container", "/rest/v0/vms?fields=$container,mainIpAddress&filter=name_label:/^k8s-worker-2$/",
			`[{"$container":"` + hostA2 + `","mainIpAddress":"10.0.12.22","href":"/rest/v0/vms/` + vmW2 + `"}]`},
		{"filter AND", "/rest/v0/vms?fields=id&filter=" + enc("tags:k8s $pool:"+poolB), `[{"id":"` + vmOther + `","href":"/rest/v0/vms/` + vmOther + `"}]`},
		{"filter numeric", "/rest/v0/vms?fields=id&filter=" + enc("CPUs:max:>=8"), `[{"id":"` + vmW2 + `","href":"/rest/v0/vms/` + vmW2 + `"}]`},
		{"filter quoted", "/rest/v0/vms?fields=id&filter=" + enc(`tags:"backup=daily"`), `[{"id":"` + vmW1 + `","href":"/rest/v0/vms/` + vmW1 + `"}]`},
		{"filter OR and NOT", "/rest/v0/vms?fields=id&filter=" + enc(`!$pool:`+poolB+` name_label:|(cp-1 legacy)`),
			`[{"id":"` + vmCP + `","href":"/rest/v0/vms/` + vmCP + `"},{"id":"` + vmHalt + `","href":"/rest/v0/vms/` + vmHalt + `"}]`},
		{"filter on a field not listed", "/rest/v0/vms?fields=name_label&filter=" + enc("uuid:e865e63f"), `[{"name_label":"k8s-worker-2","href":"/rest/v0/vms/` + vmW2 + `"}]`},
		{"filter unknown property", "/rest/v0/vms?filter=nope:x", `[]`},
		{"limit 0", "/rest/v0/vms?limit=0", `[]`},
		{"limit 1", "/rest/v0/hosts?limit=1", `["/rest/v0/hosts/` + hostA1 + `"]`},
		{"limit -1 gives all", "/rest/v0/pools?limit=-1", `["/rest/v0/pools/` + poolA + `","/rest/v0/pools/` + poolB + `"]`},
		{"limit 1.5 gives all", "/rest/v0/pools?limit=1.5", `["/rest/v0/pools/` + poolA + `","/rest/v0/pools/` + poolB + `"]`},
		{"limit 2.0", "/rest/v0/hosts?limit=2.0", `["/rest/v0/hosts/` + hostA1 + `","/rest/v0/hosts/` + hostA2 + `"]`},
		{"ndjson=TRUE validates but is not ndjson", "/rest/v0/pools?ndjson=TRUE", `["/rest/v0/pools/` + poolA + `","/rest/v0/pools/` + poolB + `"]`},
		{"ndjson=false", "/rest/v0/pools?ndjson=false&markdown=false", `["/rest/v0/pools/` + poolA + `","/rest/v0/pools/` + poolB + `"]`},
		{"servers", "/rest/v0/servers?fields=status,poolId,host,label", `[
			{"status":"connected","poolId":"` + poolA + `","host":"192.0.2.11","label":"dc1-pool-a","href":"/rest/v0/servers/` + nameUUID("xosim-server", poolA) + `"},
			{"status":"connected","poolId":"` + poolB + `","host":"198.51.100.21","label":"dc2-pool-b","href":"/rest/v0/servers/` + nameUUID("xosim-server", poolB) + `"}]`},
		{"hosts fields", "/rest/v0/hosts?fields=name_label,$pool,power_state,cpus&filter=" + enc("cpus:cores:>=32"),
			`[{"name_label":"xcp-a-01","$pool":"` + poolA + `","power_state":"Running","cpus":{"cores":32,"sockets":2},"href":"/rest/v0/hosts/` + hostA1 + `"}]`},
		{"pool master and cpus", "/rest/v0/pools?fields=master,cpus&limit=1", `[{"master":"` + hostA1 + `","cpus":{"cores":40,"sockets":3},"href":"/rest/v0/pools/` + poolA + `"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.get(t, tt.path)
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if r.header.Get("Content-Type") != "application/json; charset=utf-8" {
				t.Errorf("Content-Type %q", r.header.Get("Content-Type"))
			}
			if !jsonEqual(t, r.body, tt.want) {
				t.Errorf("body %s\nwant %s", r.body, tt.want)
			}
		})
	}
}

func enc(s string) string { return strings.ReplaceAll(urlQueryEscape(s), "+", "%20") }

func TestCollectionFormatting(t *testing.T) {
	e := newTestEnv(t)
	r := e.get(t, "/rest/v0/pools?fields=name_label")
	want := "[\n  {\n    \"name_label\": \"dc1-pool-a\",\n    \"href\": \"/rest/v0/pools/" + poolA + "\"\n  },\n  {\n    \"name_label\": \"dc2-pool-b\",\n    \"href\": \"/rest/v0/pools/" + poolB + "\"\n  }\n]"
	if r.body != want {
		t.Errorf("body %q\nwant %q", r.body, want)
	}
	r = e.get(t, "/rest/v0/vms?fields=*&filter=name_label:k8s-cp-1")
	all, _ := r.json(t).([]any)
	if len(all) != 1 {
		t.Fatalf("fields=*: %s", r.body)
	}
	vm, _ := all[0].(map[string]any)
	if vm["href"] != "/rest/v0/vms/"+vmCP || vm["id"] != vmCP || vm["_xapiRef"] == nil || vm["type"] != "VM" {
		t.Errorf("fields=* entry: %v", vm)
	}
}

func TestCollectionErrors(t *testing.T) {
	e := newTestEnv(t)
	tests := []struct {
		name   string
		path   string
		status int
		want   string
	}{
		{"limit abc", "/rest/v0/vms?limit=abc", 422, `{"error":{"limit":{"message":"invalid float number","value":"abc"}},"data":{}}`},
		{"empty limit", "/rest/v0/vms?limit=", 422, `{"error":{"limit":{"message":"invalid float number","value":""}},"data":{}}`},
		{"ndjson=1", "/rest/v0/vms?ndjson=1", 422, `{"error":{"ndjson":{"message":"invalid boolean value","value":"1"}},"data":{}}`},
		{"ndjson=yes", "/rest/v0/vms?ndjson=yes", 422, `{"error":{"ndjson":{"message":"invalid boolean value","value":"yes"}},"data":{}}`},
		{"bare ndjson", "/rest/v0/vms?ndjson", 422, `{"error":{"ndjson":{"message":"invalid boolean value","value":""}},"data":{}}`},
		{"repeated fields", "/rest/v0/vms?fields=id&fields=name_label", 422, `{"error":{"fields":{"message":"invalid string value","value":["id","name_label"]}},"data":{}}`},
		{"repeated filter", "/rest/v0/vms?filter=a&filter=b", 422, `{"error":{"filter":{"message":"invalid string value","value":["a","b"]}},"data":{}}`},
		{"several", "/rest/v0/vms?limit=x&markdown=2&fields=a&fields=b", 422,
			`{"error":{"fields":{"message":"invalid string value","value":["a","b"]},"markdown":{"message":"invalid boolean value","value":"2"},"limit":{"message":"invalid float number","value":"x"}},"data":{}}`},
		{"ndjson and markdown", "/rest/v0/vms?ndjson=true&markdown=true", 422, `{"error":"Cannot use both ndjson and markdown output formats simultaneously","data":{}}`},
		{"filter parse error", "/rest/v0/vms?filter=" + enc("tags:backup=daily"), 400, `{"error":"parse error: expected end of input at position 11","data":{"stringToParse":"tags:backup=daily"}}`},
		{"filter number error", "/rest/v0/vms?filter=" + enc("CPUs:max:>four"), 400, `{"error":"value must be a number","data":{"stringToParse":"CPUs:max:>four"}}`},
		{"filter parse error before ndjson/markdown check", "/rest/v0/vms?ndjson=true&markdown=true&filter=(", 400, `{"error":"parse error: expected end of input at position 0","data":{"stringToParse":"("}}`},
		{"validation before filter", "/rest/v0/vms?limit=x&filter=(", 422, `{"error":{"limit":{"message":"invalid float number","value":"x"}},"data":{}}`},
		{"resolve needs a resolver", "/rest/v0/vms?filter=" + enc("x:[resolve]:y"), 500, `{"error":"[resolve] requires a resolver"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.get(t, tt.path)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if !jsonEqual(t, r.body, tt.want) {
				t.Errorf("body %s\nwant %s", r.body, tt.want)
			}
		})
	}
}

func TestNDJSON(t *testing.T) {
	e := newTestEnv(t)
	r := e.get(t, "/rest/v0/vms?fields=name_label,CPUs&ndjson=true&filter=k8s")
	if r.status != 200 || r.header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("status %d, type %q", r.status, r.header.Get("Content-Type"))
	}
	lines := strings.Split(r.body, "\n")
	if len(lines) != 5 || lines[4] != "" {
		t.Fatalf("want 4 lines each ending in a newline, got %q", r.body)
	}
	want := `{"name_label":"k8s-cp-1","CPUs":{"max":2,"number":2},"href":"/rest/v0/vms/` + vmCP + `"}`
	if lines[0] != want {
		t.Errorf("line 1 %s\nwant   %s", lines[0], want)
	}
	r = e.get(t, "/rest/v0/hosts?ndjson=true")
	if r.body != `"/rest/v0/hosts/`+hostA1+`"`+"\n"+`"/rest/v0/hosts/`+hostA2+`"`+"\n"+`"/rest/v0/hosts/`+hostB1+`"`+"\n" {
		t.Errorf("hrefs: %q", r.body)
	}
	r = e.get(t, "/rest/v0/vms?ndjson=true&filter=nope:x")
	if r.status != 200 || r.body != "" {
		t.Errorf("empty result: %d %q", r.status, r.body)
	}
	r = e.get(t, "/rest/v0/vms?ndjson=true&fields=*&limit=1")
	if !strings.HasSuffix(r.body, `,"href":"/rest/v0/vms/`+vmCP+`"}`+"\n") || strings.Count(r.body, "\n") != 1 {
		t.Errorf("fields=*: %q", r.body)
	}
	// ndjson is never compressed.
	r = e.get(t, "/rest/v0/vms?ndjson=true&fields=*", withToken(testToken), withHeader("Accept-Encoding", "gzip"))
	if r.header.Get("Content-Encoding") != "" {
		t.Errorf("ndjson compressed")
	}
}

func TestMarkdown(t *testing.T) {
	e := newTestEnv(t)
	r := e.get(t, "/rest/v0/pools?fields=name_label,cpus&markdown=true")
	want := "| name_label | cpus |\n| --- | --- |\n| dc1-pool-a | {\"cores\":40,\"sockets\":3} |\n| dc2-pool-b | {\"cores\":8,\"sockets\":1} |"
	if r.status != 200 || r.header.Get("Content-Type") != "text/markdown; charset=utf-8" || r.body != want {
		t.Errorf("%d %q\n%s\nwant\n%s", r.status, r.header.Get("Content-Type"), r.body, want)
	}
	if r := e.get(t, "/rest/v0/pools?markdown=true&filter=nope:x"); r.body != "No results." {
		t.Errorf("empty: %q", r.body)
	}
}

func TestGzip(t *testing.T) {
	e := newTestEnv(t)
	req, _ := http.NewRequest("GET", e.ts.URL+"/rest/v0/vms?fields=*", nil)
	req.Header.Set("Cookie", "authenticationToken="+testToken)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := e.ts.Client().Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil || !strings.Contains(string(b), vmCP) {
		t.Errorf("decompressed body: %v %.80s", err, b)
	}
	// Small bodies are not compressed.
	r := e.get(t, "/rest/v0/ping", withHeader("Accept-Encoding", "gzip"))
	if r.header.Get("Content-Encoding") != "" {
		t.Errorf("small body compressed")
	}
}

func TestSingleObject(t *testing.T) {
	e := newTestEnv(t)
	for _, tt := range []struct {
		path, id, typ string
	}{
		{"/rest/v0/vms/" + vmCP, vmCP, "VM"},
		{"/rest/v0/hosts/" + hostA1, hostA1, "host"},
		{"/rest/v0/pools/" + poolA, poolA, "pool"},
		{"/rest/v0/vms/" + vmCP + "/", vmCP, "VM"},
		{"/rest/v0/vms/" + vmCP + "?fields=id", vmCP, "VM"}, // fields is ignored
	} {
		r := e.get(t, tt.path)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", tt.path, r.status, r.body)
		}
		m, _ := r.json(t).(map[string]any)
		if m["id"] != tt.id || m["uuid"] != tt.id || m["type"] != tt.typ || m["_xapiRef"] == nil || m["$pool"] == nil {
			t.Errorf("%s: %v", tt.path, m)
		}
		if _, ok := m["href"]; ok {
			t.Errorf("%s: single object has href", tt.path)
		}
	}
	vm, _ := e.get(t, "/rest/v0/vms/"+vmCP).json(t).(map[string]any)
	want := map[string]any{"power_state": "Running", "$container": hostA1, "$poolId": poolA, "mainIpAddress": "10.0.12.11", "name_label": "k8s-cp-1"}
	for k, v := range want {
		if vm[k] != v {
			t.Errorf("VM %s = %v, want %v", k, vm[k], v)
		}
	}
	if cpus, _ := vm["CPUs"].(map[string]any); cpus["max"] != 2.0 || cpus["number"] != 2.0 {
		t.Errorf("CPUs %v", vm["CPUs"])
	}
	if mem, _ := vm["memory"].(map[string]any); mem["size"] != float64(4*GiB) {
		t.Errorf("memory %v", vm["memory"])
	}
	if addrs, _ := vm["addresses"].(map[string]any); addrs["0/ipv4/0"] != "10.0.12.11" || addrs["0/ipv6/0"] != "fd00::11" {
		t.Errorf("addresses %v", vm["addresses"])
	}
	// By OpaqueRef, as XO's lookup accepts.
	if r := e.get(t, "/rest/v0/vms/"+xapiRef(vmCP)); r.status != 200 {
		t.Errorf("by _xapiRef: %d", r.status)
	}
	// Servers.
	sid := nameUUID("xosim-server", poolB)
	if r := e.get(t, "/rest/v0/servers/"+sid); r.status != 200 || !strings.Contains(r.body, `"status": "connected"`) {
		t.Errorf("server: %d %s", r.status, r.body)
	}
}

func TestSingleObjectNotFound(t *testing.T) {
	e := newTestEnv(t)
	for _, tt := range []struct{ coll, id, typ string }{
		{"vms", "nope", "VM"},
		{"vms", hostA1, "VM"}, // a host id on /vms
		{"hosts", poolA, "host"},
		{"pools", vmCP, "pool"},
		{"hosts", "3F1C2B7E-0C4A-4D2B-9E51-6A0F2E8B1C11", "host"},
	} {
		r := e.get(t, "/rest/v0/"+tt.coll+"/"+tt.id)
		want := `{"error":"no such ` + tt.typ + ` ` + tt.id + `","data":{"id":"` + tt.id + `","type":"` + tt.typ + `"}}`
		if r.status != 404 || !jsonEqual(t, r.body, want) || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
			t.Errorf("/%s/%s: %d %s, want %s", tt.coll, tt.id, r.status, r.body, want)
		}
	}
	r := e.get(t, "/rest/v0/servers/nope")
	if r.status != 404 || !jsonEqual(t, r.body, `{"error":"no such xenServer nope","data":{"id":"nope","type":"xenServer"}}`) {
		t.Errorf("server: %d %s", r.status, r.body)
	}
}

func TestTags(t *testing.T) {
	e := newTestEnv(t)
	tag := "k8s.xenorchestra/label:tag.k8s.xenorchestra/env=prod"
	path := "/rest/v0/vms/" + vmW1 + "/tags/" + strings.ReplaceAll(urlPathEscape(tag), "/", "%2F")
	if r := e.do(t, "PUT", path); r.status != 204 || r.body != "" {
		t.Fatalf("PUT: %d %q", r.status, r.body)
	}
	if r := e.do(t, "PUT", path); r.status != 204 {
		t.Fatalf("PUT again: %d", r.status)
	}
	spec, _ := e.sim.VM(vmW1)
	if got := strings.Join(spec.Tags, ","); got != "k8s,backup=daily,"+tag {
		t.Errorf("tags after PUT: %s", got)
	}
	if r := e.do(t, "DELETE", "/rest/v0/vms/"+vmW1+"/tags/k8s"); r.status != 204 {
		t.Fatalf("DELETE: %d", r.status)
	}
	spec, _ = e.sim.VM(vmW1)
	if got := strings.Join(spec.Tags, ","); got != "backup=daily,"+tag {
		t.Errorf("tags after DELETE: %s", got)
	}
	for _, p := range []string{"/rest/v0/hosts/" + hostA1 + "/tags/x", "/rest/v0/pools/" + poolB + "/tags/x"} {
		if r := e.do(t, "PUT", p); r.status != 204 {
			t.Errorf("PUT %s: %d", p, r.status)
		}
	}
	if h, _ := e.sim.Host(hostA1); len(h.Tags) != 1 || h.Tags[0] != "x" {
		t.Errorf("host tags %v", h.Tags)
	}
	r := e.do(t, "PUT", "/rest/v0/vms/"+hostA1+"/tags/x")
	if r.status != 404 || !jsonEqual(t, r.body, `{"error":"no such VM `+hostA1+`","data":{"id":"`+hostA1+`","type":"VM"}}`) {
		t.Errorf("PUT on a host id under /vms: %d %s", r.status, r.body)
	}
	if r := e.do(t, "PUT", "/rest/v0/vms/"+vmW1+"/tags/x", withHeader("X-None", "1")); r.status != 401 {
		t.Errorf("PUT without credentials: %d", r.status)
	}
}

func TestDisconnectedPool(t *testing.T) {
	e := newTestEnv(t)
	if err := e.sim.DisconnectPool(poolB); err != nil {
		t.Fatal(err)
	}
	if r := e.get(t, "/rest/v0/vms/"+vmOther); r.status != 404 || !strings.Contains(r.body, "no such VM") {
		t.Errorf("VM of a disconnected pool: %d %s", r.status, r.body)
	}
	if r := e.get(t, "/rest/v0/pools/"+poolB); r.status != 404 {
		t.Errorf("disconnected pool: %d", r.status)
	}
	if r := e.get(t, "/rest/v0/hosts/"+hostB1); r.status != 404 {
		t.Errorf("host of a disconnected pool: %d", r.status)
	}
	if r := e.get(t, "/rest/v0/vms?filter="+enc("$pool:"+poolB)); r.body != "[]" {
		t.Errorf("listing: %s", r.body)
	}
	r := e.get(t, "/rest/v0/servers?fields=status,poolId,label&filter=label:dc2")
	if !jsonEqual(t, r.body, `[{"status":"disconnected","label":"dc2-pool-b","href":"/rest/v0/servers/`+nameUUID("xosim-server", poolB)+`"}]`) {
		t.Errorf("servers: %s", r.body)
	}
	// Changes while disconnected show after reconnection.
	if err := e.sim.SetPowerState(vmOther, "Halted"); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.ReconnectPool(poolB); err != nil {
		t.Fatal(err)
	}
	vm, _ := e.get(t, "/rest/v0/vms/"+vmOther).json(t).(map[string]any)
	if vm["power_state"] != "Halted" || vm["$container"] != poolB {
		t.Errorf("after reconnect: %v %v", vm["power_state"], vm["$container"])
	}
	if !e.sim.PoolConnected(poolB) {
		t.Error("PoolConnected false")
	}
}

func TestRequestCounters(t *testing.T) {
	e := newTestEnv(t)
	e.get(t, "/rest/v0/vms?fields=id")
	e.get(t, "/rest/v0/vms?fields=name_label&ndjson=true")
	e.get(t, "/rest/v0/vms/"+vmCP)
	if n := e.sim.RequestCount("GET", "/rest/v0/vms"); n != 2 {
		t.Errorf("GET /rest/v0/vms count %d", n)
	}
	if n := e.sim.RequestCount("GET", "/rest/v0/vms/"+vmCP); n != 1 {
		t.Errorf("single count %d", n)
	}
	if b := e.sim.BytesWritten("GET", "/rest/v0/vms"); b < 500 {
		t.Errorf("bytes %d", b)
	}
	counts := e.sim.RequestCounts()
	if counts["GET /rest/v0/vms"] != 2 || len(counts) != 2 {
		t.Errorf("RequestCounts %v", counts)
	}
	e.sim.ResetCounters()
	if n := e.sim.RequestCount("GET", "/rest/v0/vms"); n != 0 {
		t.Errorf("after reset %d", n)
	}
	if b := e.sim.BytesWritten("GET", "/rest/v0/vms"); b != 0 {
		t.Errorf("bytes after reset %d", b)
	}
}
