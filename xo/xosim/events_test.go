package xosim

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

type sseFrame struct {
	event string
	data  string
}

// sseStream reads an event stream in the background.
type sseStream struct {
	id     string
	resp   *http.Response
	frames chan sseFrame
	done   chan error
}

func openStream(t *testing.T, e *testEnv) *sseStream {
	t.Helper()
	req, _ := http.NewRequest("GET", e.ts.URL+"/rest/v0/events", nil)
	req.Header.Set("Cookie", "authenticationToken="+testToken)
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache, no-transform"} {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s %q, want %q", k, got, v)
		}
	}
	s := &sseStream{resp: resp, frames: make(chan sseFrame, 1000), done: make(chan error, 1)}
	go func() {
		r := bufio.NewReader(resp.Body)
		var f sseFrame
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				s.done <- err
				close(s.frames)
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case strings.HasPrefix(line, "event: "):
				f.event = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				f.data = line[len("data: "):]
			case line == "":
				s.frames <- f
				f = sseFrame{}
			default:
				s.frames <- sseFrame{event: "BAD LINE", data: line}
			}
		}
	}()
	init := s.next(t, time.Second)
	if init.event != "init" {
		t.Fatalf("first frame %+v", init)
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(init.data), &m); err != nil || !isUUID(m["id"]) || len(m) != 1 {
		t.Fatalf("init data %q", init.data)
	}
	s.id = m["id"]
	return s
}

func (s *sseStream) next(t *testing.T, timeout time.Duration) sseFrame {
	t.Helper()
	select {
	case f, ok := <-s.frames:
		if !ok {
			t.Fatalf("stream ended: %v", <-s.done)
		}
		return f
	case <-time.After(timeout):
		t.Fatalf("no frame within %v", timeout)
	}
	return sseFrame{}
}

// nextEvent skips pings.
func (s *sseStream) nextEvent(t *testing.T, timeout time.Duration) sseFrame {
	t.Helper()
	for {
		if f := s.next(t, timeout); f.event != "ping" {
			return f
		}
	}
}

// none checks that no event but pings arrives within d.
func (s *sseStream) none(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				return
			}
			if f.event != "ping" {
				t.Fatalf("unexpected frame %+v", f)
			}
		case <-deadline:
			return
		}
	}
}

func (e *testEnv) subscribe(t *testing.T, connID, body string) response {
	t.Helper()
	return e.do(t, "POST", "/rest/v0/events/"+connID+"/subscriptions", withToken(testToken), withBody("application/json", body))
}

func TestEventStream(t *testing.T) {
	e := newTestEnv(t)
	s := openStream(t, e)
	r := e.subscribe(t, s.id, `{"collection":"VM","fields":["id","power_state","$container"]}`)
	if r.status != 201 || !jsonEqual(t, r.body, `{"id":"VM"}`) {
		t.Fatalf("subscribe: %d %s", r.status, r.body)
	}
	if got := e.sim.EventSubscriptions()[s.id]; len(got) != 1 || got[0] != "VM" {
		t.Errorf("EventSubscriptions %v", got)
	}
	if e.sim.EventStreams() != 1 {
		t.Errorf("EventStreams %d", e.sim.EventStreams())
	}

	// A change of a picked field is an update with the picked fields.
	if err := e.sim.SetPowerState(vmW1, "Halted"); err != nil {
		t.Fatal(err)
	}
	f := s.nextEvent(t, time.Second)
	want := `{"$subscription":"VM","id":"` + vmW1 + `","power_state":"Halted","$container":"` + poolA + `"}`
	if f.event != "update" || f.data != want {
		t.Errorf("got %+v\nwant update %s", f, want)
	}
	// A change of other fields only is not sent.
	if err := e.sim.Rename(vmW1, "renamed"); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.AddTag(vmW1, "x"); err != nil {
		t.Fatal(err)
	}
	// Host changes are not subscribed.
	if err := e.sim.Rename(hostA1, "renamed-host"); err != nil {
		t.Fatal(err)
	}
	s.none(t, 100*time.Millisecond)

	// Migration.
	if err := e.sim.Migrate(vmCP, hostA2); err != nil {
		t.Fatal(err)
	}
	f = s.nextEvent(t, time.Second)
	if f.event != "update" || !strings.Contains(f.data, `"$container":"`+hostA2+`"`) {
		t.Errorf("migrate: %+v", f)
	}

	// Add and remove.
	id, err := e.sim.AddVM(VMSpec{PoolID: poolB, NameLabel: "new"})
	if err != nil {
		t.Fatal(err)
	}
	f = s.nextEvent(t, time.Second)
	if want := `{"$subscription":"VM","id":"` + id + `","power_state":"Running","$container":"` + hostB1 + `"}`; f.event != "add" || f.data != want {
		t.Errorf("add: %+v, want %s", f, want)
	}
	if err := e.sim.RemoveVM(id); err != nil {
		t.Fatal(err)
	}
	f = s.nextEvent(t, time.Second)
	if want := `{"$subscription":"VM","id":"` + id + `","power_state":"Running","$container":"` + hostB1 + `"}`; f.event != "remove" || f.data != want {
		t.Errorf("remove: %+v, want %s", f, want)
	}

	// Unsubscribe: nothing more.
	if r := e.do(t, "DELETE", "/rest/v0/events/"+s.id+"/subscriptions/VM"); r.status != 204 {
		t.Fatalf("unsubscribe: %d %s", r.status, r.body)
	}
	if err := e.sim.SetPowerState(vmW1, "Running"); err != nil {
		t.Fatal(err)
	}
	s.none(t, 100*time.Millisecond)
}

