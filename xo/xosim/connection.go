package xosim

import (
	"context"
	"fmt"
	"time"
)

// XO's connection to a pool goes through steps that clients can observe (xo-server's
// xo-mixins/xen-servers.mjs):
//
//   - Connecting: XO registers the pool's server as connected (status "connected" with poolId
//     in /rest/v0/servers) as soon as XAPI answers, then loads the pool's objects from XAPI's
//     event stream: the pool object and its hosts first, then the VMs, over seconds on a large
//     pool. BeginReconnect, RevealPool and RevealVMs are these steps; ReconnectInStages runs
//     them with delays and ReconnectPool all at once.
//   - Disconnecting: XO drops the pool's objects (remove events, VMs first, then hosts, then
//     the pool) and only then marks the server disconnected. BeginDisconnect and
//     FinishDisconnect are these steps; DisconnectPool runs both.
//   - A disabled server entry ("enabled": false) is disconnected (SetServerEnabled).
//
// Each step is atomic. Changes made to a pool's objects while XO does not hold them show when
// they are revealed.

// withPool runs fn on a pool in one mutation.
func (s *Server) withPool(id string, fn func(t *txn, p *poolState) error) error {
	return s.mutate(func(t *txn) error {
		p := t.st.pools[id]
		if p == nil {
			return notFound("pool", id)
		}
		return fn(t, p)
	})
}

// DisconnectPool simulates XO losing its connection to a pool, in XO's order: the remove
// events of the pool's VMs, then of its hosts, then of the pool itself; last, the pool's
// /servers entry shows status "disconnected" (without poolId, as XO shows it). Single GETs of
// its objects then answer "no such ...". It is BeginDisconnect followed by FinishDisconnect, so
// a concurrent reader may see the steps in between. A disconnected pool is left as is.
func (s *Server) DisconnectPool(id string) error {
	if err := s.BeginDisconnect(id); err != nil {
		return err
	}
	return s.FinishDisconnect(id)
}

// BeginDisconnect is the first step of DisconnectPool: XO drops the pool's VMs (remove events)
// while the pool, its hosts and its /servers entry still look connected.
func (s *Server) BeginDisconnect(id string) error {
	return s.withPool(id, func(t *txn, p *poolState) error {
		if !p.loaded {
			return nil
		}
		t.touchVMsOf(id)
		p.allVMs, p.shown, p.pending = false, map[string]struct{}{}, nil
		return nil
	})
}

// FinishDisconnect completes DisconnectPool: the VMs XO still holds, the hosts and the pool are
// removed (remove events in that order), then the /servers entry turns "disconnected". It also
// ends a staged reconnection.
func (s *Server) FinishDisconnect(id string) error {
	err := s.withPool(id, func(t *txn, p *poolState) error {
		if p.loaded {
			t.touchPoolContents(id)
		}
		p.loaded, p.allVMs, p.shown, p.pending = false, false, nil, nil
		return nil
	})
	if err != nil {
		return err
	}
	// XO marks the server disconnected once it has dropped the pool's objects.
	return s.withPool(id, func(_ *txn, p *poolState) error {
		if !p.loaded {
			p.connected = false
		}
		return nil
	})
}

// ReconnectPool brings a pool back at once: the pool, its hosts, then its VMs reappear (add
// events in that order) with whatever changes were made while XO did not hold them, and the
// server shows "connected". It completes a staged reconnection and is a no-op on a loaded
// pool. It fails when the pool's server entry is disabled.
func (s *Server) ReconnectPool(id string) error {
	return s.withPool(id, func(t *txn, p *poolState) error {
		if p.removed {
			return fmt.Errorf("reconnect pool %s: its server entry was removed (AddServer first)", id)
		}
		if p.spec.ServerDisabled {
			return fmt.Errorf("reconnect pool %s: server %s is disabled", id, p.spec.ServerID)
		}
		if !p.loaded {
			t.touch(collPool, id)
			t.touchHostsOf(id)
		}
		if !p.allVMs {
			t.touchVMsOf(id)
		}
		p.connected, p.loaded, p.allVMs, p.shown, p.pending = true, true, true, nil, nil
		return nil
	})
}

