package xosim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// Scale of the benchmark inventory: the controller's target of 100,000 VMs.
const (
	scalePools        = 20
	scaleHostsPerPool = 10
	scaleVMsPerPool   = 5000
)

// scalePath is the controller's inventory listing.
const scalePath = "/rest/v0/vms?fields=id,name_label,power_state,$pool,$container,CPUs,memory,tags,addresses,mainIpAddress&ndjson=true"

// newScaleSim builds 20 pools of 10 hosts and 5,000 VMs each.
func newScaleSim(tb testing.TB) (*Server, []string) {
	tb.Helper()
	sim := New(Options{Tokens: []string{testToken}})
	pools := make([]string, scalePools)
	for p := range scalePools {
		pool, err := sim.AddPool(PoolSpec{ID: nameUUID("scale-pool", fmt.Sprint(p)), NameLabel: fmt.Sprintf("pool-%02d", p)})
		if err != nil {
			tb.Fatal(err)
		}
		pools[p] = pool
		hosts := make([]string, scaleHostsPerPool)
		for h := range scaleHostsPerPool {
			if hosts[h], err = sim.AddHost(HostSpec{ID: nameUUID("scale-host", fmt.Sprint(p, "/", h)), PoolID: pool,
				Address: fmt.Sprintf("10.%d.0.%d", p, h+1)}); err != nil {
				tb.Fatal(err)
			}
		}
		specs := make([]VMSpec, scaleVMsPerPool)
		for i := range specs {
			specs[i] = VMSpec{ID: nameUUID("scale-vm", fmt.Sprint(p, "/", i)), PoolID: pool, HostID: hosts[i%len(hosts)],
				NameLabel: fmt.Sprintf("vm-%02d-%04d", p, i), CPUs: 2, Memory: 4 * GiB,
				Tags: []string{"k8s", "env=prod"}, IPs: []string{fmt.Sprintf("10.%d.%d.%d", 100+p, i>>8, i&255)}}
		}
		if _, err := sim.AddVMs(specs); err != nil {
			tb.Fatal(err)
		}
	}
	return sim, pools
}

// getLines fetches path and counts the bytes and lines of the body.
func getLines(tb testing.TB, client *http.Client, url string) (lines, bytes int) {
	tb.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Cookie", "authenticationToken="+testToken)
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != 200 {
		tb.Fatalf("GET %s: status %d", url, resp.StatusCode)
	}
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		bytes += len(line)
		if err == io.EOF {
			break
		}
		if err != nil && err != bufio.ErrBufferFull {
			tb.Fatal(err)
		}
		if err == nil {
			lines++
		}
	}
	return lines, bytes
}

// BenchmarkList100kVMs lists 100,000 VMs (20 pools, 200 hosts) with the controller's fields as
// ndjson: whole with the entries cached from the previous listing (warm), whole with every
// entry built anew (cold: the fields alternate between two orders, and an object caches the
// entry of one fields parameter only), and filtered to two pools.
func BenchmarkList100kVMs(b *testing.B) {
	sim, pools := newScaleSim(b)
	ts := newHTTPTestServer(sim)
	defer ts.Close()
	reordered := "/rest/v0/vms?fields=name_label,id,power_state,$pool,$container,CPUs,memory,tags,addresses,mainIpAddress&ndjson=true"
	twoPools := "&filter=" + urlQueryEscape("$pool:|("+pools[3]+" "+pools[17]+")")
	for _, bc := range []struct {
		name  string
		paths []string
		want  int
	}{
		{"warm", []string{scalePath}, scalePools * scaleVMsPerPool},
		{"cold", []string{scalePath, reordered}, scalePools * scaleVMsPerPool},
		{"2pools", []string{scalePath + twoPools}, 2 * scaleVMsPerPool},
	} {
		b.Run(bc.name, func(b *testing.B) {
			size, i := 0, 0
			for b.Loop() {
				lines, n := getLines(b, ts.Client(), ts.URL+bc.paths[i%len(bc.paths)])
				if lines != bc.want {
					b.Fatalf("%d lines, want %d", lines, bc.want)
				}
				size, i = n, i+1
			}
			b.ReportMetric(float64(size), "resp-bytes")
		})
	}
}

func TestPickerDirectMatchesPick(t *testing.T) {
	e := newTestEnv(t)
	lists := []string{
		"id,name_label,power_state,$pool,$container,CPUs,memory,tags,addresses,mainIpAddress",
		"name_label,nope,,os_version,boot",
		"residentVms,enabled",
	}
	for _, list := range lists {
		fields := parseFields(list)
		direct := newPicker(fields)
		if !direct.direct {
			t.Fatalf("fields %q do not take the direct path", list)
		}
		viaPick := &picker{fields: fields}
		for _, id := range []string{vmCP, vmW2, vmHalt, hostA1, poolB} {
			obj := e.sim.st.lookup(collVM, id)
			if obj == nil {
				obj = e.sim.st.lookup(collHost, id)
			}
			if obj == nil {
				obj = e.sim.st.lookup(collPool, id)
			}
			got := string(direct.appendEntry(nil, obj.data, "/x/"+id))
			want := string(viaPick.appendEntry(nil, obj.data, "/x/"+id))
			if got != want {
				t.Errorf("fields %q, object %s:\n direct %s\n pick   %s", list, id, got, want)
			}
		}
	}
	for _, list := range []string{"CPUs.number", "id,id", "id,href", "memory[size]"} {
		if newPicker(parseFields(list)).direct {
			t.Errorf("fields %q take the direct path", list)
		}
	}
}

func TestListFilterTwoPools(t *testing.T) {
	sim := New(Options{Tokens: []string{testToken}})
	var pools []string
	want := map[string][]string{}
	for p := range 3 {
		pool, err := sim.AddPool(PoolSpec{NameLabel: fmt.Sprint("p", p)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sim.AddHost(HostSpec{PoolID: pool}); err != nil {
			t.Fatal(err)
		}
		specs := make([]VMSpec, 50)
		for i := range specs {
			specs[i] = VMSpec{PoolID: pool}
		}
		ids, err := sim.AddVMs(specs)
		if err != nil {
			t.Fatal(err)
		}
		pools = append(pools, pool)
		want[pool] = ids
	}
	ts := newHTTPTestServer(sim)
	defer ts.Close()
	e := &testEnv{sim: sim, ts: ts}
	r := e.get(t, scalePath+"&filter="+enc("$pool:|("+pools[2]+" "+pools[0]+")"))
	if r.status != 200 || r.header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("status %d, content type %q", r.status, r.header.Get("Content-Type"))
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSuffix(r.body, "\n"), "\n") {
		var vm struct {
			ID   string `json:"id"`
			Pool string `json:"$pool"`
		}
		if err := json.Unmarshal([]byte(line), &vm); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if vm.Pool != pools[0] && vm.Pool != pools[2] {
			t.Errorf("VM %s of pool %s listed", vm.ID, vm.Pool)
		}
		got = append(got, vm.ID)
	}
	// XO lists in insertion order, whatever the order in the filter.
	if wantIDs := append(slices.Clone(want[pools[0]]), want[pools[2]]...); !slices.Equal(got, wantIDs) {
		t.Errorf("listed %d VMs, want the %d of pools 0 and 2 in order", len(got), len(wantIDs))
	}
}