func TestEventStreamAllFields(t *testing.T) {
	e := newTestEnv(t)
	s := openStream(t, e)
	for _, body := range []string{`{"collection":"host"}`, `{"collection":"pool","fields":"*"}`} {
		if r := e.subscribe(t, s.id, body); r.status != 201 {
			t.Fatalf("subscribe %s: %d %s", body, r.status, r.body)
		}
	}
	// Starting a VM changes its host's residentVms: a host update with the whole object.
	if err := e.sim.SetPowerState(vmHalt, "Running"); err != nil {
		t.Fatal(err)
	}
	f := s.nextEvent(t, time.Second)
	var m map[string]any
	if err := json.Unmarshal([]byte(f.data), &m); err != nil {
		t.Fatal(err)
	}
	if f.event != "update" || m["$subscription"] != "host" || m["id"] != hostA1 || m["type"] != "host" || !strings.HasPrefix(f.data, `{"$subscription":"host",`) {
		t.Fatalf("host update: %+v", f)
	}
	if rv, _ := m["residentVms"].([]any); len(rv) != 4 { // dom0 + 3 VMs
		t.Errorf("residentVms %v", m["residentVms"])
	}
	if err := e.sim.Rename(poolB, "renamed"); err != nil {
		t.Fatal(err)
	}
	f = s.nextEvent(t, time.Second)
	if f.event != "update" || !strings.Contains(f.data, `"name_label":"renamed"`) || !strings.Contains(f.data, `"$subscription":"pool"`) {
		t.Errorf("pool update: %+v", f)
	}
}

func TestEventStreamPoolDisconnect(t *testing.T) {
	e := newTestEnv(t)
	s := openStream(t, e)
	for _, c := range []string{"VM", "host", "pool"} {
		if r := e.subscribe(t, s.id, `{"collection":"`+c+`","fields":["id"]}`); r.status != 201 {
			t.Fatalf("subscribe %s: %d", c, r.status)
		}
	}
	if err := e.sim.DisconnectPool(poolB); err != nil {
		t.Fatal(err)
	}
	wantRemoved := []string{
		`{"$subscription":"VM","id":"` + vmOther + `"}`,
		`{"$subscription":"host","id":"` + hostB1 + `"}`,
		`{"$subscription":"pool","id":"` + poolB + `"}`,
	}
	for _, w := range wantRemoved {
		if f := s.nextEvent(t, time.Second); f.event != "remove" || f.data != w {
			t.Errorf("got %+v, want remove %s", f, w)
		}
	}
	// Changes in a disconnected pool are invisible.
	if err := e.sim.SetPowerState(vmOther, "Halted"); err != nil {
		t.Fatal(err)
	}
	s.none(t, 100*time.Millisecond)
	if err := e.sim.ReconnectPool(poolB); err != nil {
		t.Fatal(err)
	}
	// On reconnection the pool and its hosts come back before the VMs.
	for _, w := range []string{wantRemoved[2], wantRemoved[1], wantRemoved[0]} {
		if f := s.nextEvent(t, time.Second); f.event != "add" || f.data != w {
			t.Errorf("got %+v, want add %s", f, w)
		}
	}
}

func TestEventPing(t *testing.T) {
	e := newTestEnv(t, func(o *Options) { o.PingInterval = 30 * time.Millisecond })
	s := openStream(t, e)
	for range 2 {
		f := s.next(t, time.Second)
		var m map[string]float64
		if err := json.Unmarshal([]byte(f.data), &m); f.event != "ping" || err != nil || m["ping"] < 1.6e12 || len(m) != 1 {
			t.Fatalf("ping frame %+v", f)
		}
	}
}

