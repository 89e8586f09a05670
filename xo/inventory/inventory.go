// Package inventory keeps an in-memory copy of XO's VMs, hosts, pools and pool connections,
// current through XO's event stream and periodic relists, and tells subscribers what changed.
// Lookups read an immutable snapshot: no lock, no allocation, no XO call.
package inventory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// Source is what the inventory needs from XO; *xo.Client implements it.
type Source interface {
	ListVMs(ctx context.Context, filter string, fn func(*xo.VM)) error
	ListHosts(ctx context.Context, filter string, fn func(*xo.Host)) error
	ListPools(ctx context.Context, fn func(*xo.Pool)) error
	ListServers(ctx context.Context, fn func(*xo.Server)) error
	Watch(ctx context.Context, o xo.WatchOptions, fn func(xo.Event)) error
}

// Options configures an Inventory. Zero values take the defaults.
type Options struct {
	// Name names the XO server in metrics and logs. Default "xo".
	Name string
	// Region is the server's region label value, for topology.region "server" ("" when none).
	Region string
	// Pools is the pool scope: uuids or exact names of the pools that host Nodes. Other pools
	// are not listed, not held, and do not count for completeness. Empty: every pool.
	Pools []string
	// SettleTime is how long a (re)connected pool must stay up (its server connected, its
	// pool object shown), and then be seen in a full listing, before a VM missing from it is
	// taken as absent; and how long a VM's absence must last before it counts: from when it
	// left the inventory, or, for a VM XO dropped with the pool or never showed, from when the
	// pool showed up again (see Snapshot.AbsentSince). Default 30s.
	SettleTime time.Duration
	// ResyncPeriod is the full relist period while the event stream works. Default 10m.
	ResyncPeriod time.Duration
	// PollPeriod is the relist period without an event stream. Default 30s.
	PollPeriod time.Duration
	// StaleAfter is the age past which a listing no longer counts as current, unless the event
	// stream is up and was relisted after it subscribed. Default 3m.
	StaleAfter time.Duration
	// StreamIdleTimeout breaks an event stream that sends nothing (XO pings every 30 s).
	// Default 75s.
	StreamIdleTimeout time.Duration
	// DisableEventStream makes the inventory rely on relists only.
	DisableEventStream bool
	// TrustListing makes the pools a listing shows up (their server connected, their pool
	// object shown) trusted at once, without the settle time a running controller waits
	// after their (re)connection: for `check` and `explain`, which list XO once and answer
	// for replicas that have run longer (whose pools still settling their metrics show). The
	// absence of a VM still counts from that listing (Snapshot.AbsenceWait).
	TrustListing bool
	Clock        clock.WithTicker
	Log          logr.Logger
}

// ChangeKind says what kind of object changed.
type ChangeKind int

const (
	// VMChanged: a VM was added, changed or removed.
	VMChanged ChangeKind = iota + 1
	// HostChanged: a host was added, changed or removed.
	HostChanged
	// PoolChanged: a pool was added, changed or removed, or its connection changed.
	PoolChanged
)

// Change names one object that changed.
type Change struct {
	Kind ChangeKind
	ID   string
}

// Inventory is XO's inventory in memory. Start runs it; it needs no leader election.
type Inventory struct {
	src  Source
	opts Options
	log  logr.Logger

	snap atomic.Pointer[Snapshot]

	// mu serializes writers: event application and the end of a relist.
	mu sync.Mutex
	// relistMu makes relists run one at a time, so that the snapshot a Relist stores comes from
	// a listing begun after every earlier Relist returned, and touched belongs to one relist.
	// The inventory's own loop is the only caller in production; the tests relist beside it.
	relistMu sync.Mutex
	// touched holds the objects changed by events since the running relist began (nil when no
	// relist runs): the relist keeps their newer state.
	touched map[Change]struct{}

	handlersMu sync.RWMutex
	handlers   []func(Change)

	streaming atomic.Bool
	// subscriptions counts the event stream's subscriptions. The stream keeps the inventory
	// current (Snapshot.streamed) only once a relist begun after its subscription has
	// succeeded: what changed while it was down is only in a listing.
	subscriptions atomic.Uint64

	lastErr atomic.Pointer[errBox]
	// first holds, from the first successful listing on, the pools it showed connected with
	// their pool object, each with its connection time then; firstSettled is set once they
	// are all trusted or gone (see Settling).
	first        atomic.Pointer[map[string]time.Time]
	firstSettled atomic.Bool
	synced       chan struct{}
	syncOnce     sync.Once
	relistNow    chan struct{}
	// backoff spaces the retries of failed relists and of a broken event stream.
	backoff workqueue.TypedRateLimiter[string]

	// scopeIDs remembers the pool uuid a scope name resolved to, so that a pool keeps
	// counting while it is disconnected (XO then lists neither the pool nor its name).
	scopeMu  sync.Mutex
	scopeIDs map[string][]string
	metrics  *metricSet
}

