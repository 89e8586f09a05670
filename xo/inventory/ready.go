package inventory

import (
	"fmt"
	"time"
)

// Readiness and the settle time after a start.
//
// XO's records carry no connection time, and a pool XO shows connected with its pool object
// may still be loading its VMs (XO loads a pool and its hosts first, then its VMs over
// seconds), so a first listing cannot prove a pool complete: every pool of it is untrusted for
// the settle time (fromListing), and a Node that matches only by name or address waits for
// the controllers meanwhile. A replica in that state cannot match as well as a replica that
// has run for longer, so it is not Ready until the pools its first listing showed connected
// are trusted, about SettleTime after that listing. Pools that connect, disconnect or
// reconnect later do not hold readiness back: no replica could vouch for them either.

// firstPools returns the pools s shows connected with their pool object, each with its
// connection time: what the first successful listing records (Inventory.first).
func firstPools(s *Snapshot) *map[string]time.Time {
	m := make(map[string]time.Time, len(s.conn))
	for id, c := range s.conn {
		if s.pools[id] != nil {
			m[id] = c.since
		}
	}
	return &m
}

// Settling returns how many pools of the first successful listing are still settling —
// connected since that listing, shown with their pool object, and not trusted yet — and when
// the last of them may become trusted (its connection time plus the settle time; the listing
// that starts then makes it trusted when it ends). A pool of that listing that has been
// trusted, that XO no longer shows connected with its object, or that reconnected since
// (another connection time) no longer counts; once none counts, none ever does again. Zero
// before the first listing.
func (i *Inventory) Settling() (pending int, until time.Time) {
	first := i.first.Load()
	if first == nil || i.firstSettled.Load() {
		return 0, time.Time{}
	}
	s := i.Snapshot()
	for id, since := range *first {
		c, ok := s.conn[id]
		if !ok || s.pools[id] == nil || !c.since.Equal(since) || !c.trusted.IsZero() {
			continue
		}
		pending++
		if t := since.Add(i.opts.SettleTime); t.After(until) {
			until = t
		}
	}
	if pending == 0 && i.firstSettled.CompareAndSwap(false, true) && len(*first) > 0 {
		i.log.Info("Pools of the first XO listing settled; matches by name and address are trusted", "pools", len(*first))
	}
	return pending, until
}

// SettleCheck returns an error naming the server, the number of pools of its first listing
// still settling and when they should be trusted, while there are any (see Settling). A
// server in trouble holds nothing back: when its last refresh failed or its inventory is not
// current, its pools cannot become trusted until it recovers, on this replica as on any other,
// and one XO server's trouble must not keep the webhook from serving another's Nodes. Nil
// before the first listing: whether a server never listed holds readiness back is the
// Estate's choice (Estate.ReadyCheck).
func (i *Inventory) SettleCheck() error {
	if !i.HasSynced() || i.LastError() != nil || !i.Snapshot().Fresh() {
		return nil
	}
	pending, until := i.Settling()
	if pending == 0 {
		return nil
	}
	return fmt.Errorf("XO server %s: %d pool(s) of the first listing still settling: name and address matches are trusted from about %s (in %s; inventory.settleTime %s after that listing)",
		i.opts.Name, pending, until.UTC().Format(time.RFC3339), max(0, until.Sub(i.opts.Clock.Now())).Round(time.Second), i.opts.SettleTime)
}
