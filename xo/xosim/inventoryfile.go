package xosim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// An inventory file describes pools with their hosts and VMs. It is JSON (cmd/xosim also
// reads YAML, converted to JSON first):
//
//	{"pools": [{
//	  "name": "dc1", "id": "<uuid, optional>", "description": "", "tags": [],
//	  "disconnected": false,
//	  "server": {"id": "<uuid>", "label": "dc1", "host": "192.0.2.10", "disabled": false},
//	  "hosts": [{"name": "xcp-1", "address": "192.0.2.11", "cores": 16, "sockets": 2,
//	             "memory": "256GiB", "powerState": "Running", "disabled": false}],
//	  "vms": [{"name": "k8s-cp-1", "host": "xcp-1", "powerState": "Running",
//	           "cpus": 2, "memory": "4GiB", "tags": ["k8s"], "ips": ["10.0.0.11"],
//	           "firmware": "uefi", "osVersion": {"distro": "ubuntu"}}]
//	}]}
//
// Objects without an id get a stable name-based one, so the same file gives the same ids on
// every run, and two simulators loading it hold the same pools (as two XO instances connected
// to the same pools do). A VM's host is a host name or id of its pool.

// Inventory is a parsed inventory file.
type Inventory struct {
	Pools []InventoryPool `json:"pools"`
}

// InventoryPool is a pool of an inventory file.
type InventoryPool struct {
	ID           string            `json:"id,omitempty"`
	Name         string            `json:"name"`
	Description  string            `json:"description,omitempty"`
	Tags         []string          `json:"tags,omitempty"`
	OtherConfig  map[string]string `json:"otherConfig,omitempty"`
	Disconnected bool              `json:"disconnected,omitempty"`
	Server       *InventoryServer  `json:"server,omitempty"`
	Hosts        []InventoryHost   `json:"hosts,omitempty"`
	VMs          []InventoryVM     `json:"vms,omitempty"`
}

// InventoryServer is XO's connection to a pool (/rest/v0/servers). A disabled entry shows
// "enabled": false and its pool disconnected.
type InventoryServer struct {
	ID       string `json:"id,omitempty"`
	Label    string `json:"label,omitempty"`
	Host     string `json:"host,omitempty"`
	Disabled bool   `json:"disabled,omitempty"`
}

// InventoryHost is a host of an inventory file.
type InventoryHost struct {
	ID           string   `json:"id,omitempty"`
	Name         string   `json:"name"`
	Description  string   `json:"description,omitempty"`
	Hostname     string   `json:"hostname,omitempty"`
	Address      string   `json:"address,omitempty"`
	PowerState   string   `json:"powerState,omitempty"`
	Disabled     bool     `json:"disabled,omitempty"`
	Cores        int      `json:"cores,omitempty"`
	Sockets      int      `json:"sockets,omitempty"`
	Memory       ByteSize `json:"memory,omitempty"`
	ProductBrand string   `json:"productBrand,omitempty"`
	Version      string   `json:"version,omitempty"`
	Tags         []string `json:"tags,omitempty"`
}

// InventoryVM is a VM of an inventory file.
type InventoryVM struct {
	ID                 string            `json:"id,omitempty"`
	Name               string            `json:"name"`
	Description        string            `json:"description,omitempty"`
	Host               string            `json:"host,omitempty"`
	PowerState         string            `json:"powerState,omitempty"`
	CPUs               int               `json:"cpus,omitempty"`
	CPUsMax            int               `json:"cpusMax,omitempty"`
	CoresPerSocket     int               `json:"coresPerSocket,omitempty"`
	Memory             ByteSize          `json:"memory,omitempty"`
	Tags               []string          `json:"tags,omitempty"`
	IPs                []string          `json:"ips,omitempty"`
	Addresses          map[string]string `json:"addresses,omitempty"`
	OSVersion          map[string]string `json:"osVersion,omitempty"`
	Firmware           string            `json:"firmware,omitempty"`
	VirtualizationMode string            `json:"virtualizationMode,omitempty"`
	Other              map[string]string `json:"other,omitempty"`
}

// ByteSize is a size in bytes, written in a file as a number or a string with a binary unit
// ("512MiB", "8GiB", "1.5TiB"; Ki/Mi/Gi/Ti are accepted too).
type ByteSize int64

var byteUnits = []struct {
	suffix string
	mult   float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"B", 1},
}

// ParseByteSize parses a size such as "8GiB" or "1073741824".
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) || f*mult > math.MaxInt64/2 {
		return 0, fmt.Errorf("invalid size %q (want bytes or a number with KiB, MiB, GiB or TiB)", s)
	}
	return ByteSize(math.Round(f * mult)), nil
}

// UnmarshalJSON accepts a number of bytes or a string with a unit.
func (b *ByteSize) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		v, err := ParseByteSize(s)
		if err != nil {
			return err
		}
		*b = v
		return nil
	}
	var f float64
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("invalid size %s", data)
	}
	v, err := ParseByteSize(strconv.FormatFloat(f, 'f', -1, 64))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// known keys per level, for reporting every unknown key at once.