// BeginReconnect is the first step of a staged reconnection: the pool's /servers entry shows
// status "connected" with its poolId, while XO holds none of the pool's objects yet
// (GET /pools/<id> answers 404 "no such pool"; the pool, its hosts and VMs are absent from
// lists). It fails unless the pool is disconnected and its server entry enabled.
func (s *Server) BeginReconnect(id string) error {
	return s.withPool(id, func(_ *txn, p *poolState) error {
		switch {
		case p.removed:
			return fmt.Errorf("reconnect pool %s: its server entry was removed (AddServer first)", id)
		case p.spec.ServerDisabled:
			return fmt.Errorf("reconnect pool %s: server %s is disabled", id, p.spec.ServerID)
		case p.connected:
			return fmt.Errorf("reconnect pool %s: the server is already connected", id)
		}
		p.connected = true
		return nil
	})
}

// RevealPool is the second step of a staged reconnection: the pool object and its hosts appear
// (add events: the pool, then its hosts); the VMs stay absent until RevealVMs. A pool without
// VMs is then fully loaded. It fails unless BeginReconnect came first.
func (s *Server) RevealPool(id string) error {
	return s.withPool(id, func(t *txn, p *poolState) error {
		if !p.connected || p.loaded {
			return fmt.Errorf("reveal pool %s: the pool is not reconnecting (call BeginReconnect first)", id)
		}
		t.touch(collPool, id)
		t.touchHostsOf(id)
		p.loaded, p.allVMs, p.shown, p.pending = true, false, map[string]struct{}{}, nil
		t.revealVMs(p, 0)
		return nil
	})
}

// RevealVMs is the third step of a staged reconnection: the next n VMs of the pool appear (add
// events), in the order they were added to the simulator. It returns how many appeared, fewer
// than n when the pool has no more. Once the last one appears the pool is fully loaded: VMs
// added to it later show at once. It is a no-op on a loaded pool and fails unless RevealPool
// (or BeginDisconnect) came first.
func (s *Server) RevealVMs(poolID string, n int) (int, error) {
	if n <= 0 {
		return 0, fmt.Errorf("reveal VMs of pool %s: n must be positive, not %d", poolID, n)
	}
	revealed := 0
	err := s.withPool(poolID, func(t *txn, p *poolState) error {
		if !p.loaded {
			return fmt.Errorf("reveal VMs of pool %s: the pool is not revealed (call RevealPool first)", poolID)
		}
		if !p.allVMs {
			revealed = t.revealVMs(p, n)
		}
		return nil
	})
	return revealed, err
}

// ReconnectInStages reconnects a disconnected pool the way XO does, in real time:
// BeginReconnect, then after vmInterval RevealPool, then RevealVMs one VM every vmInterval
// until every VM is back. When ctx ends it returns ctx's error, leaving the pool partly loaded
// (ReconnectPool or DisconnectPool finish it off).
func (s *Server) ReconnectInStages(ctx context.Context, poolID string, vmInterval time.Duration) error {
	if err := s.BeginReconnect(poolID); err != nil {
		return err
	}
	if err := sleepCtx(ctx, vmInterval); err != nil {
		return fmt.Errorf("reconnect pool %s in stages: %w", poolID, err)
	}
	if err := s.RevealPool(poolID); err != nil {
		return err
	}
	for {
		loaded, err := s.vmsLoaded(poolID)
		if err != nil || loaded {
			return err
		}
		if err := sleepCtx(ctx, vmInterval); err != nil {
			return fmt.Errorf("reconnect pool %s in stages: %w", poolID, err)
		}
		if _, err := s.RevealVMs(poolID, 1); err != nil {
			return err
		}
	}
}

