package xosim

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// The control API changes the simulated inventory. Every method is atomic (except the
// connection methods that go through XO's steps, see connection.go): it validates first and
// changes nothing on error. Changes to objects XO holds are sent to the event streams'
// subscribers as XO sends them (add, update, remove); changes to objects of disconnected pools
// are invisible until the pool reconnects.

// ErrNotFound is returned (wrapped) by control methods for an unknown id.
var ErrNotFound = errors.New("not found")

func notFound(what, id string) error {
	return fmt.Errorf("%s %s: %w", what, id, ErrNotFound)
}

// mutate runs fn under the store lock, commits and publishes the resulting changes.
func (s *Server) mutate(fn func(t *txn) error) error {
	st := s.st
	st.mu.Lock()
	defer st.mu.Unlock()
	t := st.begin()
	if err := fn(t); err != nil {
		return err
	}
	s.publish(t.commit())
	return nil
}

func (s *Server) unix() float64 { return float64(s.now().Unix()) }

// --- pools -----------------------------------------------------------------------------------

// AddPool adds a pool (and its /servers entry) and returns its id.
func (s *Server) AddPool(spec PoolSpec) (string, error) {
	spec = clonePoolSpec(spec)
	if spec.ID == "" {
		spec.ID = newUUID()
	}
	if err := spec.normalize(); err != nil {
		return "", fmt.Errorf("add pool: %w", err)
	}
	err := s.mutate(func(t *txn) error {
		st := t.st
		if st.pools[spec.ID] != nil {
			return fmt.Errorf("add pool: pool %s already exists", spec.ID)
		}
		if err := st.checkFreeID(spec.ID); err != nil {
			return fmt.Errorf("add pool: %w", err)
		}
		for _, p := range st.pools {
			if p.spec.ServerID == spec.ServerID {
				return fmt.Errorf("add pool: server id %s already used by pool %s", spec.ServerID, p.spec.ID)
			}
		}
		if spec.MasterID != "" {
			if h := st.hosts[spec.MasterID]; h == nil || h.spec.PoolID != spec.ID {
				return fmt.Errorf("add pool: master %s is not a host of the pool", spec.MasterID)
			}
		}
		t.touch(collPool, spec.ID)
		connected := !spec.Disconnected && !spec.ServerDisabled
		st.pools[spec.ID] = &poolState{spec: spec, connected: connected, loaded: connected, allVMs: connected,
			created: s.unix(), hosts: map[string]struct{}{}}
		st.appendOrder(collPool, spec.ID)
		return nil
	})
	if err != nil {
		return "", err
	}
	return spec.ID, nil
}

// UpdatePool changes a pool's spec with fn (ID and ServerID cannot change; Disconnected and
// ServerDisabled are ignored: use DisconnectPool, ReconnectPool and SetServerEnabled). fn runs
// under the simulator's lock and must not call the Server.
func (s *Server) UpdatePool(id string, fn func(*PoolSpec)) error {
	return s.mutate(func(t *txn) error {
		p := t.st.pools[id]
		if p == nil {
			return notFound("pool", id)
		}
		spec := clonePoolSpec(p.spec)
		fn(&spec)
		spec.ID, spec.ServerID, spec.Disconnected, spec.ServerDisabled = p.spec.ID, p.spec.ServerID, !p.connected, p.spec.ServerDisabled
		if err := spec.normalize(); err != nil {
			return fmt.Errorf("update pool: %w", err)
		}
		if spec.MasterID != "" {
			if h := t.st.hosts[spec.MasterID]; h == nil || h.spec.PoolID != id {
				return fmt.Errorf("update pool: master %s is not a host of the pool", spec.MasterID)
			}
		}
		t.touch(collPool, id)
		p.spec = spec
		return nil
	})
}

// RemovePool removes a pool with its hosts, VMs and /servers entry.
func (s *Server) RemovePool(id string) error {
	return s.mutate(func(t *txn) error {
		st := t.st
		if st.pools[id] == nil {
			return notFound("pool", id)
		}
		t.touchPoolContents(id)
		for vid, v := range st.vms {
			if v.spec.PoolID == id {
				delete(st.vms, vid)
			}
		}
		for hid, h := range st.hosts {
			if h.spec.PoolID == id {
				delete(st.hosts, hid)
			}
		}
		delete(st.pools, id)
		return nil
	})
}

