package xosim

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

// GiB is 2^30 bytes.
const GiB int64 = 1 << 30

// PoolSpec describes a pool and XO's connection to it (its /rest/v0/servers entry). Zero
// values get defaults when the pool is added.
type PoolSpec struct {
	// ID is the pool uuid; a random one when empty.
	ID              string
	NameLabel       string
	NameDescription string
	// MasterID is the master host's uuid; by default the first host added to the pool.
	MasterID    string
	Tags        []string
	OtherConfig map[string]string
	// ServerID is the id of XO's connection to this pool (/rest/v0/servers); when empty, a
	// name-based UUID derived from the pool id.
	ServerID string
	// ServerLabel is the connection's label; the pool's name_label when empty.
	ServerLabel string
	// ServerHost is the address XO connects to; the master's address when empty.
	ServerHost string
	// Disconnected starts the pool disconnected (see Server.DisconnectPool).
	Disconnected bool
	// ServerDisabled starts the /servers entry disabled ("enabled": false), and so the pool
	// disconnected (see Server.SetServerEnabled).
	ServerDisabled bool
	// Extra holds further top-level fields of the XO object; they override built ones.
	Extra map[string]any
}

// HostSpec describes a host. Zero values get defaults when the host is added.
type HostSpec struct {
	// ID is the host uuid; a random one when empty.
	ID string
	// PoolID is the pool the host belongs to (required).
	PoolID          string
	NameLabel       string
	NameDescription string
	// Hostname defaults to NameLabel.
	Hostname string
	// Address is the management IP address.
	Address string
	// PowerState is "Running" (default), "Halted" or "Unknown".
	PowerState string
	// Disabled puts the host in maintenance (enabled: false).
	Disabled bool
	// Cores and Sockets default to 8 and 1.
	Cores, Sockets int
	// MemorySize defaults to 64 GiB; MemoryUsage to 4 GiB.
	MemorySize, MemoryUsage int64
	// ProductBrand and Version default to "XCP-ng" and "8.3.0".
	ProductBrand, Version string
	Tags                  []string
	OtherConfig           map[string]string
	// Extra holds further top-level fields of the XO object; they override built ones.
	Extra map[string]any
}

// VMSpec describes a VM. Zero values get defaults when the VM is added.
type VMSpec struct {
	// ID is the VM uuid; a random one when empty.
	ID string
	// PoolID is the VM's pool (required).
	PoolID string
	// HostID is the host the VM runs on while Running or Paused; by default the pool master.
	// For a halted VM it is remembered as the host it last ran on.
	HostID          string
	NameLabel       string
	NameDescription string
	// PowerState is "Running" (default), "Halted", "Paused" or "Suspended".
	PowerState string
	// CPUs is CPUs.number (default 1); CPUsMax is CPUs.max (default CPUs).
	CPUs, CPUsMax  int
	CoresPerSocket int
	// Memory is the dynamic min and max and memory.size, in bytes (default 1 GiB).
	// MemoryStaticMin and MemoryStaticMax default to Memory.
	Memory, MemoryStaticMin, MemoryStaticMax int64
	// MemoryUsage, when set, is reported as memory.usage while the VM runs.
	MemoryUsage int64
	Tags        []string
	// Addresses are the guest agent's addresses ("0/ipv4/0" → "10.0.0.5"), shown while the VM
	// runs or is paused. IPs is a shorthand: each address becomes "0/ipv4/<n>" or "0/ipv6/<n>".
	Addresses map[string]string
	IPs       []string
	// OSVersion is the guest agent's os_version, shown while the VM runs (null otherwise).
	OSVersion map[string]string
	// Firmware is "bios" (default) or "uefi". A UEFI guest reports SwapUUID(ID) as its
	// DMI system UUID.
	Firmware string
	// VirtualizationMode is "hvm" (default), "pv", "pvh" or "pv_in_pvh".
	VirtualizationMode string
	AffinityHost       string
	Other              map[string]string
	// Extra holds further top-level fields of the XO object; they override built ones.
	Extra map[string]any
}

var (
	vmPowerStates   = []string{xo.PowerStateRunning, xo.PowerStateHalted, xo.PowerStatePaused, xo.PowerStateSuspended}
	hostPowerStates = []string{"Running", "Halted", "Unknown"}
	virtModes       = []string{"hvm", "pv", "pvh", "pv_in_pvh", "unspecified"}
)

// resident reports whether a VM in this power state has a resident host ($container = host).
func resident(powerState string) bool {
	return powerState == xo.PowerStateRunning || powerState == xo.PowerStatePaused
}

func clonePoolSpec(s PoolSpec) PoolSpec {
	s.Tags = slices.Clone(s.Tags)
	s.OtherConfig = maps.Clone(s.OtherConfig)
	s.Extra = maps.Clone(s.Extra)
	return s
}

