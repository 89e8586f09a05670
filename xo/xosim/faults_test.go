package xosim

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawGet returns the response and the error met while reading its body.
func (e *testEnv) rawGet(t *testing.T, path string) (*http.Response, string, error) {
	t.Helper()
	req, _ := http.NewRequest("GET", e.ts.URL+path, nil)
	req.Header.Set("Cookie", "authenticationToken="+testToken)
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

func TestFaultStatus(t *testing.T) {
	tests := []struct {
		fault  Fault
		status int
		want   string
		auth   bool
	}{
		{Fault{Kind: FaultStatus, Status: 500}, 500, `{"error":"internal server error"}`, false},
		{Fault{Kind: FaultStatus, Status: 503, Message: "service unavailable"}, 503, `{"error":"service unavailable"}`, false},
		{Fault{Kind: FaultStatus, Status: 429}, 429, `{"error":"too many requests"}`, false},
		{Fault{Kind: FaultStatus, Status: 401}, 401, bodyInvalidCredentials, true},
		{Fault{Kind: FaultUnauthorized}, 401, bodyInvalidCredentials, true},
	}
	for _, tt := range tests {
		e := newTestEnv(t)
		tt.fault.PathPrefix = "/rest/v0/vms"
		e.sim.InjectFault(tt.fault)
		r := e.get(t, "/rest/v0/vms?fields=id")
		if r.status != tt.status || !jsonEqual(t, r.body, tt.want) {
			t.Errorf("%+v: %d %s", tt.fault, r.status, r.body)
		}
		if tt.auth && r.header.Get("WWW-Authenticate") != `Basic realm="xo"` {
			t.Errorf("%+v: no WWW-Authenticate", tt.fault)
		}
		// Other paths are not affected.
		if r := e.get(t, "/rest/v0/hosts"); r.status != 200 {
			t.Errorf("%+v: /hosts %d", tt.fault, r.status)
		}
	}
}

func TestFaultCountDurationMethod(t *testing.T) {
	e := newTestEnv(t)
	e.sim.InjectFault(Fault{Kind: FaultStatus, Status: 502, PathPrefix: "/rest/v0/pools", Count: 2})
	for i, want := range []int{502, 502, 200, 200} {
		if r := e.get(t, "/rest/v0/pools"); r.status != want {
			t.Errorf("request %d: %d, want %d", i, r.status, want)
		}
	}
	e.sim.InjectFault(Fault{Kind: FaultStatus, Status: 503, PathPrefix: "/rest/v0/hosts", Duration: 50 * time.Millisecond})
	if r := e.get(t, "/rest/v0/hosts"); r.status != 503 {
		t.Errorf("within duration: %d", r.status)
	}
	time.Sleep(80 * time.Millisecond)
	if r := e.get(t, "/rest/v0/hosts"); r.status != 200 {
		t.Errorf("after duration: %d", r.status)
	}
	id := e.sim.InjectFault(Fault{Kind: FaultStatus, Status: 500, Method: "PUT", PathPrefix: "/rest/v0/vms/"})
	if r := e.get(t, "/rest/v0/vms/"+vmCP); r.status != 200 {
		t.Errorf("GET with a PUT fault: %d", r.status)
	}
	if r := e.do(t, "PUT", "/rest/v0/vms/"+vmCP+"/tags/x"); r.status != 500 {
		t.Errorf("PUT: %d", r.status)
	}
	e.sim.RemoveFault(id)
	if r := e.do(t, "PUT", "/rest/v0/vms/"+vmCP+"/tags/x"); r.status != 204 {
		t.Errorf("PUT after RemoveFault: %d", r.status)
	}
	e.sim.InjectFault(Fault{Kind: FaultReset})
	e.sim.ClearFaults()
	if r := e.get(t, "/rest/v0/vms"); r.status != 200 {
		t.Errorf("after ClearFaults: %d", r.status)
	}
	// Faulted requests are counted.
	if n := e.sim.RequestCount("GET", "/rest/v0/pools"); n != 4 {
		t.Errorf("count %d", n)
	}
}

func TestFaultLatency(t *testing.T) {
	e := newTestEnv(t)
	e.sim.InjectFault(Fault{Kind: FaultLatency, Latency: 100 * time.Millisecond, PathPrefix: "/rest/v0/vms", Count: 1})
	start := time.Now()
	if r := e.get(t, "/rest/v0/vms"); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("took %v, want at least 100ms", d)
	}
	start = time.Now()
	e.get(t, "/rest/v0/vms")
	if d := time.Since(start); d > 90*time.Millisecond {
		t.Errorf("second request took %v after the count was used", d)
	}
}

func TestFaultReset(t *testing.T) {
	e := newTestEnv(t)
	e.sim.InjectFault(Fault{Kind: FaultReset, PathPrefix: "/rest/v0/vms", Count: 1})
	if _, _, err := e.rawGet(t, "/rest/v0/vms"); err == nil {
		t.Fatal("no error on a reset connection")
	}
	if _, _, err := e.rawGet(t, "/rest/v0/vms"); err != nil {
		t.Fatalf("next request: %v", err)
	}
}

