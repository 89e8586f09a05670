package node

import "github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"

// Index is what node-to-VM resolution needs from an inventory snapshot. The inventory
// implements it; tests use a map-backed one.
//
// Returned pointers are immutable snapshots shared with other readers: callers never modify them.
type Index interface {
	// VM returns the VM with this id (a lower-case uuid), or nil when absent.
	VM(id string) *xo.VM
	// VMsByName returns the VMs whose name_label is exactly name.
	VMsByName(name string) []*xo.VM
	// VMsByAddress returns the VMs reporting this guest address; ip is in the canonical
	// net.ParseIP(...).String() form.
	VMsByAddress(ip string) []*xo.VM
	// Host returns the host with this id, or nil when absent.
	Host(id string) *xo.Host
	// Pool returns the pool with this id, or nil when absent.
	Pool(id string) *xo.Pool
	// PoolConnected reports whether XO has a connected server for this pool.
	PoolConnected(poolID string) bool
	// Complete reports whether every pool that counts is connected and settled and the last
	// refresh succeeded and is not stale: only then can the absence of a twin (same name, same
	// address) be trusted.
	Complete() bool
	// RemovedRecently reports whether a VM with this name or address (canonical form) left the
	// inventory less than the settle time ago: XO drops a lost pool's VMs one by one before the
	// pool itself, so a twin may be gone for that reason only.
	RemovedRecently(key string) bool
	// Region returns the region configured for the XO server serving the pool ("" when none).
	Region(poolID string) string
	// HostNameShared and PoolNameShared report whether a host (pool) other than id has this
	// name.
	HostNameShared(name, id string) bool
	PoolNameShared(name, id string) bool
}