func cloneHostSpec(s HostSpec) HostSpec {
	s.Tags = slices.Clone(s.Tags)
	s.OtherConfig = maps.Clone(s.OtherConfig)
	s.Extra = maps.Clone(s.Extra)
	return s
}

func cloneVMSpec(s VMSpec) VMSpec {
	s.Tags = slices.Clone(s.Tags)
	s.Addresses = maps.Clone(s.Addresses)
	s.IPs = slices.Clone(s.IPs)
	s.OSVersion = maps.Clone(s.OSVersion)
	s.Other = maps.Clone(s.Other)
	s.Extra = maps.Clone(s.Extra)
	return s
}

func checkID(what, id string) error {
	if !isUUID(id) {
		return fmt.Errorf("%s id %q is not a UUID", what, id)
	}
	return nil
}

func checkTags(tags []string) error {
	for _, t := range tags {
		if t == "" {
			return errors.New("empty tag")
		}
	}
	return nil
}

// normalizeExtra turns an Extra map into JSON-shaped values.
func normalizeExtra(extra map[string]any) (map[string]any, error) {
	if len(extra) == 0 {
		return nil, nil
	}
	v, err := normalizeJSON(extra)
	if err != nil {
		return nil, fmt.Errorf("extra fields: %w", err)
	}
	m, _ := v.(map[string]any)
	return m, nil
}

// addressesFromIPs builds guest-agent address keys from plain IPs.
func addressesFromIPs(ips []string) (map[string]string, error) {
	out := make(map[string]string, len(ips))
	v4, v6 := 0, 0
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("invalid IP address %q: %w", s, err)
		}
		if a.Is4() || a.Is4In6() {
			out[fmt.Sprintf("0/ipv4/%d", v4)] = a.Unmap().String()
			v4++
		} else {
			out[fmt.Sprintf("0/ipv6/%d", v6)] = a.String()
			v6++
		}
	}
	return out, nil
}

// normalizePool validates and fills defaults; id generation is the caller's job.
func (s *PoolSpec) normalize() error {
	var errs []error
	s.ID = normalizeUUID(s.ID)
	if err := checkID("pool", s.ID); err != nil {
		errs = append(errs, err)
	}
	if s.MasterID != "" {
		s.MasterID = normalizeUUID(s.MasterID)
	}
	if s.ServerID == "" {
		s.ServerID = nameUUID("xosim-server", s.ID)
	}
	if s.Tags == nil {
		s.Tags = []string{}
	}
	if err := checkTags(s.Tags); err != nil {
		errs = append(errs, fmt.Errorf("pool %s: %w", s.ID, err))
	}
	if s.OtherConfig == nil {
		s.OtherConfig = map[string]string{}
	}
	extra, err := normalizeExtra(s.Extra)
	if err != nil {
		errs = append(errs, fmt.Errorf("pool %s: %w", s.ID, err))
	}
	s.Extra = extra
	return errors.Join(errs...)
}

func (s *HostSpec) normalize() error {
	var errs []error
	s.ID = normalizeUUID(s.ID)
	if err := checkID("host", s.ID); err != nil {
		errs = append(errs, err)
	}
	s.PoolID = normalizeUUID(s.PoolID)
	if s.NameLabel == "" {
		s.NameLabel = "xcp-host-" + s.ID[:min(8, len(s.ID))]
	}
	if s.Hostname == "" {
		s.Hostname = s.NameLabel
	}
	if s.Address != "" {
		if _, err := netip.ParseAddr(s.Address); err != nil {
			errs = append(errs, fmt.Errorf("host %s: invalid address %q", s.ID, s.Address))
		}
	}
	if s.PowerState == "" {
		s.PowerState = "Running"
	}
	if !slices.Contains(hostPowerStates, s.PowerState) {
		errs = append(errs, fmt.Errorf("host %s: invalid power state %q (want one of %s)", s.ID, s.PowerState, strings.Join(hostPowerStates, ", ")))
	}
	if s.Cores == 0 {
		s.Cores = 8
	}
	if s.Sockets == 0 {
		s.Sockets = 1
	}
	if s.Cores < 0 || s.Sockets < 0 {
		errs = append(errs, fmt.Errorf("host %s: negative cores or sockets", s.ID))
	}
	if s.MemorySize == 0 {
		s.MemorySize = 64 * GiB
	}
	if s.MemoryUsage == 0 {
		s.MemoryUsage = 4 * GiB
	}
	if s.MemorySize < 0 || s.MemoryUsage < 0 {
		errs = append(errs, fmt.Errorf("host %s: negative memory", s.ID))
	}
	if s.ProductBrand == "" {
		s.ProductBrand = "XCP-ng"
	}
	if s.Version == "" {
		s.Version = "8.3.0"
	}
	if s.Tags == nil {
		s.Tags = []string{}
	}
	if err := checkTags(s.Tags); err != nil {
		errs = append(errs, fmt.Errorf("host %s: %w", s.ID, err))
	}
	if s.OtherConfig == nil {
		s.OtherConfig = map[string]string{}
	}
	extra, err := normalizeExtra(s.Extra)
	if err != nil {
		errs = append(errs, fmt.Errorf("host %s: %w", s.ID, err))
	}
	s.Extra = extra
	return errors.Join(errs...)
}

