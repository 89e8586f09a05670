package lifecycle

import (
	"sync"
	"time"
)

// backoff hands out per-Node retry delays that double on each consecutive failure, from base up
// to max, and forgets a Node once it succeeds.
type backoff struct {
	base, max time.Duration
	mu        sync.Mutex
	failures  map[string]int
}

func newBackoff(base, max time.Duration) *backoff {
	return &backoff{base: base, max: max, failures: make(map[string]int)}
}

// next records one more failure for key and returns how long to wait before the next try.
func (b *backoff) next(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.failures[key]
	b.failures[key] = n + 1
	d := b.base << min(n, 20)
	if d <= 0 || d > b.max {
		d = b.max
	}
	return d
}

// reset forgets key's failures.
func (b *backoff) reset(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.failures, key)
}