// vmsLoaded reports whether XO holds every VM of the pool.
func (s *Server) vmsLoaded(id string) (bool, error) {
	s.st.mu.RLock()
	defer s.st.mu.RUnlock()
	p := s.st.pools[id]
	if p == nil {
		return false, notFound("pool", id)
	}
	return p.allVMs, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// revealVMs shows up to n hidden VMs of a loaded pool in insertion order and returns how many
// it showed; when no VM is left hidden, the pool becomes fully loaded.
func (t *txn) revealVMs(p *poolState, n int) int {
	hidden := func(id string) bool {
		v := t.st.vms[id]
		if v == nil || v.spec.PoolID != p.spec.ID {
			return false
		}
		_, shown := p.shown[id]
		return !shown
	}
	// next drops stale entries (VMs removed, moved away or shown) from the head of pending,
	// refilling it from the store when it runs out, so VMs added meanwhile are revealed too.
	next := func() (string, bool) {
		for {
			for len(p.pending) > 0 && !hidden(p.pending[0]) {
				p.pending = p.pending[1:]
			}
			if len(p.pending) > 0 {
				return p.pending[0], true
			}
			for _, id := range t.st.order[collVM] {
				if hidden(id) {
					p.pending = append(p.pending, id)
				}
			}
			if len(p.pending) == 0 {
				return "", false
			}
		}
	}
	revealed := 0
	for ; revealed < n; revealed++ {
		id, ok := next()
		if !ok {
			break
		}
		t.touch(collVM, id)
		p.shown[id] = struct{}{}
	}
	if _, ok := next(); !ok {
		p.allVMs, p.shown, p.pending = true, nil, nil
	}
	return revealed
}

// SetServerEnabled enables or disables the pool's /servers entry, as XO's server.enable and
// server.disable do: disabling shows "enabled": false and disconnects the pool (as
// DisconnectPool); enabling shows "enabled": true and reconnects it (as ReconnectPool). Setting
// the current value is a no-op.
func (s *Server) SetServerEnabled(poolID string, enabled bool) error {
	changed := false
	err := s.withPool(poolID, func(_ *txn, p *poolState) error {
		if p.removed {
			return fmt.Errorf("set server of pool %s enabled: its server entry was removed", poolID)
		}
		changed = p.spec.ServerDisabled == enabled
		p.spec.ServerDisabled = !enabled
		return nil
	})
	if err != nil || !changed {
		return err
	}
	if enabled {
		return s.ReconnectPool(poolID)
	}
	return s.DisconnectPool(poolID)
}

// ServerHeld reports whether XO is told to hold the pool: it exists and its /servers entry is
// listed and enabled, connected or not.
func (s *Server) ServerHeld(poolID string) bool {
	s.st.mu.RLock()
	defer s.st.mu.RUnlock()
	p := s.st.pools[poolID]
	return p != nil && !p.removed && !p.spec.ServerDisabled
}

// PoolConnected reports whether the pool exists and its /servers entry shows it connected; its
// objects may still be loading (see BeginReconnect).
func (s *Server) PoolConnected(id string) bool {
	s.st.mu.RLock()
	defer s.st.mu.RUnlock()
	p := s.st.pools[id]
	return p != nil && p.connected
}

// RemoveServer removes the pool's /servers entry, as XO's server.remove does: XO first
// disconnects from the pool (as DisconnectPool: the pool's VMs, hosts and pool object go, in
// that order), then forgets the entry, which /rest/v0/servers no longer lists (a GET of its id
// answers "no such xenServer"). The simulator keeps the pool's objects, hidden, for AddServer.
func (s *Server) RemoveServer(poolID string) error {
	removed := false
	if err := s.withPool(poolID, func(_ *txn, p *poolState) error {
		removed = p.removed
		return nil
	}); err != nil || removed {
		return err
	}
	if err := s.DisconnectPool(poolID); err != nil {
		return err
	}
	return s.withPool(poolID, func(_ *txn, p *poolState) error {
		p.removed = true
		return nil
	})
}

// AddServer adds back the /servers entry of a pool whose entry RemoveServer removed, as XO's
// server.add does for the same host: a new entry with a new id, enabled, which XO connects to
// at once (autoConnect): the pool, its hosts and its VMs come back as with ReconnectPool. It
// returns the new entry's id. It fails unless the entry was removed.
func (s *Server) AddServer(poolID string) (string, error) {
	id := newUUID()
	err := s.withPool(poolID, func(_ *txn, p *poolState) error {
		if !p.removed {
			return fmt.Errorf("add server of pool %s: its server entry exists", poolID)
		}
		p.removed = false
		p.spec.ServerID = id
		p.spec.ServerDisabled = false
		return nil
	})
	if err != nil {
		return "", err
	}
	return id, s.ReconnectPool(poolID)
}