type errBox struct{ err error }

// New returns an Inventory reading from src.
func New(src Source, o Options) *Inventory {
	if o.ResyncPeriod <= 0 {
		o.ResyncPeriod = 10 * time.Minute
	}
	if o.PollPeriod <= 0 {
		o.PollPeriod = 30 * time.Second
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = 3 * time.Minute
	}
	if o.StreamIdleTimeout <= 0 {
		o.StreamIdleTimeout = 75 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Name == "" {
		o.Name = "xo"
	}
	if o.SettleTime <= 0 {
		o.SettleTime = 30 * time.Second
	}
	inv := &Inventory{
		src: src, opts: o, log: o.Log.WithValues("server", o.Name), synced: make(chan struct{}), relistNow: make(chan struct{}, 1),
		backoff:  workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBase, retryMax),
		scopeIDs: map[string][]string{}, metrics: newMetricSet(o.Name, o.StaleAfter),
	}
	inv.snap.Store(emptySnapshot(o))
	return inv
}

// Snapshot returns the current snapshot.
func (i *Inventory) Snapshot() *Snapshot { return i.snap.Load() }

// Name returns the XO server's name.
func (i *Inventory) Name() string { return i.opts.Name }

// Synced is closed after the first successful listing.
func (i *Inventory) Synced() <-chan struct{} { return i.synced }

// HasSynced reports whether a listing has succeeded.
func (i *Inventory) HasSynced() bool {
	select {
	case <-i.synced:
		return true
	default:
		return false
	}
}

// Streaming reports whether the event stream is up.
func (i *Inventory) Streaming() bool { return i.streaming.Load() }

// LastError returns the error of the last refresh, nil if it succeeded.
func (i *Inventory) LastError() error {
	if b := i.lastErr.Load(); b != nil {
		return b.err
	}
	return nil
}

// AddHandler registers fn to be told of every change. fn runs on the inventory's goroutine
// and must not block (typically it enqueues).
func (i *Inventory) AddHandler(fn func(Change)) {
	i.handlersMu.Lock()
	defer i.handlersMu.Unlock()
	i.handlers = append(i.handlers, fn)
}

// NeedLeaderElection tells controller-runtime's manager that every replica runs the
// inventory: the webhook serves from it on all of them.
func (i *Inventory) NeedLeaderElection() bool { return false }

// ReadyCheck is a healthz checker: ready once a listing has succeeded and the pools of the
// first one are settled, unless the server is in trouble (see SettleCheck).
func (i *Inventory) ReadyCheck(_ any) error {
	if !i.HasSynced() {
		return errors.New("XO inventory not synced yet")
	}
	return i.SettleCheck()
}

// Start lists XO and keeps the inventory current until ctx ends.
func (i *Inventory) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	if !i.opts.DisableEventStream {
		wg.Add(1)
		go func() { defer wg.Done(); i.streamLoop(ctx) }()
	} else {
		i.trigger()
	}
	i.relistLoop(ctx)
	wg.Wait()
	return nil
}

func (i *Inventory) trigger() {
	select {
	case i.relistNow <- struct{}{}:
	default:
	}
}

// relistLoop relists on demand, on a timer, and after failures with backoff.
func (i *Inventory) relistLoop(ctx context.Context) {
	var retry time.Duration // the backoff after the last relist failed; 0 after a success
	for {
		var wait time.Duration
		switch {
		case retry > 0:
			wait = retry
		case i.streaming.Load():
			wait = i.opts.ResyncPeriod
		default:
			wait = i.opts.PollPeriod
		}
		if !i.HasSynced() && retry == 0 && i.opts.DisableEventStream {
			wait = 0
		}
		// A pool that (re)connected becomes trusted at the first listing after its settle time,
		// once XO shows its pool object (nextTrust leaves out the pools without one).
		if next := i.Snapshot().nextTrust(); !next.IsZero() && retry == 0 {
			wait = min(wait, max(0, next.Sub(i.opts.Clock.Now()))+10*time.Millisecond)
		}
		t := i.opts.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-i.relistNow:
			t.Stop()
		case <-t.C():
		}
		if err := i.Relist(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			retry = min(i.backoff.When(relistKey), i.opts.PollPeriod)
			i.logRelistFailure(err, retry)
			continue
		}
		i.backoff.Forget(relistKey)
		retry = 0
	}
}

