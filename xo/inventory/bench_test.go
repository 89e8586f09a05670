package inventory

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

// benchSource lists n VMs over 4 pools.
func benchSource(n int) *fakeSource {
	src := &fakeSource{}
	for p := range 4 {
		pool := fmt.Sprintf("00000000-0000-4000-8000-%012d", p)
		src.pools = append(src.pools, xo.Pool{ID: pool, NameLabel: fmt.Sprintf("pool-%d", p)})
		src.servers = append(src.servers, xo.Server{ID: fmt.Sprintf("s%d", p), PoolID: pool, Status: xo.ServerConnected})
		for h := range 8 {
			src.hosts = append(src.hosts, xo.Host{ID: fmt.Sprintf("10000000-0000-4000-8000-%06d%06d", p, h), PoolID: pool})
		}
	}
	for i := range n {
		p := i % 4
		src.vms = append(src.vms, xo.VM{
			ID: fmt.Sprintf("3f1c2b7e-0c4a-4d2b-9e51-%012d", i), NameLabel: fmt.Sprintf("vm-%d", i),
			PowerState: xo.PowerStateRunning, PoolID: src.pools[p].ID, Container: src.hosts[p*8+i%8].ID,
			MainIPAddress: fmt.Sprintf("10.%d.%d.%d", p, i/250, i%250+1),
			Addresses:     xo.AddressesOf(map[string]string{"0/ipv4/0": fmt.Sprintf("10.%d.%d.%d", p, i/250, i%250+1)}),
		})
	}
	return src
}

// BenchmarkLookup reads the inventory by each index with 10,000 VMs, from parallel readers,
// while another goroutine relists (building and swapping whole snapshots) and applies events
// as fast as it can.
func BenchmarkLookup(b *testing.B) {
	const n = 10000
	src := benchSource(n)
	// A settle time of 1 ns: the second listing makes the pools trusted (PoolConnected).
	inv := New(src, Options{Log: logr.Discard(), SettleTime: time.Nanosecond})
	for range 2 {
		if err := inv.Relist(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	lookups := map[string]func(s *Snapshot, i int) bool{
		"id":      func(s *Snapshot, i int) bool { return s.VM(src.vms[i%n].ID) != nil },
		"name":    func(s *Snapshot, i int) bool { return len(s.VMsByName(src.vms[i%n].NameLabel)) == 1 },
		"address": func(s *Snapshot, i int) bool { return len(s.VMsByAddress(src.vms[i%n].MainIPAddress)) == 1 },
		"host":    func(s *Snapshot, i int) bool { return s.Host(src.vms[i%n].Container) != nil },
		"pool":    func(s *Snapshot, i int) bool { return s.PoolConnected(src.vms[i%n].PoolID) },
	}
	for _, name := range []string{"id", "name", "address", "host", "pool"} {
		lookup := lookups[name]
		b.Run(name, func(b *testing.B) {
			var stop atomic.Bool
			var swaps atomic.Int64
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; !stop.Load(); i++ {
					if i%10 == 0 {
						if err := inv.Relist(context.Background()); err != nil {
							panic(err)
						}
					} else {
						vm := src.vms[i%n]
						vm.PowerState = []string{xo.PowerStateRunning, xo.PowerStatePaused}[i%2]
						inv.apply(xo.Event{Type: xo.EventUpdate, Collection: xo.CollectionVM, VM: &vm})
					}
					swaps.Add(1)
				}
			}()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if !lookup(inv.Snapshot(), i*7919) {
						panic("lookup missed")
					}
					i++
				}
			})
			b.StopTimer()
			stop.Store(true)
			<-done
			b.ReportMetric(float64(swaps.Load())/b.Elapsed().Seconds(), "swaps/s")
		})
	}
}

// BenchmarkRelist builds a whole 10,000-VM snapshot from a listing (decode excluded).
func BenchmarkRelist(b *testing.B) {
	inv := New(benchSource(10000), Options{Log: logr.Discard()})
	b.ReportAllocs()
	for b.Loop() {
		if err := inv.Relist(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyEvent applies one VM event to a 10,000-VM snapshot (copy on write).
func BenchmarkApplyEvent(b *testing.B) {
	src := benchSource(10000)
	inv := New(src, Options{Log: logr.Discard()})
	if err := inv.Relist(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	start := time.Now()
	i := 0
	for b.Loop() {
		vm := src.vms[i%len(src.vms)]
		vm.Container = src.hosts[i%len(src.hosts)].ID
		inv.apply(xo.Event{Type: xo.EventUpdate, Collection: xo.CollectionVM, VM: &vm})
		i++
	}
	_ = start
}
