package inventory

import (
	"maps"
	"net/netip"
	"strings"
	"time"
	"unique"

	"k8s.io/utils/clock"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

// Snapshot is an immutable view of one XO server's inventory: a value, which answers every
// question from its own content and, for the questions about time (is it current, has an
// absence lasted the settle time), the time of asking; never from the live inventory. Its
// lookups take no lock and allocate nothing; the objects they return must not be modified.
type Snapshot struct {
	vms    shardedMap[*xo.VM]
	byName shardedMap[[]*xo.VM]
	byAddr shardedMap[[]*xo.VM]
	hosts  map[string]*xo.Host
	pools  map[string]*xo.Pool
	// conn holds, per pool in scope that XO reports connected, since when and since when it
	// is trusted (see PoolTrusted). A pool absent from it is not connected.
	conn map[string]poolConn
	// counted lists the pools whose connection decides completeness: the resolved scope, or
	// every pool of an enabled server entry; countedOK is false when an entry cannot be
	// counted (a disconnected server entry without scope, a scope name never seen).
	counted   []string
	countedOK bool
	// tombs holds the VMs that left the inventory less than the settle time ago, and removed
	// the names and addresses they had, both with when they left.
	tombs   map[string]time.Time
	removed map[string]time.Time
	// lastPools holds, for the VMs that left the inventory, the pool each was in (see LastPool).
	lastPools map[string]string
	// hostNames and poolNames count the hosts and pools of each name.
	hostNames, poolNames map[string]int
	// scope is the pool scope the last listing resolved (nil: every pool).
	scope *scope
	// listedAt is when the listing this snapshot stems from finished.
	listedAt time.Time
	// streamed is set while an event stream keeps the snapshot current: it was up when the
	// listing began, and is still (the inventory publishes a copy without it when the stream
	// ends). What changed while a stream was down is only in a listing.
	streamed bool
	// The server's settings the answers depend on.
	server, region         string
	settleTime, staleAfter time.Duration
	clock                  clock.PassiveClock
	// trustListing trusts the pools up at a listing at once (Options.TrustListing).
	trustListing bool
}

// poolConn is a pool's connection state.
type poolConn struct {
	// since is when the inventory first saw XO show the pool up, its server connected and
	// its pool object there: the listing that showed it so (its start), or the event that
	// brought the object. XO reports a server connected before it loads the pool, then loads
	// its VMs over seconds: while listings show the server connected without the object,
	// since is the start of the last of them, and the first listing or event that shows the
	// object starts it over (the VMs are loading from then on).
	since time.Time
	// trusted is when a full listing that started at least the settle time after since saw
	// the pool and its server connected; zero until then.
	trusted time.Time
}

func emptySnapshot(o Options) *Snapshot {
	return &Snapshot{
		vms: newShardedMap[*xo.VM](0), byName: newShardedMap[[]*xo.VM](0), byAddr: newShardedMap[[]*xo.VM](0),
		hosts: map[string]*xo.Host{}, pools: map[string]*xo.Pool{}, conn: map[string]poolConn{},
		tombs: map[string]time.Time{}, removed: map[string]time.Time{},
		hostNames: map[string]int{}, poolNames: map[string]int{},
		server: o.Name, region: o.Region, settleTime: o.SettleTime, staleAfter: o.StaleAfter, clock: o.Clock,
		trustListing: o.TrustListing,
	}
}

// withStreamed returns s, or a copy of it with streamed set to v.
func (s *Snapshot) withStreamed(v bool) *Snapshot {
	if s.streamed == v {
		return s
	}
	next := *s
	next.streamed = v
	return &next
}

func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}

// Server returns the name of the XO server this snapshot comes from.
func (s *Snapshot) Server() string { return s.server }

// ServerRegion returns the region label value configured for this XO server ("" when none).
func (s *Snapshot) ServerRegion() string { return s.region }

// VM returns the VM with this uuid, or nil.
func (s *Snapshot) VM(id string) *xo.VM { return s.vms.get(lower(id)) }

// VMsByName returns the VMs whose name_label is exactly name.
func (s *Snapshot) VMsByName(name string) []*xo.VM { return s.byName.get(name) }

// VMsByAddress returns the VMs that report this IP address (canonical form).
func (s *Snapshot) VMsByAddress(ip string) []*xo.VM { return s.byAddr.get(ip) }

