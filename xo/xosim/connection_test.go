package xosim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// subscribeIDs subscribes a stream to VM, host and pool changes with the id field only.
func subscribeIDs(t *testing.T, e *testEnv, s *sseStream) {
	t.Helper()
	for _, c := range []string{"VM", "host", "pool"} {
		if r := e.subscribe(t, s.id, `{"collection":"`+c+`","fields":["id"]}`); r.status != 201 {
			t.Fatalf("subscribe %s: %d", c, r.status)
		}
	}
}

// idEvent is the frame data of an event on a subscription with fields ["id"].
func idEvent(coll, id string) string {
	return `{"$subscription":"` + coll + `","id":"` + id + `"}`
}

// expectEvents checks the next events, in order.
func expectEvents(t *testing.T, s *sseStream, event string, want ...string) {
	t.Helper()
	for _, w := range want {
		if f := s.nextEvent(t, time.Second); f.event != event || f.data != w {
			t.Errorf("got %s %s, want %s %s", f.event, f.data, event, w)
		}
	}
}

// serverEntry returns the /servers entry of a pool of the test inventory.
func (e *testEnv) serverEntry(t *testing.T, poolID string) map[string]any {
	t.Helper()
	r := e.get(t, "/rest/v0/servers/"+nameUUID("xosim-server", poolID))
	m, _ := r.json(t).(map[string]any)
	if r.status != 200 || m == nil {
		t.Fatalf("server entry of %s: %d %s", poolID, r.status, r.body)
	}
	return m
}

// checkStatus checks what GET answers for each path.
func (e *testEnv) checkStatus(t *testing.T, want map[string]int) {
	t.Helper()
	for path, status := range want {
		if r := e.get(t, path); r.status != status {
			t.Errorf("GET %s: %d, want %d (%s)", path, r.status, status, r.body)
		}
	}
}

