package app

import (
	"context"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

func TestShouldRelease(t *testing.T) {
	const mib = 1 << 20
	// heap: live data, and objects (live or garbage) as the runtime counts them.
	heap := func(allocs, live, objects uint64) heapState {
		return heapState{allocs: allocs, live: live, objects: objects, unused: 1 * mib, free: 1 * mib}
	}
	for _, tc := range []struct {
		name       string
		prev, now  heapState
		staleLive  bool
		wantReturn bool
	}{
		{"quiet, 14 MiB beyond 30 MiB live", heap(100*mib, 30*mib, 40*mib), heap(101*mib, 30*mib, 42*mib), false, true},
		{"busy: 2 MiB allocated since the last look", heap(100*mib, 30*mib, 40*mib), heap(102*mib, 30*mib, 42*mib), false, false},
		{"quiet, excess at the minimum", heap(100*mib, 10*mib, 16*mib), heap(100*mib, 10*mib, 16*mib), false, false},
		{"quiet, 9 MiB beyond 10 MiB live", heap(100*mib, 10*mib, 17*mib), heap(100*mib, 10*mib, 17*mib), false, true},
		{"quiet, 20 MiB beyond 100 MiB live: under a quarter", heap(100*mib, 100*mib, 118*mib), heap(100*mib, 100*mib, 118*mib), false, false},
		{"quiet, 27 MiB beyond 100 MiB live", heap(100*mib, 100*mib, 125*mib), heap(100*mib, 100*mib, 125*mib), false, true},
		// The last collection ran during a burst: its live figure (130 MiB) held the burst's
		// data, now garbage; the heap looks all live.
		{"quiet, live figure from a collection during a burst", heap(300*mib, 130*mib, 130*mib), heap(301*mib, 130*mib, 131*mib), true, true},
		{"busy, live figure from a collection during a burst", heap(300*mib, 130*mib, 130*mib), heap(310*mib, 130*mib, 140*mib), true, false},
	} {
		if got := shouldRelease(tc.prev, tc.now, tc.staleLive); got != tc.wantReturn {
			t.Errorf("%s: shouldRelease = %t, want %t (excess %d MiB)", tc.name, got, tc.wantReturn, tc.now.excess()/mib)
		}
	}
}

// garbage holds the last allocation of TestReleaseHeap's burst, so that the compiler keeps them.
var garbage []byte

// TestReleaseHeap: garbage left by a burst (collections off, so that it stays) is collected and
// returned by releaseHeap once the process is quiet, and the heap then holds little beyond its
// live data.
func TestReleaseHeap(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for range 64 {
		garbage = make([]byte, 1<<20)
	}
	garbage = nil

	log, lines := recordingLogger(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		releaseHeap(ctx, log, 20*time.Millisecond)
	}()
	released := func() bool {
		for _, l := range lines() {
			if strings.Contains(l, "Returned the heap of a burst") {
				return true
			}
		}
		return false
	}
	for !released() && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if !released() {
		t.Fatalf("the heap was not released; log: %v", lines())
	}
	if h := readHeap(newHeapSamples()); h.excess() > releaseMin {
		t.Errorf("after the release the heap holds %d MiB beyond %d MiB of live data", h.excess()>>20, h.live>>20)
	}
}

// recordingLogger returns a logger at verbosity v and a function that returns a copy of the
// lines it logged (their key/value part, funcr's format).
func recordingLogger(v int) (logr.Logger, func() []string) {
	var mu sync.Mutex
	var lines []string
	log := funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{Verbosity: v})
	return log, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(lines)
	}
}
