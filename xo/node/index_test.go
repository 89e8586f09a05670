package node

import (
	"net"
	"strings"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

// testIndex is a map-backed Index for tests and benchmarks.
type testIndex struct {
	vms        map[string]*xo.VM
	byName     map[string][]*xo.VM
	byAddress  map[string][]*xo.VM
	hosts      map[string]*xo.Host
	pools      map[string]*xo.Pool
	connected  map[string]bool
	incomplete bool
	removed    map[string]bool
	regions    map[string]string
}

var _ Index = (*testIndex)(nil)

func newTestIndex(vms ...*xo.VM) *testIndex {
	idx := &testIndex{
		vms:       map[string]*xo.VM{},
		byName:    map[string][]*xo.VM{},
		byAddress: map[string][]*xo.VM{},
		hosts:     map[string]*xo.Host{},
		pools:     map[string]*xo.Pool{},
		connected: map[string]bool{},
	}
	for _, vm := range vms {
		idx.addVM(vm)
	}
	return idx
}

func (x *testIndex) addVM(vm *xo.VM) {
	x.vms[strings.ToLower(vm.ID)] = vm
	x.byName[vm.NameLabel] = append(x.byName[vm.NameLabel], vm)
	seen := map[string]bool{}
	addrs := []string{vm.MainIPAddress}
	for _, a := range vm.Addresses {
		addrs = append(addrs, a.IP)
	}
	for _, a := range addrs {
		ip := net.ParseIP(a)
		if ip == nil || seen[ip.String()] {
			continue
		}
		seen[ip.String()] = true
		x.byAddress[ip.String()] = append(x.byAddress[ip.String()], vm)
	}
	x.connected[vm.PoolID] = true
}

func (x *testIndex) VM(id string) *xo.VM              { return x.vms[id] }
func (x *testIndex) VMsByName(name string) []*xo.VM   { return x.byName[name] }
func (x *testIndex) VMsByAddress(ip string) []*xo.VM  { return x.byAddress[ip] }
func (x *testIndex) Host(id string) *xo.Host          { return x.hosts[strings.ToLower(id)] }
func (x *testIndex) Pool(id string) *xo.Pool          { return x.pools[strings.ToLower(id)] }
func (x *testIndex) PoolConnected(poolID string) bool { return x.connected[poolID] }
func (x *testIndex) Complete() bool                   { return !x.incomplete }
func (x *testIndex) RemovedRecently(key string) bool  { return x.removed[key] }
func (x *testIndex) Region(poolID string) string      { return x.regions[poolID] }

func (x *testIndex) HostNameShared(name, id string) bool {
	for hid, h := range x.hosts {
		if h.NameLabel == name && hid != id {
			return true
		}
	}
	return false
}

func (x *testIndex) PoolNameShared(name, id string) bool {
	for pid, p := range x.pools {
		if p.NameLabel == name && pid != id {
			return true
		}
	}
	return false
}

// desiredFor is Desired for a VM on host in pool (either may be nil).
func desiredFor(vm *xo.VM, host *xo.Host, pool *xo.Pool, current map[string]string, opts LabelOptions) DesiredState {
	idx := newTestIndex()
	if host != nil {
		idx.hosts[strings.ToLower(host.ID)] = host
	}
	if pool != nil {
		idx.pools[strings.ToLower(pool.ID)] = pool
	}
	return Desired(idx, vm, current, opts)
}
