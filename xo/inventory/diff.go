package inventory

import (
	"slices"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

// vmEqual reports whether two VMs hold the same data.
func vmEqual(a, b *xo.VM) bool {
	return a.ID == b.ID && a.NameLabel == b.NameLabel && a.PowerState == b.PowerState &&
		a.PoolID == b.PoolID && a.Container == b.Container && a.CPUs == b.CPUs &&
		a.Memory == b.Memory && slices.Equal(a.Tags, b.Tags) &&
		slices.Equal(a.Addresses, b.Addresses) && a.MainIPAddress == b.MainIPAddress
}

// diff lists what differs between two snapshots.
func diff(old, next *Snapshot) []Change {
	var out []Change
	for id, vm := range next.vms.all() {
		if o := old.vms.get(id); o == nil || !vmEqual(o, vm) {
			out = append(out, Change{Kind: VMChanged, ID: id})
		}
	}
	for id := range old.vms.all() {
		if next.vms.get(id) == nil {
			out = append(out, Change{Kind: VMChanged, ID: id})
		}
	}
	for id, h := range next.hosts {
		if o := old.hosts[id]; o == nil || *o != *h {
			out = append(out, Change{Kind: HostChanged, ID: id})
		}
	}
	for id := range old.hosts {
		if next.hosts[id] == nil {
			out = append(out, Change{Kind: HostChanged, ID: id})
		}
	}
	pools := map[string]struct{}{}
	for id, p := range next.pools {
		if o := old.pools[id]; o == nil || *o != *p || old.PoolConnected(id) != next.PoolConnected(id) {
			pools[id] = struct{}{}
		}
	}
	for id := range old.pools {
		if next.pools[id] == nil {
			pools[id] = struct{}{}
		}
	}
	for id := range old.conn {
		if old.PoolConnected(id) != next.PoolConnected(id) {
			pools[id] = struct{}{}
		}
	}
	for id := range pools {
		out = append(out, Change{Kind: PoolChanged, ID: id})
	}
	return out
}
