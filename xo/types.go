// Package xo talks to the Xen Orchestra REST API (/rest/v0): typed objects, typed errors, bulk
// ndjson listing, single-object reads and the server-sent event stream.
package xo

// PowerState values are XAPI's, as XO reports them.
const (
	PowerStateRunning   = "Running"
	PowerStateHalted    = "Halted"
	PowerStatePaused    = "Paused"
	PowerStateSuspended = "Suspended"
)

// Server status values of /rest/v0/servers (XO's connections to pools).
const (
	ServerConnected    = "connected"
	ServerDisconnected = "disconnected"
)

// VM is the part of an XO VM object the controller uses. Absent or null fields decode to zero
// values; callers treat the zero value as "unknown".
type VM struct {
	ID         string `json:"id"`
	NameLabel  string `json:"name_label"`
	PowerState string `json:"power_state"`
	// PoolID is "$pool", the pool uuid.
	PoolID string `json:"$pool"`
	// Container is "$container": the host uuid while the VM runs or is paused, else usually the
	// pool uuid (or, for a VM on local storage, that storage's host).
	Container     string    `json:"$container"`
	CPUs          CPUs      `json:"CPUs"`
	Memory        Memory    `json:"memory"`
	Tags          []string  `json:"tags"`
	Addresses     Addresses `json:"addresses"`
	MainIPAddress string    `json:"mainIpAddress"`
}

// CPUs is a VM's vCPU counts.
type CPUs struct {
	Max    int `json:"max"`
	Number int `json:"number"`
}

// Memory is a VM's memory settings in bytes. Dynamic and Static are [min, max] pairs: arrays,
// not slices, so that a VM holds them without two allocations of their own (a pair shorter in
// XO's answer leaves zeros; a longer one, which XO never sends, is cut to two).
type Memory struct {
	Dynamic [2]int64 `json:"dynamic"`
	Static  [2]int64 `json:"static"`
	Size    int64    `json:"size"`
}

// Host is the part of an XO host object the controller uses.
type Host struct {
	ID         string `json:"id"`
	NameLabel  string `json:"name_label"`
	PoolID     string `json:"$pool"`
	PowerState string `json:"power_state"`
}

// Pool is the part of an XO pool object the controller uses.
type Pool struct {
	ID        string `json:"id"`
	NameLabel string `json:"name_label"`
}

// Server is one of XO's connections to a pool (/rest/v0/servers). PoolID is only reported
// while the server is connected.
type Server struct {
	ID     string `json:"id"`
	PoolID string `json:"poolId"`
	Status string `json:"status"`
	Label  string `json:"label"`
	// Enabled is false for a server entry an administrator disabled: XO does not connect it.
	// Absent (older XO) means enabled.
	Enabled *bool `json:"enabled"`
}

// IsEnabled reports whether the server entry is enabled (absent counts as enabled).
func (s *Server) IsEnabled() bool { return s.Enabled == nil || *s.Enabled }

// Fields lists, per collection, the fields the inventory asks for: only what it uses.
var (
	VMFields     = []string{"id", "name_label", "power_state", "$pool", "$container", "CPUs", "memory", "tags", "addresses", "mainIpAddress"}
	HostFields   = []string{"id", "name_label", "$pool", "power_state"}
	PoolFields   = []string{"id", "name_label"}
	ServerFields = []string{"id", "poolId", "status", "label", "enabled"}
)