// Host returns the host with this uuid, or nil.
func (s *Snapshot) Host(id string) *xo.Host { return s.hosts[lower(id)] }

// Pool returns the pool with this uuid, or nil.
func (s *Snapshot) Pool(id string) *xo.Pool { return s.pools[lower(id)] }

// HostNameCount returns how many hosts are named name.
func (s *Snapshot) HostNameCount(name string) int { return s.hostNames[name] }

// PoolNameCount returns how many pools are named name.
func (s *Snapshot) PoolNameCount(name string) int { return s.poolNames[name] }

// PoolConnected reports whether the pool is in scope, XO reports its server connected and
// holds its objects, and the pool is trusted: it has been connected for the settle time and
// a full listing saw it after that. On (re)connection XO reports a server connected before it
// has loaded the pool's objects; until the pool is trusted, a VM missing from it proves
// nothing.
func (s *Snapshot) PoolConnected(poolID string) bool {
	id := lower(poolID)
	return !s.conn[id].trusted.IsZero() && s.pools[id] != nil
}

// PoolUp reports whether the pool is in scope, XO reports its server connected and shows the
// pool: the VMs it shows are XO's current data, trusted or not yet (PoolConnected). Unlike
// their absence, their state needs no settle time.
func (s *Snapshot) PoolUp(poolID string) bool {
	id := lower(poolID)
	_, ok := s.conn[id]
	return ok && s.pools[id] != nil
}

// AbsentSince returns since when the VM has been known to be absent from its pool: when it
// left the inventory, or, for a VM never seen since XO last (re)connected the pool (also one
// XO dropped with the pool), since the listing or event that showed the pool up again. ok is
// false while the pool is not trusted or the VM is present.
//
// The pool's trust is that evidence: a listing begun at least the settle time after the pool
// showed up saw the VM absent, so such a VM's absence counts as soon as the pool is trusted,
// one settle time after that listing, not one more settle time after the trust.
func (s *Snapshot) AbsentSince(vmID, poolID string) (since time.Time, ok bool) {
	if !s.PoolConnected(poolID) || s.VM(vmID) != nil {
		return time.Time{}, false
	}
	since = s.conn[lower(poolID)].since
	if at, ok := s.tombs[lower(vmID)]; ok && at.After(since) {
		since = at
	}
	return since, true
}

// AbsenceWait returns how much longer the VM must stay absent from its pool before its
// absence counts (0: it does); ok is false when its absence cannot be vouched for at all (the
// pool is not trusted, or the VM is present).
func (s *Snapshot) AbsenceWait(vmID, poolID string) (wait time.Duration, ok bool) {
	since, ok := s.AbsentSince(vmID, poolID)
	if !ok {
		return 0, false
	}
	return max(0, s.settleTime-s.clock.Since(since)), true
}

// RemovedRecently reports whether a VM with this name or address left the inventory less
// than the settle time ago: a VM that looks unique by name or address may have had a twin
// that is only gone because XO is dropping its pool.
func (s *Snapshot) RemovedRecently(key string) bool {
	at, ok := s.removed[key]
	return ok && s.clock.Since(at) < s.settleTime
}

// Complete reports whether the snapshot can be trusted to hold every VM in scope: a listing
// succeeded, the data is fresh (the event stream is up and a relist begun after it subscribed
// has succeeded, or the last listing is younger than the staleness limit), and every pool
// that counts is connected and trusted — the pools of the scope when one is set, else the
// pools of every enabled server entry. Matches by name or
// address need it; a VM absent from an incomplete snapshot may simply be in a pool XO cannot
// see.
func (s *Snapshot) Complete() bool {
	if !s.countedOK || !s.Fresh() {
		return false
	}
	for _, id := range s.counted {
		if !s.PoolConnected(id) {
			return false
		}
	}
	return true
}

// Fresh reports whether the snapshot comes from a listing and is current: an event stream
// keeps it so (streamed), or the listing is younger than the staleness limit.
func (s *Snapshot) Fresh() bool {
	return !s.listedAt.IsZero() && (s.streamed || s.clock.Since(s.listedAt) < s.staleAfter)
}

// Synced reports whether the snapshot comes from at least one successful listing.
func (s *Snapshot) Synced() bool { return !s.listedAt.IsZero() }

// Len returns the number of VMs.
func (s *Snapshot) Len() int { return s.vms.len() }