func TestStagedReconnect(t *testing.T) {
	e := newTestEnv(t)
	s := openStream(t, e)
	subscribeIDs(t, e, s)
	if err := e.sim.DisconnectPool(poolA); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, s, "remove", idEvent("VM", vmCP), idEvent("VM", vmW1), idEvent("VM", vmW2), idEvent("VM", vmHalt),
		idEvent("host", hostA1), idEvent("host", hostA2), idEvent("pool", poolA))
	// Changes while disconnected show once revealed.
	if err := e.sim.SetPowerState(vmW1, "Halted"); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.Rename(poolA, "renamed-while-away"); err != nil {
		t.Fatal(err)
	}

	// Step 1: the server is connected, nothing is loaded.
	if err := e.sim.BeginReconnect(poolA); err != nil {
		t.Fatal(err)
	}
	srv := e.serverEntry(t, poolA)
	if srv["status"] != "connected" || srv["poolId"] != poolA || srv["enabled"] != true {
		t.Errorf("server entry while loading: %v", srv)
	}
	if !e.sim.PoolConnected(poolA) {
		t.Error("PoolConnected false after BeginReconnect")
	}
	r := e.get(t, "/rest/v0/pools/"+poolA)
	if r.status != 404 || !jsonEqual(t, r.body, `{"error":"no such pool `+poolA+`","data":{"id":"`+poolA+`","type":"pool"}}`) {
		t.Errorf("pool while loading: %d %s", r.status, r.body)
	}
	e.checkStatus(t, map[string]int{"/rest/v0/hosts/" + hostA1: 404, "/rest/v0/vms/" + vmCP: 404, "/rest/v0/pools/" + poolB: 200})
	if r := e.get(t, "/rest/v0/pools?fields=id"); !jsonEqual(t, r.body, `[{"id":"`+poolB+`","href":"/rest/v0/pools/`+poolB+`"}]`) {
		t.Errorf("pools while loading: %s", r.body)
	}
	if r := e.get(t, "/rest/v0/hosts?filter="+enc("$pool:"+poolA)); r.body != "[]" {
		t.Errorf("hosts while loading: %s", r.body)
	}
	s.none(t, 50*time.Millisecond)

	// Step 2: the pool and its hosts.
	if err := e.sim.RevealPool(poolA); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, s, "add", idEvent("pool", poolA), idEvent("host", hostA1), idEvent("host", hostA2))
	if r := e.get(t, "/rest/v0/pools/"+poolA); r.status != 200 || !strings.Contains(r.body, "renamed-while-away") {
		t.Errorf("pool after RevealPool: %d %s", r.status, r.body)
	}
	e.checkStatus(t, map[string]int{"/rest/v0/hosts/" + hostA2: 200, "/rest/v0/vms/" + vmCP: 404})
	if r := e.get(t, "/rest/v0/vms?filter="+enc("$pool:"+poolA)); r.body != "[]" {
		t.Errorf("VMs after RevealPool: %s", r.body)
	}
	s.none(t, 50*time.Millisecond)

	// A VM created while the pool loads comes after the others.
	late, err := e.sim.AddVM(VMSpec{ID: "0b8f3a52-6d1e-4c7a-9e2b-5f4d3c2b1a09", PoolID: poolA, HostID: hostA2})
	if err != nil {
		t.Fatal(err)
	}
	s.none(t, 50*time.Millisecond)

	// Step 3: the VMs, in a stable order.
	if n, err := e.sim.RevealVMs(poolA, 2); n != 2 || err != nil {
		t.Fatalf("RevealVMs(2) = %d, %v", n, err)
	}
	expectEvents(t, s, "add", idEvent("VM", vmCP), idEvent("VM", vmW1))
	vm, _ := e.get(t, "/rest/v0/vms/"+vmW1).json(t).(map[string]any)
	if vm["power_state"] != "Halted" {
		t.Errorf("VM changed while disconnected: %v", vm["power_state"])
	}
	e.checkStatus(t, map[string]int{"/rest/v0/vms/" + vmW2: 404, "/rest/v0/vms/" + late: 404})
	if r := e.get(t, "/rest/v0/vms?fields=id&filter="+enc("$pool:"+poolA)); strings.Count(r.body, `"id"`) != 2 {
		t.Errorf("VMs after RevealVMs(2): %s", r.body)
	}
	if n, err := e.sim.RevealVMs(poolA, 10); n != 3 || err != nil {
		t.Fatalf("RevealVMs(10) = %d, %v", n, err)
	}
	expectEvents(t, s, "add", idEvent("VM", vmW2), idEvent("VM", vmHalt), idEvent("VM", late))

	// Fully loaded: a new VM shows at once and RevealVMs has nothing left.
	if n, err := e.sim.RevealVMs(poolA, 1); n != 0 || err != nil {
		t.Errorf("RevealVMs on a loaded pool = %d, %v", n, err)
	}
	newer, err := e.sim.AddVM(VMSpec{PoolID: poolA})
	if err != nil {
		t.Fatal(err)
	}
	expectEvents(t, s, "add", idEvent("VM", newer))
}

func TestStagedReconnectErrors(t *testing.T) {
	e := newTestEnv(t)
	s := e.sim
	if err := s.BeginReconnect(poolA); err == nil {
		t.Error("BeginReconnect on a connected pool: no error")
	}
	if err := s.RevealPool(poolA); err == nil {
		t.Error("RevealPool on a loaded pool: no error")
	}
	if err := s.DisconnectPool(poolA); err != nil {
		t.Fatal(err)
	}
	if err := s.RevealPool(poolA); err == nil {
		t.Error("RevealPool before BeginReconnect: no error")
	}
	if _, err := s.RevealVMs(poolA, 1); err == nil {
		t.Error("RevealVMs on a disconnected pool: no error")
	}
	if _, err := s.RevealVMs(poolB, 0); err == nil {
		t.Error("RevealVMs(0): no error")
	}
	for name, err := range map[string]error{
		"BeginReconnect":   s.BeginReconnect("nope"),
		"RevealPool":       s.RevealPool("nope"),
		"BeginDisconnect":  s.BeginDisconnect("nope"),
		"FinishDisconnect": s.FinishDisconnect("nope"),
		"SetServerEnabled": s.SetServerEnabled("nope", false),
		"ReconnectPool":    s.ReconnectPool("nope"),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s of an unknown pool: %v", name, err)
		}
	}
	if _, err := s.RevealVMs("nope", 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("RevealVMs of an unknown pool: %v", err)
	}
	// ReconnectPool finishes a staged reconnection.
	if err := s.BeginReconnect(poolA); err != nil {
		t.Fatal(err)
	}
	if err := s.ReconnectPool(poolA); err != nil {
		t.Fatal(err)
	}
	e.checkStatus(t, map[string]int{"/rest/v0/pools/" + poolA: 200, "/rest/v0/vms/" + vmHalt: 200})
}