// Pool returns a copy of a pool's spec.
func (s *Server) Pool(id string) (PoolSpec, bool) {
	s.st.mu.RLock()
	defer s.st.mu.RUnlock()
	if p := s.st.pools[id]; p != nil {
		spec := clonePoolSpec(p.spec)
		spec.Disconnected = !p.connected
		return spec, true
	}
	return PoolSpec{}, false
}

// --- hosts -----------------------------------------------------------------------------------

// AddHost adds a host to an existing pool and returns its id. The first host of a pool
// without a master becomes its master.
func (s *Server) AddHost(spec HostSpec) (string, error) {
	spec = cloneHostSpec(spec)
	if spec.ID == "" {
		spec.ID = newUUID()
	}
	if err := spec.normalize(); err != nil {
		return "", fmt.Errorf("add host: %w", err)
	}
	err := s.mutate(func(t *txn) error {
		st := t.st
		p := st.pools[spec.PoolID]
		if p == nil {
			return fmt.Errorf("add host %s: %w", spec.ID, notFound("pool", spec.PoolID))
		}
		if err := st.checkFreeID(spec.ID); err != nil {
			return fmt.Errorf("add host: %w", err)
		}
		t.touch(collHost, spec.ID)
		t.touch(collPool, spec.PoolID)
		st.hosts[spec.ID] = &hostState{spec: spec, created: s.unix(), resident: map[string]struct{}{}}
		st.appendOrder(collHost, spec.ID)
		p.hosts[spec.ID] = struct{}{}
		if p.spec.MasterID == "" {
			p.spec.MasterID = spec.ID
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return spec.ID, nil
}

// UpdateHost changes a host's spec with fn (ID and PoolID cannot change). fn runs under the
// simulator's lock and must not call the Server.
func (s *Server) UpdateHost(id string, fn func(*HostSpec)) error {
	return s.mutate(func(t *txn) error {
		h := t.st.hosts[id]
		if h == nil {
			return notFound("host", id)
		}
		spec := cloneHostSpec(h.spec)
		fn(&spec)
		spec.ID, spec.PoolID = h.spec.ID, h.spec.PoolID
		if err := spec.normalize(); err != nil {
			return fmt.Errorf("update host: %w", err)
		}
		t.touch(collHost, id)
		h.spec = spec
		return nil
	})
}

// RemoveHost removes a host. It fails while VMs run on it; halted VMs that last ran there
// forget it. A removed master is replaced by another host of the pool.
func (s *Server) RemoveHost(id string) error {
	return s.mutate(func(t *txn) error {
		st := t.st
		h := st.hosts[id]
		if h == nil {
			return notFound("host", id)
		}
		if len(h.resident) > 0 {
			return fmt.Errorf("remove host %s: %d VMs are running on it", id, len(h.resident))
		}
		t.touch(collHost, id)
		p := st.pools[h.spec.PoolID]
		t.touch(collPool, p.spec.ID)
		for vid, v := range st.vms {
			if v.spec.HostID == id || v.spec.AffinityHost == id {
				t.touch(collVM, vid)
				if v.spec.HostID == id {
					v.spec.HostID = ""
				}
				if v.spec.AffinityHost == id {
					v.spec.AffinityHost = ""
				}
			}
		}
		delete(st.hosts, id)
		delete(p.hosts, id)
		if p.spec.MasterID == id {
			p.spec.MasterID = ""
			for _, hid := range st.order[collHost] {
				if _, ok := p.hosts[hid]; ok {
					p.spec.MasterID = hid
					break
				}
			}
		}
		return nil
	})
}

// Host returns a copy of a host's spec.
func (s *Server) Host(id string) (HostSpec, bool) {
	s.st.mu.RLock()
	defer s.st.mu.RUnlock()
	if h := s.st.hosts[id]; h != nil {
		return cloneHostSpec(h.spec), true
	}
	return HostSpec{}, false
}

// --- VMs -------------------------------------------------------------------------------------

// AddVM adds a VM and returns its id.
func (s *Server) AddVM(spec VMSpec) (string, error) {
	ids, err := s.AddVMs([]VMSpec{spec})
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// AddVMs adds VMs in one change (all or none) and returns their ids in order. It is the fast
// way to build large inventories.
func (s *Server) AddVMs(specs []VMSpec) ([]string, error) {
	norm := make([]VMSpec, len(specs))
	var errs []error
	for i, spec := range specs {
		spec = cloneVMSpec(spec)
		if spec.ID == "" {
			spec.ID = newUUID()
		}
		if err := spec.normalize(); err != nil {
			errs = append(errs, err)
		}
		norm[i] = spec
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("add VMs: %w", errors.Join(errs...))
	}
	now := s.unix()
	err := s.mutate(func(t *txn) error {
		st := t.st
		seen := make(map[string]struct{}, len(norm))
		for i := range norm {
			spec := &norm[i]
			if _, dup := seen[spec.ID]; dup {
				return fmt.Errorf("add VMs: VM %s given twice", spec.ID)
			}
			seen[spec.ID] = struct{}{}
			if err := st.checkFreeID(spec.ID); err != nil {
				return fmt.Errorf("add VMs: %w", err)
			}
			if err := st.placeVM(spec); err != nil {
				return fmt.Errorf("add VMs: %w", err)
			}
		}
		for i := range norm {
			spec := norm[i]
			t.touch(collVM, spec.ID)
			st.vms[spec.ID] = &vmState{spec: spec, created: now, startTime: now}
			st.appendOrder(collVM, spec.ID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(norm))
	for i, spec := range norm {
		ids[i] = spec.ID
	}
	return ids, nil
}

// checkFreeID rejects an id already used by any object (XO ids are unique across types).
func (st *store) checkFreeID(id string) error {
	if st.vms[id] != nil || st.hosts[id] != nil || st.pools[id] != nil {
		return fmt.Errorf("id %s already exists", id)
	}
	return nil
}

// placeVM validates a VM's pool and host, choosing the pool master for a resident VM without
// a host.
func (st *store) placeVM(spec *VMSpec) error {
	p := st.pools[spec.PoolID]
	if p == nil {
		return fmt.Errorf("VM %s: %w", spec.ID, notFound("pool", spec.PoolID))
	}
	if spec.HostID == "" && resident(spec.PowerState) {
		spec.HostID = p.spec.MasterID
		if spec.HostID == "" {
			return fmt.Errorf("VM %s: pool %s has no host to run it", spec.ID, spec.PoolID)
		}
	}
	if spec.HostID != "" {
		h := st.hosts[spec.HostID]
		if h == nil {
			return fmt.Errorf("VM %s: %w", spec.ID, notFound("host", spec.HostID))
		}
		if h.spec.PoolID != spec.PoolID {
			return fmt.Errorf("VM %s: host %s is not in pool %s", spec.ID, spec.HostID, spec.PoolID)
		}
	}
	if spec.AffinityHost != "" && st.hosts[spec.AffinityHost] == nil {
		return fmt.Errorf("VM %s: affinity %w", spec.ID, notFound("host", spec.AffinityHost))
	}
	return nil
}

// UpdateVM changes a VM's spec with fn (ID cannot change). Changing PoolID and HostID moves
// the VM as Migrate does. fn runs under the simulator's lock and must not call the Server.
func (s *Server) UpdateVM(id string, fn func(*VMSpec)) error {
	return s.mutate(func(t *txn) error {
		return s.updateVM(t, id, fn)
	})
}

func (s *Server) updateVM(t *txn, id string, fn func(*VMSpec)) error {
	v := t.st.vms[id]
	if v == nil {
		return notFound("VM", id)
	}
	spec := cloneVMSpec(v.spec)
	fn(&spec)
	spec.ID = v.spec.ID
	if err := spec.normalize(); err != nil {
		return fmt.Errorf("update VM: %w", err)
	}
	if err := t.st.placeVM(&spec); err != nil {
		return fmt.Errorf("update VM: %w", err)
	}
	t.touch(collVM, id)
	if resident(spec.PowerState) && !resident(v.spec.PowerState) {
		v.startTime = s.unix()
	}
	v.spec = spec
	return nil
}

// RemoveVM removes a VM.
func (s *Server) RemoveVM(id string) error {
	return s.mutate(func(t *txn) error {
		if t.st.vms[id] == nil {
			return notFound("VM", id)
		}
		t.touch(collVM, id)
		delete(t.st.vms, id)
		return nil
	})
}

// VM returns a copy of a VM's spec.
func (s *Server) VM(id string) (VMSpec, bool) {
	s.st.mu.RLock()
	defer s.st.mu.RUnlock()
	if v := s.st.vms[id]; v != nil {
		return cloneVMSpec(v.spec), true
	}
	return VMSpec{}, false
}

// GuestSystemUUID returns the DMI system UUID the VM's guest reports (see
// VMSpec.GuestSystemUUID).
func (s *Server) GuestSystemUUID(vmID string) (string, bool) {
	spec, ok := s.VM(vmID)
	if !ok {
		return "", false
	}
	return spec.GuestSystemUUID(), true
}

// SetPowerState changes a VM's power state. A VM that starts (Running or Paused) without a
// host runs on its last host or the pool master; $container becomes that host's uuid, or the
// pool's uuid when the VM is Halted or Suspended (addresses and mainIpAddress then disappear).
func (s *Server) SetPowerState(vmID, state string) error {
	if !slices.Contains(vmPowerStates, state) {
		return fmt.Errorf("set power state of VM %s: invalid power state %q", vmID, state)
	}
	return s.UpdateVM(vmID, func(v *VMSpec) { v.PowerState = state })
}

// Migrate moves a VM to a host. A host of another pool moves the VM to that pool too (XAPI
// keeps the VM uuid across pools). For a VM that is not running it only records the host.
func (s *Server) Migrate(vmID, hostID string) error {
	return s.mutate(func(t *txn) error {
		h := t.st.hosts[hostID]
		if h == nil {
			return fmt.Errorf("migrate VM %s: %w", vmID, notFound("host", hostID))
		}
		return s.updateVM(t, vmID, func(v *VMSpec) {
			v.HostID = hostID
			v.PoolID = h.spec.PoolID
		})
	})
}

// Rename sets the name_label of a VM, host or pool.
func (s *Server) Rename(id, name string) error {
	return s.mutate(func(t *txn) error {
		st := t.st
		switch {
		case st.vms[id] != nil:
			t.touch(collVM, id)
			st.vms[id].spec.NameLabel = name
		case st.hosts[id] != nil:
			t.touch(collHost, id)
			st.hosts[id].spec.NameLabel = name
		case st.pools[id] != nil:
			t.touch(collPool, id)
			st.pools[id].spec.NameLabel = name
		default:
			return notFound("object", id)
		}
		return nil
	})
}

// Resize sets a VM's vCPUs (CPUs.number and CPUs.max) and memory (dynamic min and max, static
// max and memory.size, in bytes). A zero value leaves that part unchanged.
func (s *Server) Resize(vmID string, cpus int, memory int64) error {
	if cpus < 0 || memory < 0 {
		return fmt.Errorf("resize VM %s: negative size", vmID)
	}
	return s.UpdateVM(vmID, func(v *VMSpec) {
		if cpus > 0 {
			v.CPUs, v.CPUsMax = cpus, cpus
		}
		if memory > 0 {
			v.Memory, v.MemoryStaticMax = memory, memory
			v.MemoryStaticMin = min(v.MemoryStaticMin, memory)
		}
	})
}

// SetAddresses replaces the guest agent's addresses of a VM ("0/ipv4/0" → IP); they show
// while the VM runs.
func (s *Server) SetAddresses(vmID string, addresses map[string]string) error {
	return s.UpdateVM(vmID, func(v *VMSpec) {
		v.Addresses = maps.Clone(addresses)
		v.IPs = nil
	})
}

// SetTags replaces the tags of a VM, host or pool.
func (s *Server) SetTags(id string, tags []string) error {
	if err := checkTags(tags); err != nil {
		return fmt.Errorf("set tags of %s: %w", id, err)
	}
	tags = slices.Clone(tags)
	if tags == nil {
		tags = []string{}
	}
	return s.mutate(func(t *txn) error {
		ptr, coll := t.st.tagsOf(id)
		if ptr == nil {
			return notFound("object", id)
		}
		t.touch(coll, id)
		*ptr = tags
		return nil
	})
}

// AddTag adds a tag to a VM, host or pool (no-op when present).
func (s *Server) AddTag(id, tag string) error {
	if tag == "" {
		return fmt.Errorf("add tag to %s: empty tag", id)
	}
	return s.mutate(func(t *txn) error {
		ptr, coll := t.st.tagsOf(id)
		if ptr == nil {
			return notFound("object", id)
		}
		if !slices.Contains(*ptr, tag) {
			t.touch(coll, id)
			*ptr = append(slices.Clone(*ptr), tag)
		}
		return nil
	})
}

// RemoveTag removes a tag from a VM, host or pool (no-op when absent).
func (s *Server) RemoveTag(id, tag string) error {
	return s.mutate(func(t *txn) error {
		ptr, coll := t.st.tagsOf(id)
		if ptr == nil {
			return notFound("object", id)
		}
		if slices.Contains(*ptr, tag) {
			t.touch(coll, id)
			*ptr = slices.DeleteFunc(slices.Clone(*ptr), func(s string) bool { return s == tag })
		}
		return nil
	})
}

func (st *store) tagsOf(id string) (*[]string, collection) {
	switch {
	case st.vms[id] != nil:
		return &st.vms[id].spec.Tags, collVM
	case st.hosts[id] != nil:
		return &st.hosts[id].spec.Tags, collHost
	case st.pools[id] != nil:
		return &st.pools[id].spec.Tags, collPool
	}
	return nil, 0
}

// changeTag serves the REST tag endpoints: it reports false when the object is not visible in
// that collection (XO's 404).
func (s *Server) changeTag(coll collection, id, tag string, add bool) bool {
	found := false
	_ = s.mutate(func(t *txn) error {
		o := t.st.lookup(coll, id)
		if o == nil {
			return nil
		}
		found = true
		ptr, c := t.st.tagsOf(o.id)
		if ptr == nil || c != coll {
			return nil
		}
		has := slices.Contains(*ptr, tag)
		switch {
		case add && !has:
			t.touch(c, o.id)
			*ptr = append(slices.Clone(*ptr), tag)
		case !add && has:
			t.touch(c, o.id)
			*ptr = slices.DeleteFunc(slices.Clone(*ptr), func(s string) bool { return s == tag })
		}
		return nil
	})
	return found
}

// Object returns a deep copy of the XO object (VM, host or pool) as the REST API would show
// it, whether or not its pool is connected.
func (s *Server) Object(id string) (map[string]any, bool) {
	s.st.mu.RLock()
	defer s.st.mu.RUnlock()
	for _, c := range []collection{collVM, collHost, collPool} {
		if o, _ := s.st.current(objKey{c, id}); o != nil {
			v, err := normalizeJSON(o.data)
			if err != nil {
				return nil, false
			}
			m, _ := v.(map[string]any)
			return m, true
		}
	}
	return nil, false
}

// Counts returns how many pools, hosts and VMs the simulator holds (connected or not).
func (s *Server) Counts() (pools, hosts, vms int) {
	s.st.mu.RLock()
	defer s.st.mu.RUnlock()
	return len(s.st.pools), len(s.st.hosts), len(s.st.vms)
}

// --- tokens ----------------------------------------------------------------------------------

// AddToken makes a token valid.
func (s *Server) AddToken(token string) {
	if token == "" {
		return
	}
	s.authMu.Lock()
	defer s.authMu.Unlock()
	s.tokens[token] = struct{}{}
}

// RevokeToken makes a token invalid: later requests with it get 401 (open event streams stay
// open, as in XO).
func (s *Server) RevokeToken(token string) {
	s.authMu.Lock()
	defer s.authMu.Unlock()
	delete(s.tokens, token)
}