// Settling reports whether a pool XO reports connected is not trusted yet.
func (s *Snapshot) Settling() bool {
	for _, c := range s.conn {
		if c.trusted.IsZero() {
			return true
		}
	}
	return false
}

// nextTrust returns when the earliest connected, untrusted pool whose pool object the snapshot
// holds may become trusted; zero when there is none. A pool XO reports connected without its
// object (still loading, or hidden from the token) cannot become trusted at a listing, and
// each listing that sees it so starts its connection over: it must not make the relist loop
// list again and again. Its object arrives in a listing, or by an event that triggers one.
func (s *Snapshot) nextTrust() time.Time {
	var next time.Time
	for id, c := range s.conn {
		if c.trusted.IsZero() && s.pools[id] != nil {
			if t := c.since.Add(s.settleTime); next.IsZero() || t.Before(next) {
				next = t
			}
		}
	}
	return next
}

// internVM replaces the strings thousands of VMs share (pool and host uuids, power states,
// tags, address keys) with one shared copy each.
func internVM(vm *xo.VM) {
	vm.PowerState, vm.PoolID, vm.Container = intern(vm.PowerState), intern(vm.PoolID), intern(vm.Container)
	for i, t := range vm.Tags {
		vm.Tags[i] = intern(t)
	}
	for i := range vm.Addresses {
		vm.Addresses[i].Key = intern(vm.Addresses[i].Key) // "0/ipv4/0", the same on most VMs
	}
}

func intern(s string) string { return unique.Make(s).Value() }

// vmAddresses returns a VM's distinct, canonical IP addresses.
func vmAddresses(vm *xo.VM) []string {
	var out []string
	add := func(s string) {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return
		}
		c := a.WithZone("").String()
		for _, o := range out {
			if o == c {
				return
			}
		}
		out = append(out, c)
	}
	if vm.MainIPAddress != "" {
		add(vm.MainIPAddress)
	}
	for _, a := range vm.Addresses {
		add(a.IP)
	}
	return out
}

// builder produces the next snapshot from the current one by copy on write: the VM maps copy
// only the shards a change touches, the small maps are copied whole on their first change.
type builder struct {
	s                        *Snapshot
	now                      time.Time
	vms                      *shardedWriter[*xo.VM]
	byName, byAddr           *shardedWriter[[]*xo.VM]
	hostsCopied, poolsCopied bool
	connCopied, tombsCopied  bool
	lastPoolsCopied          bool
}

func newBuilder(base *Snapshot, now time.Time) *builder {
	next := *base
	return &builder{s: &next, now: now, vms: writer(base.vms), byName: writer(base.byName), byAddr: writer(base.byAddr)}
}

// ownBuilder changes s in place: s must not be published yet.
func ownBuilder(s *Snapshot, now time.Time) *builder {
	return &builder{s: s, now: now, vms: ownWriter(s.vms), byName: ownWriter(s.byName), byAddr: ownWriter(s.byAddr),
		hostsCopied: true, poolsCopied: true, connCopied: true, tombsCopied: true}
}

// done returns the next snapshot, without the tombstones older than the settle time.
func (b *builder) done() *Snapshot {
	b.s.vms, b.s.byName, b.s.byAddr = b.vms.m, b.byName.m, b.byAddr.m
	settle := b.s.settleTime
	expired := func(m map[string]time.Time) bool {
		for _, at := range m {
			if b.now.Sub(at) >= settle {
				return true
			}
		}
		return false
	}
	if expired(b.s.tombs) || expired(b.s.removed) {
		b.copyTombs()
		maps.DeleteFunc(b.s.tombs, func(_ string, at time.Time) bool { return b.now.Sub(at) >= settle })
		maps.DeleteFunc(b.s.removed, func(_ string, at time.Time) bool { return b.now.Sub(at) >= settle })
	}
	return b.s
}

func (b *builder) copyTombs() {
	if !b.tombsCopied {
		b.s.tombs, b.s.removed = maps.Clone(b.s.tombs), maps.Clone(b.s.removed)
		b.tombsCopied = true
	}
}