func TestFaultTruncateNDJSON(t *testing.T) {
	e := newTestEnv(t)
	e.sim.InjectFault(Fault{Kind: FaultTruncate, PathPrefix: "/rest/v0/vms", Lines: 2, Count: 1})
	resp, body, err := e.rawGet(t, "/rest/v0/vms?fields=id,name_label&ndjson=true")
	if err == nil {
		t.Fatal("no error reading a truncated stream")
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("read error %v, want an unexpected EOF", err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Errorf("status %d type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := strings.Split(body, "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[2], `{"id":"`) || strings.HasSuffix(lines[2], "}") {
		t.Errorf("want 2 lines and half a line, got %q", body)
	}
	// More lines than the result: all lines, then the connection drops.
	e.sim.InjectFault(Fault{Kind: FaultTruncate, PathPrefix: "/rest/v0/hosts", Lines: 100, Count: 1})
	_, body, err = e.rawGet(t, "/rest/v0/hosts?ndjson=true")
	if err == nil || strings.Count(body, "\n") != 3 {
		t.Errorf("err %v body %q", err, body)
	}
	// A JSON body is cut in the middle.
	e.sim.InjectFault(Fault{Kind: FaultTruncate, PathPrefix: "/rest/v0/pools", Count: 1})
	_, body, err = e.rawGet(t, "/rest/v0/pools")
	if err == nil || !strings.HasPrefix(body, "[") || strings.HasSuffix(body, "]") {
		t.Errorf("JSON: err %v body %q", err, body)
	}
	if _, _, err := e.rawGet(t, "/rest/v0/pools"); err != nil {
		t.Errorf("after the count: %v", err)
	}
}

func TestFaultTrickle(t *testing.T) {
	e := newTestEnv(t)
	e.sim.InjectFault(Fault{Kind: FaultTrickle, PathPrefix: "/rest/v0/pools", Latency: 5 * time.Millisecond, Count: 1})
	start := time.Now()
	resp, body, err := e.rawGet(t, "/rest/v0/pools?fields=id&ndjson=true")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %v err %v", resp, err)
	}
	// One byte every 5 ms: the body takes len(body) × 5 ms.
	if d, want := time.Since(start), time.Duration(len(body))*5*time.Millisecond; d < want*9/10 {
		t.Errorf("%d bytes in %v, want at least %v", len(body), d, want)
	}
	start = time.Now()
	if _, _, err := e.rawGet(t, "/rest/v0/pools?fields=id&ndjson=true"); err != nil || time.Since(start) > 200*time.Millisecond {
		t.Errorf("after the count: %v in %v", err, time.Since(start))
	}
}

func TestFaultRepeat(t *testing.T) {
	e := newTestEnv(t)
	e.sim.InjectFault(Fault{Kind: FaultRepeat, PathPrefix: "/rest/v0/vms", Count: 1})
	_, body, err := e.rawGet(t, "/rest/v0/vms?fields=id,name_label&ndjson=true")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	if len(lines) < 2 || len(lines)%2 != 0 {
		t.Fatalf("want every line twice, got %q", body)
	}
	for i := 0; i < len(lines); i += 2 {
		var a, b map[string]string
		if json.Unmarshal([]byte(lines[i]), &a) != nil || json.Unmarshal([]byte(lines[i+1]), &b) != nil ||
			a["id"] != b["id"] || a["name_label"] == "duplicate" || b["name_label"] != "duplicate" {
			t.Fatalf("lines %d and %d: %q %q", i, i+1, lines[i], lines[i+1])
		}
	}
}

func TestFaultStall(t *testing.T) {
	e := newTestEnv(t, func(o *Options) { o.PingInterval = 20 * time.Millisecond })
	s := openStream(t, e)
	if r := e.subscribe(t, s.id, `{"collection":"VM","fields":["id","name_label"]}`); r.status != 201 {
		t.Fatal(r.status)
	}
	s.next(t, time.Second) // a ping
	id := e.sim.InjectFault(Fault{Kind: FaultStall, PathPrefix: "/rest/v0/events"})
	// Let frames already in flight arrive, then expect silence: not even pings.
	time.Sleep(50 * time.Millisecond)
	for len(s.frames) > 0 {
		<-s.frames
	}
	if err := e.sim.Rename(vmCP, "stalled"); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-s.frames:
		t.Fatalf("frame while stalled: %+v", f)
	case <-time.After(150 * time.Millisecond):
	}
	// A new stream opened during the stall gets no headers.
	req, _ := http.NewRequest("GET", e.ts.URL+"/rest/v0/events", nil)
	req.Header.Set("Cookie", "authenticationToken="+testToken)
	client := &http.Client{Timeout: 100 * time.Millisecond}
	if resp, err := client.Do(req); err == nil {
		_ = resp.Body.Close()
		t.Errorf("stream opened during a stall answered %d", resp.StatusCode)
	}
	e.sim.RemoveFault(id)
	// The queued update is delivered once the stall ends.
	f := s.nextEvent(t, time.Second)
	if f.event != "update" || !strings.Contains(f.data, `"name_label":"stalled"`) {
		t.Errorf("after the stall: %+v", f)
	}
	if f := s.next(t, time.Second); f.event != "ping" {
		t.Errorf("pings after the stall: %+v", f)
	}
}

func TestFaultStallExpires(t *testing.T) {
	e := newTestEnv(t, func(o *Options) { o.PingInterval = 10 * time.Millisecond })
	e.sim.InjectFault(Fault{Kind: FaultStall, Duration: 100 * time.Millisecond})
	start := time.Now()
	req, _ := http.NewRequest("GET", e.ts.URL+"/rest/v0/events", nil)
	req.Header.Set("Cookie", "authenticationToken="+testToken)
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "event: init\n" {
		t.Fatalf("first line %q %v", line, err)
	}
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Errorf("stream answered after %v, during the stall", d)
	}
}