func (s *VMSpec) normalize() error {
	var errs []error
	s.ID = normalizeUUID(s.ID)
	if err := checkID("VM", s.ID); err != nil {
		errs = append(errs, err)
	}
	s.PoolID = normalizeUUID(s.PoolID)
	s.HostID = normalizeUUID(s.HostID)
	s.AffinityHost = normalizeUUID(s.AffinityHost)
	if s.NameLabel == "" {
		s.NameLabel = "vm-" + s.ID[:min(8, len(s.ID))]
	}
	if s.PowerState == "" {
		s.PowerState = xo.PowerStateRunning
	}
	if !slices.Contains(vmPowerStates, s.PowerState) {
		errs = append(errs, fmt.Errorf("VM %s: invalid power state %q (want one of %s)", s.ID, s.PowerState, strings.Join(vmPowerStates, ", ")))
	}
	if s.CPUs == 0 {
		s.CPUs = 1
	}
	if s.CPUsMax == 0 {
		s.CPUsMax = s.CPUs
	}
	if s.CPUs < 0 || s.CPUsMax < s.CPUs {
		errs = append(errs, fmt.Errorf("VM %s: invalid vCPUs (number %d, max %d)", s.ID, s.CPUs, s.CPUsMax))
	}
	if s.Memory == 0 {
		s.Memory = GiB
	}
	if s.MemoryStaticMax == 0 {
		s.MemoryStaticMax = s.Memory
	}
	if s.MemoryStaticMin == 0 {
		s.MemoryStaticMin = min(s.Memory, s.MemoryStaticMax)
	}
	if s.Memory < 0 || s.MemoryStaticMin < 0 || s.MemoryStaticMax < s.Memory || s.MemoryStaticMin > s.MemoryStaticMax || s.MemoryUsage < 0 {
		errs = append(errs, fmt.Errorf("VM %s: invalid memory (dynamic %d, static [%d, %d])", s.ID, s.Memory, s.MemoryStaticMin, s.MemoryStaticMax))
	}
	if s.Tags == nil {
		s.Tags = []string{}
	}
	if err := checkTags(s.Tags); err != nil {
		errs = append(errs, fmt.Errorf("VM %s: %w", s.ID, err))
	}
	if len(s.IPs) > 0 {
		addrs, err := addressesFromIPs(s.IPs)
		if err != nil {
			errs = append(errs, fmt.Errorf("VM %s: %w", s.ID, err))
		}
		if s.Addresses == nil {
			s.Addresses = map[string]string{}
		}
		for k, v := range addrs {
			if _, taken := s.Addresses[k]; !taken {
				s.Addresses[k] = v
			}
		}
		s.IPs = nil
	}
	if s.Addresses == nil {
		s.Addresses = map[string]string{}
	}
	if s.Firmware == "" {
		s.Firmware = "bios"
	}
	if s.Firmware != "bios" && s.Firmware != "uefi" {
		errs = append(errs, fmt.Errorf("VM %s: invalid firmware %q (want bios or uefi)", s.ID, s.Firmware))
	}
	if s.VirtualizationMode == "" {
		s.VirtualizationMode = "hvm"
	}
	if !slices.Contains(virtModes, s.VirtualizationMode) {
		errs = append(errs, fmt.Errorf("VM %s: invalid virtualization mode %q", s.ID, s.VirtualizationMode))
	}
	if s.Other == nil {
		s.Other = map[string]string{}
	}
	extra, err := normalizeExtra(s.Extra)
	if err != nil {
		errs = append(errs, fmt.Errorf("VM %s: %w", s.ID, err))
	}
	s.Extra = extra
	return errors.Join(errs...)
}

// GuestSystemUUID is the DMI system UUID the guest of a VM with this spec reports (and kubelet
// copies into node.status.nodeInfo.systemUUID): the VM uuid for BIOS guests, the byte-swapped
// form for UEFI guests, "" for PV and PVH guests, which have no SMBIOS (reference §5).
func (s VMSpec) GuestSystemUUID() string {
	switch {
	case s.VirtualizationMode == "pv" || s.VirtualizationMode == "pvh" || s.VirtualizationMode == "pv_in_pvh":
		return ""
	case s.Firmware == "uefi":
		return SwapUUID(s.ID)
	}
	return s.ID
}