// The inventory's one retry policy, for its relists and its event stream alike: 1 s after the
// first failure, doubling with each failure in a row, at most a minute (a relist at most
// PollPeriod); a success starts over.
const (
	retryBase = time.Second
	retryMax  = time.Minute
	// The backoff's keys: the relist loop's and the event stream's failures count apart.
	relistKey = "relist"
	streamKey = "stream"
)

// logRelistFailure logs a failed relist in one line: the cause, what the inventory keeps (the
// last listing and its age, or nothing yet) and when the next attempt is.
func (i *Inventory) logRelistFailure(err error, retryIn time.Duration) {
	kept := "nothing: XO has not been listed yet"
	if at := i.Snapshot().listedAt; !at.IsZero() {
		kept = "the listing of " + i.opts.Clock.Since(at).Round(time.Second).String() + " ago"
	}
	i.log.Error(err, "XO relist failed", "keeping", kept, "retryIn", retryIn)
}

// streamLoop keeps XO's event stream open, falling back to relists when the server has none.
func (i *Inventory) streamLoop(ctx context.Context) {
	for ctx.Err() == nil {
		connected := false
		err := i.src.Watch(ctx, xo.WatchOptions{
			IdleTimeout: i.opts.StreamIdleTimeout,
			Ready: func() {
				connected = true
				i.backoff.Forget(streamKey)
				i.subscriptions.Add(1)
				i.streaming.Store(true)
				i.metrics.streamUp.Set(1)
				i.log.V(1).Info("XO event stream subscribed")
				// Relist now: whatever changed before the subscription is in the listing,
				// whatever changes after it arrives as an event.
				i.trigger()
			},
		}, i.apply)
		i.streaming.Store(false)
		i.mu.Lock()
		i.snap.Store(i.snap.Load().withStreamed(false))
		i.mu.Unlock()
		i.metrics.streamUp.Set(0)
		if ctx.Err() != nil {
			return
		}
		var wait time.Duration
		if errors.Is(err, xo.ErrNoEventStream) {
			i.log.Info("XO has no event stream; relisting periodically", "period", i.opts.PollPeriod)
			wait = i.opts.ResyncPeriod
			i.trigger()
		} else {
			wait = i.backoff.When(streamKey)
			i.log.Error(err, "XO event stream broken; relisting", "connected", connected, "retryIn", wait)
			i.metrics.streamBreaks.Inc()
			// Changes made while the stream was down are only in a listing.
			i.trigger()
		}
		t := i.opts.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// listing is the raw result of one complete relist.
type listing struct {
	vms     []*xo.VM
	hosts   []*xo.Host
	pools   []*xo.Pool
	servers []*xo.Server
}

// Relist lists every collection and replaces the snapshot, keeping objects that events changed
// meanwhile. A failed or partial listing changes nothing. With a pool scope, hosts and VMs are
// listed for the scope's pools only.
func (i *Inventory) Relist(ctx context.Context) error {
	i.relistMu.Lock()
	defer i.relistMu.Unlock()
	start := i.opts.Clock.Now()
	subscriptions := i.subscriptions.Load()
	i.mu.Lock()
	i.touched = map[Change]struct{}{}
	i.mu.Unlock()

	l := &listing{}
	var sc *scope
	err := i.src.ListServers(ctx, func(s *xo.Server) { l.servers = append(l.servers, s) })
	if err == nil {
		err = i.src.ListPools(ctx, func(p *xo.Pool) { p.ID = lower(p.ID); l.pools = append(l.pools, p) })
	}
	if err == nil {
		sc = i.resolveScope(l.pools)
		l.pools = slices.DeleteFunc(l.pools, func(p *xo.Pool) bool { return !sc.has(p.ID) })
	}
	// A scope whose pools are all unknown lists nothing rather than everything.
	emptyScope := sc != nil && len(sc.list) == 0
	if err == nil && !emptyScope {
		err = i.src.ListHosts(ctx, sc.filter(), func(h *xo.Host) { h.ID = lower(h.ID); l.hosts = append(l.hosts, h) })
	}
	if err == nil && !emptyScope {
		l.vms = make([]*xo.VM, 0, i.Snapshot().Len())
		err = i.src.ListVMs(ctx, sc.filter(), func(v *xo.VM) { v.ID = lower(v.ID); internVM(v); l.vms = append(l.vms, v) })
	}
	if err != nil {
		i.mu.Lock()
		i.touched = nil
		i.mu.Unlock()
		i.lastErr.Store(&errBox{err})
		i.metrics.relists.WithLabelValues(i.opts.Name, "error").Inc()
		return fmt.Errorf("relist %s: %w", i.opts.Name, err)
	}

	i.mu.Lock()
	old := i.snap.Load()
	// A stale inventory that this listing makes current again (judged before it counts); the
	// first listing needs no such announcement: diff names everything it holds.
	wasStale := !old.listedAt.IsZero() && !old.Fresh()
	now := i.opts.Clock.Now()
	// The stream keeps the listing current if it subscribed before the listing began and has
	// stayed up since (its end publishes a copy without streamed, under mu).
	streamed := i.streaming.Load() && i.subscriptions.Load() == subscriptions
	next := fromListing(l, sc, old, start, now, streamed)
	carryLastPools(next, old)
	// Events newer than the listing win over it.
	if len(i.touched) > 0 {
		b := ownBuilder(next, now)
		for ch := range i.touched {
			switch id := ch.ID; ch.Kind {
			case VMChanged:
				b.putVM(id, old.vms.get(id))
			case HostChanged:
				b.putHost(id, old.hosts[id])
			case PoolChanged:
				b.putPool(id, old.pools[id])
				if _, ok := old.conn[id]; !ok {
					b.disconnect(id)
				}
			}
		}
		next = b.done()
	}
	next.scope = sc
	if i.first.Load() == nil {
		i.first.Store(firstPools(next))
	}
	i.touched = nil
	i.snap.Store(next)
	i.mu.Unlock()

	i.lastErr.Store(nil)
	i.metrics.observeRelist(next, i.opts.Clock.Since(start))
	i.syncOnce.Do(func() { close(i.synced) })
	i.log.V(1).Info("XO inventory relisted", "vms", next.vms.len(), "hosts", len(next.hosts), "pools", len(next.pools), "complete", next.Complete())
	changes := diff(old, next)
	if wasStale {
		changes = append(changes, current(next, changes)...)
	}
	i.notify(changes)
	return nil
}

// current returns a PoolChanged for each pool of next that changes does not name already: the
// inventory was stale (no listing for the staleness limit, or an event stream not vouched for
// by a listing) and is current again. Its objects may be unchanged, but a controller does not
// act on a stale inventory's power states and absences (View.CurrentVM, Snapshot.Complete):
// what it put off is to be done now, not at its next periodic look.
func current(next *Snapshot, changes []Change) []Change {
	var out []Change
	for id := range next.pools {
		if !slices.Contains(changes, Change{Kind: PoolChanged, ID: id}) {
			out = append(out, Change{Kind: PoolChanged, ID: id})
		}
	}
	return out
}

// resolveScope turns the configured pool scope into pool uuids: a uuid stands for itself, a
// name for the pools listed with that name now, or, for a pool XO does not list (it is
// disconnected), the uuid it had when last seen. Names never seen are reported.
func (i *Inventory) resolveScope(pools []*xo.Pool) *scope {
	if len(i.opts.Pools) == 0 {
		return nil
	}
	i.scopeMu.Lock()
	defer i.scopeMu.Unlock()
	sc := &scope{ids: map[string]bool{}}
	for _, entry := range i.opts.Pools {
		if id, ok := node.NormalizeUUID(entry); ok {
			sc.ids[id] = true
			continue
		}
		var ids []string
		for _, p := range pools {
			if p.NameLabel == entry {
				ids = append(ids, p.ID)
			}
		}
		if len(ids) > 0 {
			i.scopeIDs[entry] = ids
		} else {
			ids = i.scopeIDs[entry]
		}
		if len(ids) == 0 {
			sc.unresolved = append(sc.unresolved, entry)
		}
		for _, id := range ids {
			sc.ids[id] = true
		}
	}
	sc.list = slices.Sorted(maps.Keys(sc.ids))
	i.metrics.scopeUnresolved.Set(float64(len(sc.unresolved)))
	if len(sc.unresolved) > 0 {
		i.log.Info("Pools of the scope unknown to XO; name and address matches wait until they are seen", "pools", sc.unresolved)
	}
	return sc
}

// apply applies one event to the snapshot. Objects of pools outside the scope are dropped; a
// VM that moves out of the scope leaves the inventory.
func (i *Inventory) apply(ev xo.Event) {
	remove := ev.Type == xo.EventRemove
	var ch Change
	var changed bool
	switch {
	case ev.VM != nil:
		ch, changed = i.applyVM(ev.VM, remove)
	case ev.Host != nil:
		ch, changed = i.applyHost(ev.Host, remove)
	case ev.Pool != nil:
		ch, changed = i.applyPool(ev.Pool, remove)
		// Pool membership changes come with server status changes, which only a listing
		// shows; a new pool may also be a scope name seen for the first time.
		i.trigger()
	}
	if changed {
		i.notify([]Change{ch})
	}
}

// applyVM applies a VM's event; changed is false when it changes nothing.
func (i *Inventory) applyVM(vm *xo.VM, remove bool) (ch Change, changed bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	cur := i.snap.Load()
	id := lower(vm.ID)
	vm.ID = id
	internVM(vm)
	old := cur.vms.get(id)
	remove = remove || !cur.scope.has(vm.PoolID)
	if remove && old == nil || !remove && old != nil && vmEqual(old, vm) {
		return Change{}, false
	}
	b := newBuilder(cur, i.opts.Clock.Now())
	b.putVM(id, unless(remove, vm))
	return i.publish(b.done(), Change{Kind: VMChanged, ID: id}), true
}

// applyHost applies a host's event; changed is false when it changes nothing.
func (i *Inventory) applyHost(h *xo.Host, remove bool) (ch Change, changed bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	cur := i.snap.Load()
	id := lower(h.ID)
	h.ID = id
	remove = remove || !cur.scope.has(h.PoolID)
	if remove && cur.hosts[id] == nil {
		return Change{}, false
	}
	b := newBuilder(cur, i.opts.Clock.Now())
	b.putHost(id, unless(remove, h))
	return i.publish(b.done(), Change{Kind: HostChanged, ID: id}), true
}

// applyPool applies a pool's event; changed is false for a pool outside the scope.
func (i *Inventory) applyPool(p *xo.Pool, remove bool) (ch Change, changed bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	cur := i.snap.Load()
	id := lower(p.ID)
	p.ID = id
	if !cur.scope.has(id) {
		return Change{}, false
	}
	b := newBuilder(cur, i.opts.Clock.Now())
	b.putPool(id, unless(remove, p))
	switch {
	case remove:
		// XO removes a pool's objects when it loses the connection to it.
		b.disconnect(id)
	case cur.pools[id] == nil:
		// XO loads a (re)connected pool's objects after reporting its server connected:
		// the pool was loading until now.
		b.reconnect(id)
	}
	return i.publish(b.done(), Change{Kind: PoolChanged, ID: id}), true
}

// publish stores next, the snapshot after the change ch, and records ch for the running relist
// (see touched). Call with mu held.
func (i *Inventory) publish(next *Snapshot, ch Change) Change {
	if i.touched != nil {
		i.touched[ch] = struct{}{}
	}
	i.snap.Store(next)
	return ch
}

// unless returns nil when remove is set, else obj: what an event leaves of an object.
func unless[T any](remove bool, obj *T) *T {
	if remove {
		return nil
	}
	return obj
}

func (i *Inventory) notify(changes []Change) {
	if len(changes) == 0 {
		return
	}
	i.handlersMu.RLock()
	defer i.handlersMu.RUnlock()
	for _, c := range changes {
		i.metrics.changes.WithLabelValues(i.opts.Name, c.Kind.String()).Inc()
		for _, h := range i.handlers {
			h(c)
		}
	}
}

// String names the kind, for metrics.
func (k ChangeKind) String() string {
	switch k {
	case VMChanged:
		return "vm"
	case HostChanged:
		return "host"
	case PoolChanged:
		return "pool"
	}
	return "unknown"
}