func TestReconnectInStages(t *testing.T) {
	e := newTestEnv(t)
	s := openStream(t, e)
	subscribeIDs(t, e, s)
	if err := e.sim.DisconnectPool(poolA); err != nil {
		t.Fatal(err)
	}
	for range 7 {
		s.nextEvent(t, time.Second)
	}
	const interval = 20 * time.Millisecond
	start := time.Now()
	if err := e.sim.ReconnectInStages(context.Background(), poolA, interval); err != nil {
		t.Fatal(err)
	}
	// One interval before the pool, one before each of the four VMs.
	if d := time.Since(start); d < 5*interval {
		t.Errorf("ReconnectInStages took %v, want at least %v", d, 5*interval)
	}
	expectEvents(t, s, "add", idEvent("pool", poolA), idEvent("host", hostA1), idEvent("host", hostA2),
		idEvent("VM", vmCP), idEvent("VM", vmW1), idEvent("VM", vmW2), idEvent("VM", vmHalt))
	e.checkStatus(t, map[string]int{"/rest/v0/vms/" + vmHalt: 200})

	// Cancelled midway, the pool stays partly loaded.
	if err := e.sim.DisconnectPool(poolA); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := e.sim.ReconnectInStages(ctx, poolA, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled ReconnectInStages: %v", err)
	}
	if srv := e.serverEntry(t, poolA); srv["status"] != "connected" {
		t.Errorf("server after a cancelled reconnection: %v", srv)
	}
	e.checkStatus(t, map[string]int{"/rest/v0/pools/" + poolA: 404})
}

func TestStagedDisconnect(t *testing.T) {
	e := newTestEnv(t)
	s := openStream(t, e)
	subscribeIDs(t, e, s)
	if err := e.sim.BeginDisconnect(poolA); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, s, "remove", idEvent("VM", vmCP), idEvent("VM", vmW1), idEvent("VM", vmW2), idEvent("VM", vmHalt))
	s.none(t, 50*time.Millisecond)
	// The window: VMs gone, the pool, its hosts and its server still connected.
	e.checkStatus(t, map[string]int{"/rest/v0/vms/" + vmCP: 404, "/rest/v0/pools/" + poolA: 200, "/rest/v0/hosts/" + hostA1: 200})
	if srv := e.serverEntry(t, poolA); srv["status"] != "connected" || srv["poolId"] != poolA {
		t.Errorf("server entry between the steps: %v", srv)
	}
	if err := e.sim.FinishDisconnect(poolA); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, s, "remove", idEvent("host", hostA1), idEvent("host", hostA2), idEvent("pool", poolA))
	srv := e.serverEntry(t, poolA)
	if _, ok := srv["poolId"]; srv["status"] != "disconnected" || ok {
		t.Errorf("server entry after FinishDisconnect: %v", srv)
	}
	e.checkStatus(t, map[string]int{"/rest/v0/pools/" + poolA: 404, "/rest/v0/hosts/" + hostA1: 404})
	if e.sim.PoolConnected(poolA) {
		t.Error("PoolConnected true after FinishDisconnect")
	}
	// Disconnecting again changes nothing.
	if err := e.sim.DisconnectPool(poolA); err != nil {
		t.Fatal(err)
	}
	s.none(t, 50*time.Millisecond)
}

