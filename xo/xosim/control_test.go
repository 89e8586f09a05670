package xosim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSwapUUID(t *testing.T) {
	tests := []struct{ in, want string }{
		{"e865e63f-3d30-4f0b-83e0-5b1a2c3d4e5f", "3fe665e8-303d-0b4f-83e0-5b1a2c3d4e5f"},
		{"00112233-4455-6677-8899-aabbccddeeff", "33221100-5544-7766-8899-aabbccddeeff"},
		{"00112233-4455-6677-8899-AABBCCDDEEFF", "33221100-5544-7766-8899-aabbccddeeff"},
		{"not-a-uuid", "not-a-uuid"},
	}
	for _, tt := range tests {
		if got := SwapUUID(tt.in); got != tt.want {
			t.Errorf("SwapUUID(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if isUUID(tt.in) && SwapUUID(SwapUUID(tt.in)) != strings.ToLower(tt.in) {
			t.Errorf("SwapUUID is not an involution on %q", tt.in)
		}
	}
}

func TestGuestSystemUUID(t *testing.T) {
	e := newTestEnv(t)
	for _, tt := range []struct{ vm, want string }{
		{vmCP, vmCP},
		{vmW2, "3fe665e8-303d-0b4f-83e0-5b1a2c3d4e5f"},
	} {
		if got, ok := e.sim.GuestSystemUUID(tt.vm); !ok || got != tt.want {
			t.Errorf("GuestSystemUUID(%s) = %q, %v; want %q", tt.vm, got, ok, tt.want)
		}
	}
	if got := (VMSpec{ID: vmCP, VirtualizationMode: "pvh"}).GuestSystemUUID(); got != "" {
		t.Errorf("PVH guest: %q", got)
	}
	if _, ok := e.sim.GuestSystemUUID("nope"); ok {
		t.Error("unknown VM found")
	}
}

func TestSpecDefaults(t *testing.T) {
	sim := New(Options{})
	pool, err := sim.AddPool(PoolSpec{NameLabel: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.AddVM(VMSpec{PoolID: pool}); err == nil {
		t.Error("running VM in a pool without hosts accepted")
	}
	host, err := sim.AddHost(HostSpec{PoolID: pool})
	if err != nil {
		t.Fatal(err)
	}
	vm, err := sim.AddVM(VMSpec{PoolID: pool})
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := sim.VM(vm)
	if spec.HostID != host || spec.PowerState != "Running" || spec.CPUs != 1 || spec.CPUsMax != 1 || spec.Memory != GiB || spec.Firmware != "bios" || spec.Tags == nil {
		t.Errorf("VM defaults: %+v", spec)
	}
	obj, _ := sim.Object(vm)
	if obj["$container"] != host || obj["name_label"] != "vm-"+vm[:8] || obj["os_version"] != nil {
		t.Errorf("object: %v", obj)
	}
	if _, ok := obj["mainIpAddress"]; ok {
		t.Error("mainIpAddress present without addresses")
	}
	p, _ := sim.Pool(pool)
	if p.MasterID != host || p.ServerID == "" {
		t.Errorf("pool: %+v", p)
	}
	h, _ := sim.Host(host)
	if h.PowerState != "Running" || h.Cores != 8 || h.Sockets != 1 || h.MemorySize != 64*GiB || h.Hostname != h.NameLabel {
		t.Errorf("host defaults: %+v", h)
	}
	if pools, hosts, vms := sim.Counts(); pools != 1 || hosts != 1 || vms != 1 {
		t.Errorf("Counts %d %d %d", pools, hosts, vms)
	}
}

func TestControlErrors(t *testing.T) {
	e := newTestEnv(t)
	s := e.sim
	tests := []struct {
		name     string
		err      error
		notFound bool
	}{
		{"pool bad id", func() error { _, err := s.AddPool(PoolSpec{ID: "x"}); return err }(), false},
		{"pool duplicate", func() error { _, err := s.AddPool(PoolSpec{ID: poolA}); return err }(), false},
		{"pool id used by a VM", func() error { _, err := s.AddPool(PoolSpec{ID: vmCP}); return err }(), false},
		{"host unknown pool", func() error { _, err := s.AddHost(HostSpec{PoolID: vmCP}); return err }(), true},
		{"host bad state", func() error { _, err := s.AddHost(HostSpec{PoolID: poolA, PowerState: "On"}); return err }(), false},
		{"host bad address", func() error { _, err := s.AddHost(HostSpec{PoolID: poolA, Address: "x"}); return err }(), false},
		{"VM bad state", func() error { _, err := s.AddVM(VMSpec{PoolID: poolA, PowerState: "running"}); return err }(), false},
		{"VM host in another pool", func() error { _, err := s.AddVM(VMSpec{PoolID: poolA, HostID: hostB1}); return err }(), false},
		{"VM unknown host", func() error { _, err := s.AddVM(VMSpec{PoolID: poolA, HostID: vmCP}); return err }(), true},
		{"VM duplicate", func() error { _, err := s.AddVM(VMSpec{ID: vmCP, PoolID: poolA}); return err }(), false},
		{"VM max below number", func() error { _, err := s.AddVM(VMSpec{PoolID: poolA, CPUs: 4, CPUsMax: 2}); return err }(), false},
		{"VM bad IP", func() error { _, err := s.AddVM(VMSpec{PoolID: poolA, IPs: []string{"10.0.0.300"}}); return err }(), false},
		{"VM bad firmware", func() error { _, err := s.AddVM(VMSpec{PoolID: poolA, Firmware: "efi"}); return err }(), false},
		{"VM empty tag", func() error { _, err := s.AddVM(VMSpec{PoolID: poolA, Tags: []string{""}}); return err }(), false},
		{"VMs given twice", func() error {
			_, err := s.AddVMs([]VMSpec{{ID: "11111111-1111-4111-8111-111111111111", PoolID: poolA}, {ID: "11111111-1111-4111-8111-111111111111", PoolID: poolA}})
			return err
		}(), false},
		{"power state", s.SetPowerState(vmCP, "On"), false},
		{"power state unknown VM", s.SetPowerState("nope", "Halted"), true},
		{"migrate unknown host", s.Migrate(vmCP, "nope"), true},
		{"migrate unknown VM", s.Migrate("nope", hostA1), true},
		{"rename unknown", s.Rename("nope", "x"), true},
		{"resize negative", s.Resize(vmCP, -1, 0), false},
		{"resize unknown", s.Resize("nope", 1, 0), true},
		{"tags unknown", s.SetTags("nope", nil), true},
		{"empty tag", s.AddTag(vmCP, ""), false},
		{"remove tag unknown", s.RemoveTag("nope", "x"), true},
		{"remove busy host", s.RemoveHost(hostA1), false},
		{"remove unknown VM", s.RemoveVM("nope"), true},
		{"disconnect unknown", s.DisconnectPool("nope"), true},
		{"update pool bad master", s.UpdatePool(poolA, func(p *PoolSpec) { p.MasterID = hostB1 }), false},
		{"update unknown host", s.UpdateHost("nope", func(*HostSpec) {}), true},
	}
	for _, tt := range tests {
		if tt.err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		if errors.Is(tt.err, ErrNotFound) != tt.notFound {
			t.Errorf("%s: %v; errors.Is(ErrNotFound) = %v", tt.name, tt.err, !tt.notFound)
		}
	}
	// Nothing changed.
	if pools, hosts, vms := s.Counts(); pools != 2 || hosts != 3 || vms != 5 {
		t.Errorf("Counts after errors: %d %d %d", pools, hosts, vms)
	}
}

func TestPowerStateAndResize(t *testing.T) {
	e := newTestEnv(t)
	s := e.sim
	if err := s.SetPowerState(vmW1, "Suspended"); err != nil {
		t.Fatal(err)
	}
	obj, _ := s.Object(vmW1)
	if obj["$container"] != poolA || len(obj["addresses"].(map[string]any)) != 0 || obj["startTime"] != nil {
		t.Errorf("suspended: %v %v %v", obj["$container"], obj["addresses"], obj["startTime"])
	}
	if _, ok := obj["mainIpAddress"]; ok {
		t.Error("suspended VM has mainIpAddress")
	}
	if err := s.SetPowerState(vmW1, "Paused"); err != nil {
		t.Fatal(err)
	}
	obj, _ = s.Object(vmW1)
	if obj["$container"] != hostA1 || obj["mainIpAddress"] != "10.0.12.21" {
		t.Errorf("paused: %v %v", obj["$container"], obj["mainIpAddress"])
	}
	// A halted VM without a host starts on the pool master.
	if err := s.SetPowerState(vmHalt, "Running"); err != nil {
		t.Fatal(err)
	}
	obj, _ = s.Object(vmHalt)
	if obj["$container"] != hostA1 || obj["mainIpAddress"] != "10.0.12.99" {
		t.Errorf("started: %v %v", obj["$container"], obj["mainIpAddress"])
	}
	host, _ := s.Object(hostA1)
	if rv := fmt.Sprint(host["residentVms"]); !strings.Contains(rv, vmHalt) || !strings.Contains(rv, vmW1) {
		t.Errorf("residentVms %v", rv)
	}
	if err := s.Resize(vmW1, 6, 12*GiB); err != nil {
		t.Fatal(err)
	}
	obj, _ = s.Object(vmW1)
	cpus := obj["CPUs"].(map[string]any)
	mem := obj["memory"].(map[string]any)
	if cpus["max"] != 6.0 || cpus["number"] != 6.0 || mem["size"] != float64(12*GiB) || fmt.Sprint(mem["static"]) != fmt.Sprint([]any{float64(8 * GiB), float64(12 * GiB)}) {
		t.Errorf("resized: %v %v", cpus, mem)
	}
	if err := s.SetAddresses(vmW1, map[string]string{"1/ipv6/0": "fd00::5", "1/ipv4/3": "10.9.9.9"}); err != nil {
		t.Fatal(err)
	}
	obj, _ = s.Object(vmW1)
	if obj["mainIpAddress"] != "10.9.9.9" {
		t.Errorf("mainIpAddress %v", obj["mainIpAddress"])
	}
	// Cross-pool migration keeps the id and changes $pool.
	if err := s.Migrate(vmW1, hostB1); err != nil {
		t.Fatal(err)
	}
	obj, _ = s.Object(vmW1)
	if obj["$pool"] != poolB || obj["$container"] != hostB1 || obj["id"] != vmW1 {
		t.Errorf("migrated: %v %v", obj["$pool"], obj["$container"])
	}
}

func TestMainIPAddress(t *testing.T) {
	tests := []struct {
		addrs map[string]string
		want  string
	}{
		{map[string]string{}, ""},
		{map[string]string{"0/ipv6/0": "fd00::1", "1/ipv4/0": "10.0.0.2"}, "10.0.0.2"},
		{map[string]string{"1/ipv4/0": "10.0.0.2", "0/ipv4/1": "10.0.0.1"}, "10.0.0.1"},
		{map[string]string{"0/ip": "10.0.0.3", "0/ipv6/0": "fd00::1"}, "10.0.0.3"},
		{map[string]string{"0/ipv6/1": "fd00::2", "0/ipv6/0": "fd00::1"}, "fd00::1"},
		{map[string]string{"x/ipv4/0": "10.0.0.4"}, ""},
	}
	for _, tt := range tests {
		if got := mainIPAddress(tt.addrs); got != tt.want {
			t.Errorf("mainIPAddress(%v) = %q, want %q", tt.addrs, got, tt.want)
		}
	}
}

func TestRemovals(t *testing.T) {
	e := newTestEnv(t)
	s := e.sim
	if err := s.SetPowerState(vmW2, "Halted"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveHost(hostA2); err != nil {
		t.Fatal(err)
	}
	if spec, _ := s.VM(vmW2); spec.HostID != "" {
		t.Errorf("halted VM still refers to the removed host: %s", spec.HostID)
	}
	if err := s.UpdatePool(poolA, func(p *PoolSpec) { p.MasterID = hostA1; p.NameLabel = "renamed" }); err != nil {
		t.Fatal(err)
	}
	if r := e.get(t, "/rest/v0/pools/"+poolA); !strings.Contains(r.body, `"name_label": "renamed"`) {
		t.Errorf("pool after update: %s", r.body)
	}
	if err := s.RemovePool(poolA); err != nil {
		t.Fatal(err)
	}
	if pools, hosts, vms := s.Counts(); pools != 1 || hosts != 1 || vms != 1 {
		t.Errorf("Counts after RemovePool: %d %d %d", pools, hosts, vms)
	}
	if r := e.get(t, "/rest/v0/servers"); strings.Count(r.body, "/rest/v0/servers/") != 1 {
		t.Errorf("servers after RemovePool: %s", r.body)
	}
}

func TestConcurrentUse(t *testing.T) {
	e := newTestEnv(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			state := "Running"
			if i%2 == 0 {
				state = "Halted"
			}
			if err := e.sim.SetPowerState(vmW1, state); err != nil {
				t.Errorf("SetPowerState: %v", err)
				return
			}
			if err := e.sim.AddTag(vmCP, fmt.Sprint("t", i%5)); err != nil {
				t.Errorf("AddTag: %v", err)
				return
			}
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; i < 50 && time.Now().Before(deadline); i++ {
		if r := e.get(t, "/rest/v0/vms?fields=*&filter=k8s"); r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
	}
	<-done
	vm, ok := e.sim.VM(vmCP)
	if !ok {
		t.Fatal("VM gone")
	}
	for i := range 5 {
		if !slices.Contains(vm.Tags, fmt.Sprint("t", i)) {
			t.Errorf("tag t%d missing after the concurrent writes: %v", i, vm.Tags)
		}
	}
}

// BenchmarkListVMsNDJSON lists 10,000 VMs as the inventory does.
func BenchmarkListVMsNDJSON(b *testing.B) {
	sim := New(Options{Tokens: []string{testToken}})
	pool, _ := sim.AddPool(PoolSpec{})
	host, _ := sim.AddHost(HostSpec{PoolID: pool})
	specs := make([]VMSpec, 10000)
	for i := range specs {
		specs[i] = VMSpec{PoolID: pool, HostID: host, NameLabel: fmt.Sprintf("vm-%05d", i), CPUs: 2, Memory: 4 * GiB,
			Tags: []string{"k8s", "env=prod"}, IPs: []string{fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)}}
	}
	if _, err := sim.AddVMs(specs); err != nil {
		b.Fatal(err)
	}
	e := &testEnv{sim: sim}
	e.ts = newHTTPTestServer(sim)
	defer e.ts.Close()
	path := "/rest/v0/vms?ndjson=true&fields=id,name_label,power_state,$pool,$container,CPUs,memory,tags,addresses,mainIpAddress"
	b.ReportAllocs()
	for b.Loop() {
		if r := e.get(b, path); r.status != 200 || strings.Count(r.body, "\n") != 10000 {
			b.Fatalf("status %d", r.status)
		}
	}
}

func BenchmarkAddVMs(b *testing.B) {
	for b.Loop() {
		sim := New(Options{})
		pool, _ := sim.AddPool(PoolSpec{})
		_, _ = sim.AddHost(HostSpec{PoolID: pool})
		specs := make([]VMSpec, 10000)
		for i := range specs {
			specs[i] = VMSpec{PoolID: pool}
		}
		if _, err := sim.AddVMs(specs); err != nil {
			b.Fatal(err)
		}
	}
}

func TestNoSecretsInOutput(t *testing.T) {
	opts := Options{Tokens: []string{"secret-token"}, BasicAuth: map[string]string{"u": "secret-password"}}
	sim := New(opts)
	for _, out := range []string{
		fmt.Sprint(opts), fmt.Sprintf("%+v", opts), fmt.Sprintf("%#v", opts),
		fmt.Sprint(sim), fmt.Sprintf("%+v", sim), fmt.Sprintf("%#v", sim),
	} {
		if strings.Contains(out, "secret") {
			t.Errorf("secret printed: %s", out)
		}
	}
}

func TestReaddedObjectListedOnce(t *testing.T) {
	e := newTestEnv(t)
	if err := e.sim.RemoveVM(vmCP); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.AddVM(VMSpec{ID: vmCP, PoolID: poolA, HostID: hostA2}); err != nil {
		t.Fatal(err)
	}
	// Listed once, last, as XO's index lists a key deleted and set again.
	r := e.get(t, "/rest/v0/vms?fields=id&filter="+enc("$pool:"+poolA))
	want := `[{"id":"` + vmW1 + `","href":"/rest/v0/vms/` + vmW1 + `"},{"id":"` + vmW2 + `","href":"/rest/v0/vms/` + vmW2 + `"},` +
		`{"id":"` + vmHalt + `","href":"/rest/v0/vms/` + vmHalt + `"},{"id":"` + vmCP + `","href":"/rest/v0/vms/` + vmCP + `"}]`
	if !jsonEqual(t, r.body, want) {
		t.Errorf("listing after remove and add: %s", r.body)
	}
}