// putVM adds, replaces (vm non-nil) or removes (vm nil) the VM with this id. A removed VM
// leaves a tombstone, with its name and addresses (see RemovedRecently).
func (b *builder) putVM(id string, vm *xo.VM) {
	old := b.vms.get(id)
	if old != nil {
		unindex(b.byName, old.NameLabel, id)
		for _, a := range vmAddresses(old) {
			unindex(b.byAddr, a, id)
		}
	}
	if vm == nil {
		if old != nil {
			b.vms.delete(id)
			b.bury(old)
		}
		return
	}
	if _, ok := b.s.tombs[id]; ok {
		b.copyTombs()
		delete(b.s.tombs, id)
	}
	b.forgetPool(id)
	b.vms.set(id, vm)
	index(b.byName, vm.NameLabel, vm)
	for _, a := range vmAddresses(vm) {
		index(b.byAddr, a, vm)
	}
}

// bury records that vm left the inventory now, and the pool it left from (see LastPool).
func (b *builder) bury(vm *xo.VM) {
	b.copyTombs()
	b.s.tombs[vm.ID] = b.now
	b.recordPool(vm)
	b.s.removed[vm.NameLabel] = b.now
	for _, a := range vmAddresses(vm) {
		b.s.removed[a] = b.now
	}
}

// index appends vm to the entry k without sharing the old slice's array with older snapshots.
func index(w *shardedWriter[[]*xo.VM], k string, vm *xo.VM) {
	old := w.get(k)
	next := make([]*xo.VM, len(old), len(old)+1)
	copy(next, old)
	w.set(k, append(next, vm))
}

// unindex removes the VM with this id from the entry k, as a new slice.
func unindex(w *shardedWriter[[]*xo.VM], k, id string) {
	old := w.get(k)
	next := make([]*xo.VM, 0, len(old))
	for _, v := range old {
		if v.ID != id {
			next = append(next, v)
		}
	}
	if len(next) == 0 {
		w.delete(k)
		return
	}
	w.set(k, next)
}

// count adds d to the count of name in m, dropping it at zero.
func count(m map[string]int, name string, d int) {
	if m[name]+d <= 0 {
		delete(m, name)
		return
	}
	m[name] += d
}

func (b *builder) putHost(id string, h *xo.Host) {
	putNamed(&b.s.hosts, &b.s.hostNames, &b.hostsCopied, id, h, func(h *xo.Host) string { return h.NameLabel })
}

func (b *builder) putPool(id string, p *xo.Pool) {
	putNamed(&b.s.pools, &b.s.poolNames, &b.poolsCopied, id, p, func(p *xo.Pool) string { return p.NameLabel })
}

// putNamed sets objs[id] to v, or deletes it when v is nil, keeping names (how many objects
// have each name) in step. The two maps are cloned first unless copied says the builder has
// its own copies already.
func putNamed[T any](objs *map[string]*T, names *map[string]int, copied *bool, id string, v *T, name func(*T) string) {
	if !*copied {
		*objs, *names = maps.Clone(*objs), maps.Clone(*names)
		*copied = true
	}
	if old := (*objs)[id]; old != nil {
		count(*names, name(old), -1)
	}
	if v == nil {
		delete(*objs, id)
		return
	}
	(*objs)[id] = v
	count(*names, name(v), 1)
}

// disconnect records that XO lost the pool: it is neither connected nor trusted until a
// listing sees it connected again and the settle time has passed.
func (b *builder) disconnect(poolID string) {
	if _, ok := b.s.conn[poolID]; !ok {
		return
	}
	b.copyConn()
	delete(b.s.conn, poolID)
}

// reconnect records that XO shows the object of a pool whose server a listing saw connected
// without it: the pool was still loading until now, so its connection counts from now.
func (b *builder) reconnect(poolID string) {
	if _, ok := b.s.conn[poolID]; !ok {
		return
	}
	b.copyConn()
	b.s.conn[poolID] = poolConn{since: b.now}
}

// copyConn gives the builder its own copy of the connection map before its first change.
func (b *builder) copyConn() {
	if !b.connCopied {
		b.s.conn = maps.Clone(b.s.conn)
		b.connCopied = true
	}
}

// scope is the set of pools an XO server's inventory keeps: nil means every pool.
type scope struct {
	ids map[string]bool
	// list holds the ids, sorted; unresolved the entries no pool matched (names never seen).
	list       []string
	unresolved []string
}

// has reports whether the pool is in scope (always, without a scope).
func (sc *scope) has(poolID string) bool { return sc == nil || sc.ids[lower(poolID)] }

// filter returns the XO filter that lists only the scope's objects: "" without a scope.
func (sc *scope) filter() string {
	if sc == nil {
		return ""
	}
	return xo.PoolFilter(sc.list)
}