var (
	inventoryKeys = []string{"pools"}
	poolKeys      = []string{"id", "name", "description", "tags", "otherConfig", "disconnected", "server", "hosts", "vms"}
	serverKeys    = []string{"id", "label", "host", "disabled"}
	hostKeys      = []string{"id", "name", "description", "hostname", "address", "powerState", "disabled", "cores", "sockets", "memory", "productBrand", "version", "tags"}
	vmKeys        = []string{"id", "name", "description", "host", "powerState", "cpus", "cpusMax", "coresPerSocket", "memory", "tags", "ips", "addresses", "osVersion", "firmware", "virtualizationMode", "other"}
)

// ParseInventory parses and validates an inventory file (JSON). The error lists every problem
// found, unknown keys included.
func ParseInventory(data []byte) (*Inventory, error) {
	var generic any
	if err := json.Unmarshal(data, &generic); err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	var errs []error
	unknownKeys(generic, "", inventoryKeys, &errs)
	if root, ok := generic.(map[string]any); ok {
		pools, _ := root["pools"].([]any)
		for i, p := range pools {
			path := fmt.Sprintf("pools[%d]", i)
			unknownKeys(p, path, poolKeys, &errs)
			pm, _ := p.(map[string]any)
			unknownKeys(pm["server"], path+".server", serverKeys, &errs)
			hosts, _ := pm["hosts"].([]any)
			for j, h := range hosts {
				unknownKeys(h, fmt.Sprintf("%s.hosts[%d]", path, j), hostKeys, &errs)
			}
			vms, _ := pm["vms"].([]any)
			for j, v := range vms {
				unknownKeys(v, fmt.Sprintf("%s.vms[%d]", path, j), vmKeys, &errs)
			}
		}
	}
	var inv Inventory
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&inv); err != nil {
		errs = append(errs, fmt.Errorf("inventory: %w", err))
		return nil, errors.Join(errs...)
	}
	errs = append(errs, inv.validate()...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &inv, nil
}

func unknownKeys(v any, path string, known []string, errs *[]error) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	var unknown []string
	for k := range m {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		p := k
		if path != "" {
			p = path + "." + k
		}
		*errs = append(*errs, fmt.Errorf("inventory: unknown key %q", p))
	}
}

// validate checks what the specs' own validation cannot: names, references, duplicates.
func (inv *Inventory) validate() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf("inventory: "+format, args...)) }
	ids := map[string]string{}
	claim := func(id, what string) {
		if id == "" {
			return
		}
		if !isUUID(id) {
			add("%s: id %q is not a UUID", what, id)
			return
		}
		id = strings.ToLower(id)
		if prev, dup := ids[id]; dup {
			add("%s: id %s already used by %s", what, id, prev)
			return
		}
		ids[id] = what
	}
	poolNames := map[string]bool{}
	for i, p := range inv.Pools {
		pw := fmt.Sprintf("pools[%d]", i)
		if p.Name == "" {
			add("%s: name is required", pw)
		} else if poolNames[p.Name] {
			add("%s: duplicate pool name %q", pw, p.Name)
		}
		poolNames[p.Name] = true
		claim(p.ID, pw)
		if p.Server != nil && p.Server.ID != "" {
			claim(p.Server.ID, pw+".server")
		}
		hostNames := map[string]bool{}
		hostRefs := map[string]bool{}
		for j, h := range p.Hosts {
			hw := fmt.Sprintf("%s.hosts[%d]", pw, j)
			if h.Name == "" {
				add("%s: name is required", hw)
			} else if hostNames[h.Name] {
				add("%s: duplicate host name %q", hw, h.Name)
			}
			hostNames[h.Name] = true
			hostRefs[h.Name] = true
			if h.ID != "" {
				hostRefs[strings.ToLower(h.ID)] = true
			}
			claim(h.ID, hw)
			if h.Address != "" {
				if _, err := netip.ParseAddr(h.Address); err != nil {
					add("%s: invalid address %q", hw, h.Address)
				}
			}
			if h.PowerState != "" && !slices.Contains(hostPowerStates, h.PowerState) {
				add("%s: invalid powerState %q (want one of %s)", hw, h.PowerState, strings.Join(hostPowerStates, ", "))
			}
			if h.Cores < 0 || h.Sockets < 0 {
				add("%s: cores and sockets must not be negative", hw)
			}
		}
		vmNames := map[string]bool{}
		for j, v := range p.VMs {
			vw := fmt.Sprintf("%s.vms[%d]", pw, j)
			if v.Name == "" {
				add("%s: name is required", vw)
			} else if vmNames[v.Name] && v.ID == "" {
				add("%s: duplicate VM name %q without id (ids are derived from names)", vw, v.Name)
			}
			vmNames[v.Name] = true
			claim(v.ID, vw)
			if v.Host != "" && !hostRefs[v.Host] && !hostRefs[strings.ToLower(v.Host)] {
				add("%s: host %q is not a host of pool %q", vw, v.Host, p.Name)
			}
			if v.PowerState != "" && !slices.Contains(vmPowerStates, v.PowerState) {
				add("%s: invalid powerState %q (want one of %s)", vw, v.PowerState, strings.Join(vmPowerStates, ", "))
			}
			if (v.PowerState == "" || resident(v.PowerState)) && v.Host == "" && len(p.Hosts) == 0 {
				add("%s: a running VM needs a host, and pool %q has none", vw, p.Name)
			}
			if v.CPUs < 0 || v.CPUsMax < 0 || (v.CPUsMax != 0 && v.CPUsMax < v.CPUs) {
				add("%s: invalid cpus (%d) or cpusMax (%d)", vw, v.CPUs, v.CPUsMax)
			}
			for _, ip := range v.IPs {
				if _, err := netip.ParseAddr(ip); err != nil {
					add("%s: invalid IP address %q", vw, ip)
				}
			}
			for k, ip := range v.Addresses {
				if _, err := netip.ParseAddr(ip); err != nil {
					add("%s: addresses[%q]: invalid IP address %q", vw, k, ip)
				}
			}
			if v.Firmware != "" && v.Firmware != "bios" && v.Firmware != "uefi" {
				add("%s: invalid firmware %q (want bios or uefi)", vw, v.Firmware)
			}
			if v.VirtualizationMode != "" && !slices.Contains(virtModes, v.VirtualizationMode) {
				add("%s: invalid virtualizationMode %q", vw, v.VirtualizationMode)
			}
			for _, t := range v.Tags {
				if t == "" {
					add("%s: empty tag", vw)
				}
			}
		}
	}
	return errs
}