func TestServerEnabled(t *testing.T) {
	e := newTestEnv(t)
	s := openStream(t, e)
	subscribeIDs(t, e, s)
	if err := e.sim.SetServerEnabled(poolB, false); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, s, "remove", idEvent("VM", vmOther), idEvent("host", hostB1), idEvent("pool", poolB))
	srv := e.serverEntry(t, poolB)
	if _, ok := srv["poolId"]; srv["enabled"] != false || srv["status"] != "disconnected" || ok {
		t.Errorf("disabled server entry: %v", srv)
	}
	e.checkStatus(t, map[string]int{"/rest/v0/vms/" + vmOther: 404, "/rest/v0/pools/" + poolB: 404})
	// XO's filter matches booleans with "enabled?" (a string never matches a boolean).
	if r := e.get(t, "/rest/v0/servers?fields=label&filter="+enc("!enabled?")); !strings.Contains(r.body, "dc2-pool-b") || strings.Contains(r.body, "dc1-pool-a") {
		t.Errorf("filter !enabled?: %s", r.body)
	}
	if err := e.sim.ReconnectPool(poolB); err == nil {
		t.Error("ReconnectPool of a disabled server: no error")
	}
	if err := e.sim.BeginReconnect(poolB); err == nil {
		t.Error("BeginReconnect of a disabled server: no error")
	}
	if p, _ := e.sim.Pool(poolB); !p.ServerDisabled || !p.Disconnected {
		t.Errorf("Pool: %+v", p)
	}
	if err := e.sim.SetServerEnabled(poolB, true); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, s, "add", idEvent("pool", poolB), idEvent("host", hostB1), idEvent("VM", vmOther))
	srv = e.serverEntry(t, poolB)
	if srv["enabled"] != true || srv["status"] != "connected" || srv["poolId"] != poolB {
		t.Errorf("re-enabled server entry: %v", srv)
	}

	// A server entry disabled from the start, from a spec and from an inventory file.
	pool, err := e.sim.AddPool(PoolSpec{NameLabel: "off", ServerDisabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.AddHost(HostSpec{PoolID: pool}); err != nil {
		t.Fatal(err)
	}
	s.none(t, 50*time.Millisecond)
	if srv := e.serverEntry(t, pool); srv["enabled"] != false || srv["status"] != "disconnected" {
		t.Errorf("server added disabled: %v", srv)
	}
	e.checkStatus(t, map[string]int{"/rest/v0/pools/" + pool: 404})
	sim := New(Options{})
	if err := sim.LoadInventory([]byte(`{"pools":[{"name":"off","server":{"disabled":true},"hosts":[{"name":"h"}]}]}`)); err != nil {
		t.Fatal(err)
	}
	if p, _ := sim.Pool(nameUUID("xosim-pool", "off")); !p.ServerDisabled || sim.PoolConnected(p.ID) {
		t.Errorf("inventory pool with a disabled server: %+v", p)
	}
}

func TestSamePoolInTwoSimulators(t *testing.T) {
	clock := func(o *Options) { o.Now = func() time.Time { return time.Unix(1767225600, 0) } }
	a, b := newTestEnv(t, clock), newTestEnv(t, clock)
	paths := []string{
		"/rest/v0/vms?fields=*", "/rest/v0/hosts?fields=*", "/rest/v0/pools?fields=*", "/rest/v0/servers?fields=*",
		"/rest/v0/vms/" + vmW2, "/rest/v0/hosts/" + hostA1, "/rest/v0/pools/" + poolB,
	}
	for _, p := range paths {
		ra, rb := a.get(t, p), b.get(t, p)
		if ra.status != 200 || ra.body != rb.body {
			t.Errorf("GET %s differs between the simulators (%d, %d)", p, ra.status, rb.status)
		}
	}
	// The same holds for simulators loading one inventory file.
	inv := []byte(`{"pools":[{"name":"shared","hosts":[{"name":"h1","address":"192.0.2.1"}],
		"vms":[{"name":"v1","ips":["10.0.0.1"]},{"name":"v2","powerState":"Halted"}]}]}`)
	var bodies [2]string
	for i := range bodies {
		sim := New(Options{Tokens: []string{testToken}, Now: func() time.Time { return time.Unix(1767225600, 0) }})
		if err := sim.LoadInventory(inv); err != nil {
			t.Fatal(err)
		}
		ts := newHTTPTestServer(sim)
		e := &testEnv{sim: sim, ts: ts}
		bodies[i] = e.get(t, "/rest/v0/vms?fields=*").body + e.get(t, "/rest/v0/hosts?fields=*").body + e.get(t, "/rest/v0/pools?fields=*").body
		ts.Close()
	}
	if bodies[0] != bodies[1] || strings.Count(bodies[0], `"href"`) != 4 {
		t.Errorf("simulators loading the same inventory differ:\n%s\n%s", bodies[0], bodies[1])
	}
}