// fromListing builds a whole snapshot from a complete listing that started at start and
// ended at at, carrying over from old the connection times and the tombstones.
func fromListing(l *listing, sc *scope, old *Snapshot, start, at time.Time, streamed bool) *Snapshot {
	s := &Snapshot{
		hosts:     make(map[string]*xo.Host, len(l.hosts)),
		pools:     make(map[string]*xo.Pool, len(l.pools)),
		conn:      make(map[string]poolConn, len(l.pools)),
		hostNames: make(map[string]int, len(l.hosts)),
		poolNames: make(map[string]int, len(l.pools)),
		tombs:     make(map[string]time.Time, len(old.tombs)),
		removed:   make(map[string]time.Time, len(old.removed)),
		listedAt:  at,
		streamed:  streamed,
		server:    old.server, region: old.region, settleTime: old.settleTime, staleAfter: old.staleAfter, clock: old.clock,
		trustListing: old.trustListing,
	}
	vms, byName, byAddr := ownWriter(newShardedMap[*xo.VM](len(l.vms))), ownWriter(newShardedMap[[]*xo.VM](len(l.vms))), ownWriter(newShardedMap[[]*xo.VM](len(l.vms)))
	for _, vm := range l.vms {
		vms.set(vm.ID, vm)
		byName.set(vm.NameLabel, append(byName.get(vm.NameLabel), vm))
		for _, a := range vmAddresses(vm) {
			byAddr.set(a, append(byAddr.get(a), vm))
		}
	}
	s.vms, s.byName, s.byAddr = vms.m, byName.m, byAddr.m
	for _, h := range l.hosts {
		s.hosts[h.ID] = h
		count(s.hostNames, h.NameLabel, 1)
	}
	for _, p := range l.pools {
		s.pools[p.ID] = p
		count(s.poolNames, p.NameLabel, 1)
	}

	// Connections: only enabled server entries count; a disabled one is not connected by XO.
	s.countedOK = true
	for _, sv := range l.servers {
		if !sv.IsEnabled() {
			continue
		}
		id := lower(sv.PoolID)
		if sv.Status != xo.ServerConnected || id == "" {
			// XO shows no pool for a disconnected server: without a scope, it may be any pool.
			s.countedOK = s.countedOK && sc != nil
			continue
		}
		if !sc.has(id) {
			continue
		}
		if sc == nil {
			s.counted = append(s.counted, id)
		}
		c := old.conn[id]
		switch {
		case s.pools[id] == nil:
			// XO reports a server connected before it has loaded the pool: the pool is
			// (re)connecting, whether or not a listing saw it disconnected (the whole outage
			// may fall between two listings), so its connection starts over.
			c = poolConn{}
		case old.pools[id] == nil:
			// The first listing to show the object of a pool seen connected without it: XO
			// loaded it at some moment since the last listing and is loading its VMs now, so
			// the connection counts from this listing, as from an event that brings the
			// object (reconnect). The settle time is then the VMs' time to load, and the
			// listing that trusts the pool, begun a settle time later, vouches for their
			// absence (AbsentSince).
			c = poolConn{}
		}
		if c.since.IsZero() {
			c.since = start
		}
		if c.trusted.IsZero() && s.pools[id] != nil && (s.trustListing || !start.Before(c.since.Add(s.settleTime))) {
			c.trusted = start
		}
		s.conn[id] = c
	}
	if sc != nil {
		s.counted = sc.list
		s.countedOK = len(sc.unresolved) == 0
	}

	// Tombstones: those still absent, and the VMs the listing no longer has.
	maps.Copy(s.removed, old.removed)
	for id, t := range old.tombs {
		if s.vms.get(id) == nil {
			s.tombs[id] = t
		}
	}
	b := ownBuilder(s, at)
	for id, vm := range old.vms.all() {
		if s.vms.get(id) == nil {
			if _, ok := s.tombs[id]; !ok {
				b.bury(vm)
			}
		}
	}
	return b.done()
}

// hostIDByName returns the id of a host with this name ("" when none).
func (s *Snapshot) hostIDByName(name string) string {
	for id, h := range s.hosts {
		if h.NameLabel == name {
			return id
		}
	}
	return ""
}

// poolIDByName returns the id of a pool with this name ("" when none).
func (s *Snapshot) poolIDByName(name string) string {
	for id, p := range s.pools {
		if p.NameLabel == name {
			return id
		}
	}
	return ""
}