// Apply adds the inventory's pools, hosts and VMs to s.
func (inv *Inventory) Apply(s *Server) error {
	for _, p := range inv.Pools {
		poolID := p.ID
		if poolID == "" {
			poolID = nameUUID("xosim-pool", p.Name)
		}
		ps := PoolSpec{
			ID:              poolID,
			NameLabel:       p.Name,
			NameDescription: p.Description,
			Tags:            p.Tags,
			OtherConfig:     p.OtherConfig,
			Disconnected:    p.Disconnected,
		}
		if p.Server != nil {
			ps.ServerID, ps.ServerLabel, ps.ServerHost = p.Server.ID, p.Server.Label, p.Server.Host
			ps.ServerDisabled = p.Server.Disabled
		}
		if _, err := s.AddPool(ps); err != nil {
			return fmt.Errorf("inventory pool %q: %w", p.Name, err)
		}
		hostIDs := map[string]string{}
		for _, h := range p.Hosts {
			hid := h.ID
			if hid == "" {
				hid = nameUUID("xosim-host", p.Name, h.Name)
			}
			hid = strings.ToLower(hid)
			hostIDs[h.Name] = hid
			hostIDs[hid] = hid
			_, err := s.AddHost(HostSpec{
				ID:              hid,
				PoolID:          poolID,
				NameLabel:       h.Name,
				NameDescription: h.Description,
				Hostname:        h.Hostname,
				Address:         h.Address,
				PowerState:      h.PowerState,
				Disabled:        h.Disabled,
				Cores:           h.Cores,
				Sockets:         h.Sockets,
				MemorySize:      int64(h.Memory),
				ProductBrand:    h.ProductBrand,
				Version:         h.Version,
				Tags:            h.Tags,
			})
			if err != nil {
				return fmt.Errorf("inventory pool %q host %q: %w", p.Name, h.Name, err)
			}
		}
		specs := make([]VMSpec, 0, len(p.VMs))
		for _, v := range p.VMs {
			vid := v.ID
			if vid == "" {
				vid = nameUUID("xosim-vm", p.Name, v.Name)
			}
			hostID := hostIDs[v.Host]
			if hostID == "" {
				hostID = hostIDs[strings.ToLower(v.Host)]
			}
			specs = append(specs, VMSpec{
				ID:                 vid,
				PoolID:             poolID,
				HostID:             hostID,
				NameLabel:          v.Name,
				NameDescription:    v.Description,
				PowerState:         v.PowerState,
				CPUs:               v.CPUs,
				CPUsMax:            v.CPUsMax,
				CoresPerSocket:     v.CoresPerSocket,
				Memory:             int64(v.Memory),
				Tags:               v.Tags,
				IPs:                v.IPs,
				Addresses:          v.Addresses,
				OSVersion:          v.OSVersion,
				Firmware:           v.Firmware,
				VirtualizationMode: v.VirtualizationMode,
				Other:              v.Other,
			})
		}
		if _, err := s.AddVMs(specs); err != nil {
			return fmt.Errorf("inventory pool %q: %w", p.Name, err)
		}
	}
	return nil
}

// LoadInventory parses an inventory file (JSON) and applies it to s.
func (s *Server) LoadInventory(data []byte) error {
	inv, err := ParseInventory(data)
	if err != nil {
		return err
	}
	return inv.Apply(s)
}
