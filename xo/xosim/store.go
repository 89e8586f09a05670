package xosim

import (
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

// collection is one of the XAPI object collections the simulator stores.
type collection int

const (
	collVM collection = iota
	collHost
	collPool
	numCollections
)

// xoType is the XO object type of a collection ("type" field, event subscription name).
func (c collection) xoType() string {
	switch c {
	case collVM:
		return "VM"
	case collHost:
		return "host"
	default:
		return "pool"
	}
}

// object is an immutable snapshot of one XO object: data is never modified once published.
type object struct {
	id   string
	data map[string]any
	raw  atomic.Pointer[[]byte]
	// picked caches the last collection entry built for a fields parameter: clients list with
	// the same fields again and again, and objects never change once published.
	picked atomic.Pointer[pickedEntry]
}

type pickedEntry struct {
	key  string
	line []byte
}

// entry returns the cached entry for key, building it with build when missing.
func (o *object) entry(key string, build func() []byte) []byte {
	if e := o.picked.Load(); e != nil && e.key == key {
		return e.line
	}
	line := build()
	o.picked.Store(&pickedEntry{key: key, line: line})
	return line
}

// json returns the compact JSON encoding of the object, computed once.
func (o *object) json() []byte {
	if p := o.raw.Load(); p != nil {
		return *p
	}
	b := marshalCompact(o.data)
	o.raw.Store(&b)
	return b
}

// poolState is a pool and XO's connection to it. XO's view of the pool goes through stages
// (see connection.go): connected is what the /servers entry shows; loaded means XO holds the
// pool object and its hosts; allVMs that it holds every VM of the pool, otherwise only those in
// shown. loaded implies connected and allVMs implies loaded.
type poolState struct {
	spec      PoolSpec
	connected bool
	loaded    bool
	allVMs    bool
	// removed: XO forgot the pool's /servers entry (RemoveServer) until AddServer.
	removed bool
	shown   map[string]struct{}
	// pending lists VMs still to reveal during a staged reconnection, in insertion order.
	pending []string
	created float64
	hosts   map[string]struct{}
	obj     *object
}

// showsVM reports whether XO holds the pool's VM id.
func (p *poolState) showsVM(id string) bool {
	if !p.loaded {
		return false
	}
	if p.allVMs {
		return true
	}
	_, ok := p.shown[id]
	return ok
}

type hostState struct {
	spec     HostSpec
	created  float64
	resident map[string]struct{}
	obj      *object
}

type vmState struct {
	spec      VMSpec
	created   float64
	startTime float64 // unix seconds of the last start while resident
	obj       *object
}

type objKey struct {
	coll collection
	id   string
}

// change is one visible change of an object: exactly one of before and after is nil for
// remove and add; both are set for an update.
type change struct {
	coll          collection
	before, after *object
}

// store holds the simulated XO state. Mutations run in transactions (txn) that rebuild the
// touched objects and compute the visible changes, which the server turns into SSE events
// while still holding the lock, so every stream sees changes in commit order.
type store struct {
	mu    sync.RWMutex
	pools map[string]*poolState
	hosts map[string]*hostState
	vms   map[string]*vmState
	// order keeps insertion order per collection (XO lists objects in the order its index
	// received them); removed ids are skipped and compacted lazily.
	order [numCollections][]string
	// inOrder holds the ids in order, removed ones included until compaction.
	inOrder [numCollections]map[string]struct{}
	// byRef maps _xapiRef to id, since XO's lookup also accepts an OpaqueRef.
	byRef map[string]objKey
	// residentOn maps a resident VM to the host whose resident set holds it.
	residentOn map[string]string
}

func newStore() *store {
	st := &store{
		pools:      map[string]*poolState{},
		hosts:      map[string]*hostState{},
		vms:        map[string]*vmState{},
		byRef:      map[string]objKey{},
		residentOn: map[string]string{},
	}
	for c := range numCollections {
		st.inOrder[c] = map[string]struct{}{}
	}
	return st
}

func xapiRef(id string) string { return "OpaqueRef:" + nameUUID("xosim-ref", id) }

// current returns the current object of a key whatever its visibility, and whether XO holds it
// (its pool is connected and the object loaded).
func (st *store) current(k objKey) (*object, bool) {
	switch k.coll {
	case collVM:
		if v := st.vms[k.id]; v != nil {
			p := st.pools[v.spec.PoolID]
			return v.obj, p != nil && p.showsVM(k.id)
		}
	case collHost:
		if h := st.hosts[k.id]; h != nil {
			return h.obj, st.poolLoaded(h.spec.PoolID)
		}
	case collPool:
		if p := st.pools[k.id]; p != nil {
			return p.obj, p.loaded
		}
	}
	return nil, false
}

// poolLoaded reports whether XO holds the pool object and its hosts.
func (st *store) poolLoaded(id string) bool {
	p := st.pools[id]
	return p != nil && p.loaded
}

// visible returns the object of a key as XO shows it: nil when missing or when XO does not
// hold it (pool disconnected or still loading).
func (st *store) visible(k objKey) *object {
	o, ok := st.current(k)
	if !ok {
		return nil
	}
	return o
}

// lookup finds a visible object by id or _xapiRef. Caller holds at least the read lock.
func (st *store) lookup(coll collection, id string) *object {
	if o := st.visible(objKey{coll, id}); o != nil {
		return o
	}
	if k, ok := st.byRef[id]; ok && k.coll == coll {
		return st.visible(k)
	}
	return nil
}

// list returns the visible objects of a collection in insertion order.
func (st *store) list(coll collection) []*object {
	ids := st.order[coll]
	out := make([]*object, 0, len(ids))
	for _, id := range ids {
		if o := st.visible(objKey{coll, id}); o != nil {
			out = append(out, o)
		}
	}
	return out
}

func (st *store) size(coll collection) int {
	switch coll {
	case collVM:
		return len(st.vms)
	case collHost:
		return len(st.hosts)
	}
	return len(st.pools)
}

func (st *store) appendOrder(coll collection, id string) {
	// An id removed and added again since the last compaction moves to the end, as a key
	// deleted and set again does in XO's index.
	if _, stale := st.inOrder[coll][id]; stale {
		st.order[coll] = slices.DeleteFunc(st.order[coll], func(x string) bool { return x == id })
	}
	st.order[coll] = append(st.order[coll], id)
	st.inOrder[coll][id] = struct{}{}
}

// compactOrder drops removed ids once they make up most of the order slice.
func (st *store) compactOrder(coll collection) {
	ids := st.order[coll]
	if len(ids) < 64 || len(ids) < 2*st.size(coll) {
		return
	}
	out := ids[:0]
	for _, id := range ids {
		if st.exists(coll, id) {
			out = append(out, id)
		} else {
			delete(st.inOrder[coll], id)
		}
	}
	clear(ids[len(out):])
	st.order[coll] = out
}

func (st *store) exists(coll collection, id string) bool {
	switch coll {
	case collVM:
		return st.vms[id] != nil
	case collHost:
		return st.hosts[id] != nil
	}
	return st.pools[id] != nil
}

// --- transactions ----------------------------------------------------------------------------

// txn collects the keys a mutation touches, with the object each showed before.
type txn struct {
	st      *store
	touched []objKey
	before  map[objKey]*object
}

func (st *store) begin() *txn {
	return &txn{st: st, before: map[objKey]*object{}}
}

// touch records k as changed; call it before modifying the state behind k.
func (t *txn) touch(coll collection, id string) {
	k := objKey{coll, id}
	if _, ok := t.before[k]; ok {
		return
	}
	t.before[k] = t.st.visible(k)
	t.touched = append(t.touched, k)
}

// touchPoolContents touches a pool, its hosts and its VMs (VMs first, then hosts, then the
// pool, the order XO's events come in when a pool goes away).
func (t *txn) touchPoolContents(poolID string) {
	t.touchVMsOf(poolID)
	t.touchHostsOf(poolID)
	t.touch(collPool, poolID)
}

// touchVMsOf touches the VMs of a pool in insertion order.
func (t *txn) touchVMsOf(poolID string) {
	for _, id := range t.st.order[collVM] {
		if v := t.st.vms[id]; v != nil && v.spec.PoolID == poolID {
			t.touch(collVM, id)
		}
	}
}

// touchHostsOf touches the hosts of a pool in insertion order.
func (t *txn) touchHostsOf(poolID string) {
	for _, id := range t.st.order[collHost] {
		if h := t.st.hosts[id]; h != nil && h.spec.PoolID == poolID {
			t.touch(collHost, id)
		}
	}
}

// commit rebuilds the touched objects and returns the visible changes in touch order.
// Rebuilding may touch more objects (a VM's host, a host's pool), so it runs in rounds.
func (t *txn) commit() []change {
	st := t.st
	// Derived relations first: hosts' resident VMs and pools' hosts.
	for _, k := range t.touched {
		if k.coll == collVM {
			st.reindexVM(t, k.id)
		}
	}
	for i := 0; i < len(t.touched); i++ {
		if k := t.touched[i]; k.coll == collHost {
			if h := st.hosts[k.id]; h != nil {
				t.touch(collPool, h.spec.PoolID)
			}
		}
	}
	// Build VMs, then hosts, then pools: pools read their hosts and hosts their VMs.
	for _, coll := range []collection{collVM, collHost, collPool} {
		for _, k := range t.touched {
			if k.coll == coll {
				st.rebuild(k)
			}
		}
	}
	var changes []change
	for _, k := range t.touched {
		before := t.before[k]
		after := st.visible(k)
		switch {
		case before == nil && after == nil:
		case before == nil:
			changes = append(changes, change{coll: k.coll, after: after})
		case after == nil:
			changes = append(changes, change{coll: k.coll, before: before})
		case before != after:
			changes = append(changes, change{coll: k.coll, before: before, after: after})
		}
	}
	for c := range numCollections {
		st.compactOrder(c)
	}
	return changes
}

// reindexVM keeps the hosts' resident sets in line with a VM's state, touching the hosts whose
// set changes.
func (st *store) reindexVM(t *txn, id string) {
	v := st.vms[id]
	newHost := ""
	if v != nil && resident(v.spec.PowerState) {
		newHost = v.spec.HostID
	}
	old := st.residentOn[id]
	if old == newHost {
		return
	}
	if h := st.hosts[old]; h != nil {
		t.touch(collHost, old)
		delete(h.resident, id)
	}
	delete(st.residentOn, id)
	if h := st.hosts[newHost]; h != nil {
		t.touch(collHost, newHost)
		h.resident[id] = struct{}{}
		st.residentOn[id] = newHost
	}
}

// rebuild recomputes the object of k from its state; an unchanged object keeps its snapshot.
func (st *store) rebuild(k objKey) {
	var (
		old  *object
		data map[string]any
		set  func(*object)
	)
	switch k.coll {
	case collVM:
		v := st.vms[k.id]
		if v == nil {
			return
		}
		old, data, set = v.obj, st.buildVM(v), func(o *object) { v.obj = o }
	case collHost:
		h := st.hosts[k.id]
		if h == nil {
			return
		}
		old, data, set = h.obj, st.buildHost(h), func(o *object) { h.obj = o }
	case collPool:
		p := st.pools[k.id]
		if p == nil {
			return
		}
		old, data, set = p.obj, st.buildPool(p), func(o *object) { p.obj = o }
	}
	if old != nil && reflect.DeepEqual(old.data, data) {
		return
	}
	ref, _ := data["_xapiRef"].(string)
	st.byRef[ref] = k
	set(&object{id: k.id, data: data})
}

// --- object builders -------------------------------------------------------------------------

func strList(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func strMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func mergeExtra(data, extra map[string]any) {
	for k, v := range extra {
		data[k] = v
	}
}

// mainIPAddress is XO's extractIpFromVmNetworks: the first IPv4 key in sorted order, else the
// first IPv6 one.
func mainIPAddress(addresses map[string]string) string {
	keys := make([]string, 0, len(addresses))
	for k := range addresses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ipv6 := ""
	for _, k := range keys {
		if isIPv4Key(k) {
			return addresses[k]
		}
		if ipv6 == "" && isIPv6Key(k) {
			ipv6 = addresses[k]
		}
	}
	return ipv6
}

// isIPv4Key matches /^\d+\/ip(?:v4\/\d+)?$/.
func isIPv4Key(k string) bool {
	n, rest := leadingDigits(k)
	if n == 0 || len(rest) < 3 || rest[:3] != "/ip" {
		return false
	}
	rest = rest[3:]
	if rest == "" {
		return true
	}
	if !strings.HasPrefix(rest, "v4/") {
		return false
	}
	m, tail := leadingDigits(rest[3:])
	return m > 0 && tail == ""
}

// isIPv6Key matches /^\d+\/ipv6\/\d+$/.
func isIPv6Key(k string) bool {
	n, rest := leadingDigits(k)
	if n == 0 || len(rest) < 6 || rest[:6] != "/ipv6/" {
		return false
	}
	m, tail := leadingDigits(rest[6:])
	return m > 0 && tail == ""
}

func leadingDigits(s string) (int, string) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i, s[i:]
}

func (st *store) buildVM(v *vmState) map[string]any {
	s := &v.spec
	running := resident(s.PowerState)
	container := s.PoolID
	if running {
		container = s.HostID
	}
	addresses := map[string]any{}
	var osVersion any
	var startTime any
	if running {
		addresses = strMap(s.Addresses)
		if s.OSVersion != nil {
			osVersion = strMap(s.OSVersion)
		}
		startTime = v.startTime
	}
	memory := map[string]any{
		"dynamic": []any{float64(s.Memory), float64(s.Memory)},
		"static":  []any{float64(s.MemoryStaticMin), float64(s.MemoryStaticMax)},
		"size":    float64(s.Memory),
	}
	if running && s.MemoryUsage > 0 {
		memory["usage"] = float64(s.MemoryUsage)
	}
	boot := map[string]any{}
	if s.VirtualizationMode == "hvm" {
		boot = map[string]any{"firmware": s.Firmware, "order": "cd"}
	}
	agent := running && (len(s.Addresses) > 0 || s.OSVersion != nil)
	d := map[string]any{
		"type":               "VM",
		"id":                 s.ID,
		"uuid":               s.ID,
		"name_label":         s.NameLabel,
		"name_description":   s.NameDescription,
		"power_state":        s.PowerState,
		"CPUs":               map[string]any{"max": float64(s.CPUsMax), "number": float64(s.CPUs)},
		"memory":             memory,
		"tags":               strList(s.Tags),
		"addresses":          addresses,
		"os_version":         osVersion,
		"virtualizationMode": s.VirtualizationMode,
		"boot":               boot,
		"bios_strings": map[string]any{
			"bios-vendor":          "Xen",
			"system-manufacturer":  "Xen",
			"system-product-name":  "HVM domU",
			"system-serial-number": "",
		},
		"other":                   strMap(s.Other),
		"xenStoreData":            map[string]any{"vm-data": ""},
		"auto_poweron":            false,
		"high_availability":       "",
		"blockedOperations":       map[string]any{},
		"current_operations":      map[string]any{},
		"creation":                map[string]any{},
		"VIFs":                    []any{nameUUID("xosim-vif", s.ID)},
		"$VBDs":                   []any{nameUUID("xosim-vbd", s.ID)},
		"snapshots":               []any{},
		"VGPUs":                   []any{},
		"$VGPUs":                  []any{},
		"VTPMs":                   []any{},
		"startDelay":              float64(0),
		"startTime":               startTime,
		"installTime":             v.created,
		"expNestedHvm":            false,
		"isNestedVirtEnabled":     false,
		"hasVendorDevice":         false,
		"isFirmwareSupported":     true,
		"needsVtpm":               false,
		"secureBoot":              false,
		"viridian":                false,
		"pvDriversDetected":       agent,
		"managementAgentDetected": agent,
		"vulnerabilities":         map[string]any{"xsa468": false},
		"$container":              container,
		"$pool":                   s.PoolID,
		"$poolId":                 s.PoolID,
		"_xapiRef":                xapiRef(s.ID),
	}
	if running {
		if ip := mainIPAddress(s.Addresses); ip != "" {
			d["mainIpAddress"] = ip
		}
	}
	if s.CoresPerSocket > 0 {
		d["coresPerSocket"] = float64(s.CoresPerSocket)
	}
	if s.AffinityHost != "" {
		d["affinityHost"] = s.AffinityHost
	}
	mergeExtra(d, s.Extra)
	return d
}

func (st *store) buildHost(h *hostState) map[string]any {
	s := &h.spec
	dom0 := nameUUID("xosim-dom0", s.ID)
	residents := make([]string, 0, len(h.resident))
	for id := range h.resident {
		residents = append(residents, id)
	}
	slices.Sort(residents)
	residentVMs := make([]any, 0, len(residents)+1)
	residentVMs = append(residentVMs, dom0)
	for _, id := range residents {
		residentVMs = append(residentVMs, id)
	}
	d := map[string]any{
		"type":             "host",
		"id":               s.ID,
		"uuid":             s.ID,
		"name_label":       s.NameLabel,
		"name_description": s.NameDescription,
		"hostname":         s.Hostname,
		"address":          s.Address,
		"power_state":      s.PowerState,
		"enabled":          !s.Disabled,
		"productBrand":     s.ProductBrand,
		"version":          s.Version,
		"build":            s.Version,
		"cpus":             map[string]any{"cores": float64(s.Cores), "sockets": float64(s.Sockets)},
		"CPUs": map[string]any{
			"cpu_count":    itoa(s.Cores),
			"socket_count": itoa(s.Sockets),
			"vendor":       "GenuineIntel",
			"modelname":    "Intel(R) Xeon(R) CPU (simulated)",
		},
		"memory":             map[string]any{"size": float64(s.MemorySize), "usage": float64(s.MemoryUsage)},
		"residentVms":        residentVMs,
		"controlDomain":      dom0,
		"tags":               strList(s.Tags),
		"otherConfig":        strMap(s.OtherConfig),
		"bios_strings":       map[string]any{},
		"chipset_info":       map[string]any{"iommu": true},
		"current_operations": map[string]any{},
		"hvmCapable":         true,
		"iscsiIqn":           "iqn.2024-01.org.xcp-ng:" + s.ID[:8],
		"license_expiry":     nil,
		"license_params":     map[string]any{},
		"license_server":     map[string]any{},
		"logging":            map[string]any{},
		"multipathing":       false,
		"patches":            []any{},
		"powerOnMode":        "",
		"rebootRequired":     false,
		"startTime":          h.created,
		"agentStartTime":     h.created,
		"supplementalPacks":  []any{},
		"zstdSupported":      true,
		"PIFs":               []any{nameUUID("xosim-pif", s.ID)},
		"$PIFs":              []any{nameUUID("xosim-pif", s.ID)},
		"PCIs":               []any{},
		"$PCIs":              []any{},
		"PGPUs":              []any{},
		"$PGPUs":             []any{},
		"$PBDs":              []any{nameUUID("xosim-pbd", s.ID)},
		"$pool":              s.PoolID,
		"$poolId":            s.PoolID,
		"_xapiRef":           xapiRef(s.ID),
	}
	mergeExtra(d, s.Extra)
	return d
}

func (st *store) buildPool(p *poolState) map[string]any {
	s := &p.spec
	cores, sockets := 0, 0
	for hid := range p.hosts {
		if h := st.hosts[hid]; h != nil {
			cores += h.spec.Cores
			sockets += h.spec.Sockets
		}
	}
	name := s.NameLabel
	if name == "" {
		if m := st.hosts[s.MasterID]; m != nil {
			name = m.spec.NameLabel
		}
	}
	d := map[string]any{
		"type":                         "pool",
		"id":                           s.ID,
		"uuid":                         s.ID,
		"name_label":                   name,
		"name_description":             s.NameDescription,
		"master":                       s.MasterID,
		"tags":                         strList(s.Tags),
		"default_SR":                   nameUUID("xosim-sr", s.ID),
		"HA_enabled":                   false,
		"haRebootVmOnInternalShutdown": true,
		"haSrs":                        []any{},
		"auto_poweron":                 false,
		"cpus":                         map[string]any{"cores": float64(cores), "sockets": float64(sockets)},
		"current_operations":           map[string]any{},
		"platform_version":             "3.4.0",
		"otherConfig":                  strMap(s.OtherConfig),
		"vtpmSupported":                true,
		"zstdSupported":                true,
		"$pool":                        s.ID,
		"$poolId":                      s.ID,
		"_xapiRef":                     xapiRef(s.ID),
	}
	mergeExtra(d, s.Extra)
	return d
}

// buildServer is the /rest/v0/servers entry of a pool. As in XO (xen-servers.mjs), poolId and
// master are only present while the pool is connected.
func (st *store) buildServer(p *poolState) map[string]any {
	s := &p.spec
	label := s.ServerLabel
	if label == "" {
		label = s.NameLabel
	}
	host := s.ServerHost
	if host == "" {
		if m := st.hosts[s.MasterID]; m != nil && m.spec.Address != "" {
			host = m.spec.Address
		} else {
			host = label
		}
	}
	status := xo.ServerDisconnected
	if p.connected {
		status = xo.ServerConnected
	}
	d := map[string]any{
		"id":                  s.ServerID,
		"label":               label,
		"host":                host,
		"username":            "root",
		"allowUnauthorized":   false,
		"readOnly":            false,
		"enabled":             !s.ServerDisabled,
		"status":              status,
		"poolNameLabel":       s.NameLabel,
		"poolNameDescription": s.NameDescription,
	}
	if p.connected {
		d["poolId"] = s.ID
		if s.MasterID != "" {
			d["master"] = s.MasterID
		}
	}
	return d
}

func itoa(n int) string {
	return string(appendNumber(nil, float64(n)))
}
