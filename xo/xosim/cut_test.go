package xosim

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// TestCutEventStreams: a cut stream delivers the frames queued before the last, half of the
// last, and ends without finishing the response; the client sees an unterminated message, not
// a clean end of stream. A stream opened afterwards works.
func TestCutEventStreams(t *testing.T) {
	e := newTestEnv(t)
	s := openStream(t, e)
	if r := e.subscribe(t, s.id, `{"collection":"VM","fields":["id","power_state"]}`); r.status != 201 {
		t.Fatalf("subscribe: %d %s", r.status, r.body)
	}
	// Two events queued while the stream is stalled, then the cut.
	stall := e.sim.InjectFault(Fault{Kind: FaultStall, PathPrefix: "/rest/v0/events"})
	if err := e.sim.SetPowerState(vmW1, "Halted"); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.SetPowerState(vmW2, "Halted"); err != nil {
		t.Fatal(err)
	}
	if n := e.sim.CutEventStreams(); n != 1 {
		t.Fatalf("CutEventStreams marked %d streams, want 1", n)
	}
	e.sim.RemoveFault(stall)
	f := s.nextEvent(t, time.Second)
	if f.event != "update" || f.data != `{"$subscription":"VM","id":"`+vmW1+`","power_state":"Halted"}` {
		t.Fatalf("first frame %+v, want the update of %s", f, vmW1)
	}
	for f := range s.frames {
		if f.event == "update" {
			t.Fatalf("the cut frame was delivered whole: %+v", f)
		}
	}
	// The chunked body ends without its last chunk: not a clean end of stream.
	if err := <-s.done; !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("stream end: %v, want an unexpected EOF", err)
	}
	// With nothing queued, the cut falls in a ping.
	s2 := openStream(t, e)
	e.sim.CutEventStreams()
	for f := range s2.frames {
		t.Fatalf("a frame from a stream cut with nothing queued: %+v", f)
	}
	if err := <-s2.done; !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("stream cut in a ping: end %v, want an unexpected EOF", err)
	}
	for deadline := time.Now().Add(time.Second); e.sim.EventStreams() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d event streams still open after the cut", e.sim.EventStreams())
		}
	}
	s3 := openStream(t, e)
	if r := e.subscribe(t, s3.id, `{"collection":"VM","fields":["id","power_state"]}`); r.status != 201 {
		t.Fatalf("subscribe after the cut: %d %s", r.status, r.body)
	}
	if err := e.sim.SetPowerState(vmW1, "Running"); err != nil {
		t.Fatal(err)
	}
	if f := s3.nextEvent(t, time.Second); f.event != "update" {
		t.Fatalf("after the cut: %+v", f)
	}
}

// TestRemoveServer: removing a pool's /servers entry disconnects the pool (its objects go, VMs
// first) and drops the entry from /servers; adding it back makes a new entry, connected, and
// brings the objects back.
func TestRemoveServer(t *testing.T) {
	e := newTestEnv(t)
	s := openStream(t, e)
	subscribeIDs(t, e, s)
	oldID := nameUUID("xosim-server", poolB)
	if err := e.sim.RemoveServer(poolB); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, s, "remove", idEvent("VM", vmOther), idEvent("host", hostB1), idEvent("pool", poolB))
	e.checkStatus(t, map[string]int{"/rest/v0/vms/" + vmOther: 404, "/rest/v0/pools/" + poolB: 404, "/rest/v0/servers/" + oldID: 404})
	if r := e.get(t, "/rest/v0/servers?fields=poolNameLabel"); r.status != 200 || strings.Contains(r.body, "dc2-pool-b") || !strings.Contains(r.body, "dc1-pool-a") {
		t.Errorf("servers after the removal: %d %s", r.status, r.body)
	}
	if err := e.sim.RemoveServer(poolB); err != nil {
		t.Errorf("RemoveServer twice: %v", err)
	}
	for name, err := range map[string]error{
		"ReconnectPool":    e.sim.ReconnectPool(poolB),
		"BeginReconnect":   e.sim.BeginReconnect(poolB),
		"SetServerEnabled": e.sim.SetServerEnabled(poolB, true),
	} {
		if err == nil {
			t.Errorf("%s of a removed server entry: no error", name)
		}
	}
	// Changes while XO does not hold the pool show when it is back.
	if err := e.sim.Rename(vmOther, "renamed-away"); err != nil {
		t.Fatal(err)
	}
	newID, err := e.sim.AddServer(poolB)
	if err != nil {
		t.Fatal(err)
	}
	if newID == oldID || !isUUID(newID) {
		t.Errorf("new server entry id %q (old %q)", newID, oldID)
	}
	expectEvents(t, s, "add", idEvent("pool", poolB), idEvent("host", hostB1), idEvent("VM", vmOther))
	r := e.get(t, "/rest/v0/servers/"+newID)
	m, _ := r.json(t).(map[string]any)
	if r.status != 200 || m["status"] != "connected" || m["enabled"] != true || m["poolId"] != poolB {
		t.Errorf("new server entry: %d %s", r.status, r.body)
	}
	if r := e.get(t, "/rest/v0/vms/"+vmOther); r.status != 200 || !strings.Contains(r.body, "renamed-away") {
		t.Errorf("VM after AddServer: %d %s", r.status, r.body)
	}
	if _, err := e.sim.AddServer(poolB); err == nil {
		t.Error("AddServer of an existing entry: no error")
	}
}