func TestEventSubscriptionErrors(t *testing.T) {
	e := newTestEnv(t)
	s := openStream(t, e)
	tests := []struct {
		name   string
		conn   string
		ctype  string
		body   string
		status int
		want   string
	}{
		{"unknown connection", "0d8b28c6-e9bf-4c9d-a382-3c9e0d7cfbff", "application/json", `{"collection":"VM"}`, 404,
			`{"error":"no such event 0d8b28c6-e9bf-4c9d-a382-3c9e0d7cfbff","data":{"id":"0d8b28c6-e9bf-4c9d-a382-3c9e0d7cfbff","type":"event"}}`},
		{"unknown collection", s.id, "application/json", `{"collection":"vm"}`, 422,
			`{"error":{"body.collection":{"message":"Value does not match any allowed schema","value":"vm"}},"data":{}}`},
		{"missing collection", s.id, "application/json", `{}`, 422, `{"error":{"body.collection":{"message":"'collection' is required"}},"data":{}}`},
		{"empty body", s.id, "application/json", ``, 422, `{"error":{"body":{"message":"'body' is required"}},"data":{}}`},
		{"not JSON content", s.id, "text/plain", `{"collection":"VM"}`, 422, `{"error":{"body":{"message":"'body' is required"}},"data":{}}`},
		{"fields not a list", s.id, "application/json", `{"collection":"VM","fields":"id"}`, 422,
			`{"error":{"body.fields":{"message":"Value does not match any allowed schema","value":"id"}},"data":{}}`},
		{"fields with a number", s.id, "application/json", `{"collection":"VM","fields":["id",1]}`, 422,
			`{"error":{"body.fields":{"message":"Value does not match any allowed schema","value":["id",1]}},"data":{}}`},
		{"excess property", s.id, "application/json", `{"collection":"VM","filter":"x"}`, 422,
			`{"error":{"body":{"message":"\"filter\" is an excess property and therefore is not allowed","value":{"filter":"x"}}},"data":{}}`},
		{"array body", s.id, "application/json", `[]`, 422, `{"error":{"body":{"message":"invalid object","value":[]}},"data":{}}`},
		{"invalid JSON", s.id, "application/json", `{"collection":`, 500, ""},
		{"validation before lookup", "nope", "application/json", `{"collection":"nope"}`, 422, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(t, "POST", "/rest/v0/events/"+tt.conn+"/subscriptions", withToken(testToken), withBody(tt.ctype, tt.body))
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if tt.want != "" && !jsonEqual(t, r.body, tt.want) {
				t.Errorf("body %s\nwant %s", r.body, tt.want)
			}
		})
	}
	// A collection without simulated objects is accepted and silent.
	if r := e.subscribe(t, s.id, `{"collection":"SR","fields":[]}`); r.status != 201 || !jsonEqual(t, r.body, `{"id":"SR"}`) {
		t.Errorf("SR: %d %s", r.status, r.body)
	}
	if r := e.do(t, "DELETE", "/rest/v0/events/"+s.id+"/subscriptions/nope"); r.status != 422 {
		t.Errorf("DELETE bad collection: %d %s", r.status, r.body)
	}
	if r := e.do(t, "DELETE", "/rest/v0/events/nope/subscriptions/VM"); r.status != 404 || !strings.Contains(r.body, "no such event nope") {
		t.Errorf("DELETE unknown connection: %d %s", r.status, r.body)
	}
	if r := e.do(t, "DELETE", "/rest/v0/events/"+s.id+"/subscriptions/VM"); r.status != 204 {
		t.Errorf("DELETE a collection not subscribed: %d", r.status)
	}
	if r := e.do(t, "POST", "/rest/v0/events/"+s.id+"/subscriptions", withBody("application/json", `{"collection":"VM"}`)); r.status != 401 {
		t.Errorf("subscribe without credentials: %d", r.status)
	}
}

func TestEventStreamEnds(t *testing.T) {
	e := newTestEnv(t)
	s := openStream(t, e)
	e.sim.CloseEventStreams()
	select {
	case err := <-s.done:
		t.Logf("stream ended: %v", err)
	case <-time.After(time.Second):
		t.Fatal("stream still open after CloseEventStreams")
	}
	// A closed connection's id is unknown.
	deadline := time.Now().Add(time.Second)
	for e.sim.EventStreams() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if r := e.subscribe(t, s.id, `{"collection":"VM"}`); r.status != 404 {
		t.Errorf("subscribe on a closed stream: %d", r.status)
	}
}

func TestEventSlowConsumerCut(t *testing.T) {
	e := newTestEnv(t, func(o *Options) { o.MaxEventBuffer = 4096 })
	s := openStream(t, e)
	if r := e.subscribe(t, s.id, `{"collection":"VM"}`); r.status != 201 {
		t.Fatal(r.status)
	}
	e.sim.InjectFault(Fault{Kind: FaultStall, PathPrefix: "/rest/v0/events"})
	for i := range 20 {
		if err := e.sim.Rename(vmCP, "name-"+string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-s.done:
		t.Logf("stream ended: %v", err)
	case <-time.After(2 * time.Second):
		t.Fatal("stalled stream over its buffer was not cut")
	}
}
